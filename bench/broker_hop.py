"""Queue hop latency: ``actor.send()`` → actor body starts, wake-up vs stock Redis consumer.

Run: ``.venv/bin/python bench/broker_hop.py [--redis-url URL]``

For each consumer kind this starts a worker subprocess (8 threads, worker timeout 1 s, as
the ``dramatiq`` CLI would), then measures from just before ``send()`` to the first line of
the actor, in two regimes:

- idle:   n=50, 200 ms apart (each message finds the consumer asleep or blocked);
- steady: n=500 at 200 msg/s.

The latency includes the ``send()`` call itself. Both processes read the same wall clock.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

# Run as a script from the repository root, so the project's packages are not on sys.path yet.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dramatiq
import redis

from workers.broker import BrokerKind, make_broker

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
QUEUE_NAME = "hop"

IDLE_COUNT = 50
IDLE_GAP_S = 0.2
STEADY_COUNT = 500
STEADY_RATE_PER_S = 200
WARM_UP_COUNT = 20
# A pause before each measured run, so the stock consumer's backoff has grown to its cap.
SETTLE_S = 1.5
WORKER_THREADS = 8
WORKER_TIMEOUT_MS = 1_000
# Long enough for the worker process to import and connect on a cold machine.
READY_DEADLINE_S = 20.0
COLLECT_DEADLINE_S = 10.0


def results_key(namespace: str) -> str:
    return f"{namespace}:bench.latencies"


def ready_key(namespace: str) -> str:
    return f"{namespace}:bench.ready"


def declare_hop(broker: dramatiq.Broker, redis_url: str, namespace: str) -> dramatiq.Actor[Any, Any]:
    """The measured actor: it records how long ago its message was sent, in ms."""
    client = redis.Redis.from_url(redis_url)
    key = results_key(namespace)

    def hop(sent_at: float, tag: str) -> None:
        started_ms = (time.time() - sent_at) * 1000
        client.rpush(key, f"{tag}:{started_ms}")

    declared: dramatiq.Actor[Any, Any] = dramatiq.actor(
        broker=broker, queue_name=QUEUE_NAME, actor_name="hop"
    )(hop)
    return declared


def run_worker(kind: BrokerKind, redis_url: str, namespace: str) -> None:
    """The worker subprocess: consume until SIGTERM."""
    broker = make_broker(redis_url, namespace=namespace, consumer=kind)
    declare_hop(broker, redis_url, namespace)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    worker = dramatiq.Worker(broker, worker_threads=WORKER_THREADS, worker_timeout=WORKER_TIMEOUT_MS)
    worker.start()
    redis.Redis.from_url(redis_url).set(ready_key(namespace), 1)
    stopping.wait()
    worker.stop()
    broker.close()


def send_paced(actor: dramatiq.Actor[Any, Any], tag: str, count: int, gap_s: float) -> None:
    """Send ``count`` messages ``gap_s`` apart on a fixed schedule, so slow sends don't drift."""
    start = time.perf_counter()
    for index in range(count):
        delay = start + index * gap_s - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        actor.send(time.time(), tag)


def collect(client: redis.Redis, namespace: str, tag: str, count: int) -> list[float]:
    """Wait for ``count`` latencies tagged ``tag`` and return them."""
    give_up_at = time.monotonic() + COLLECT_DEADLINE_S
    while time.monotonic() < give_up_at:
        listed: list[bytes] = client.lrange(results_key(namespace), 0, -1)  # type: ignore[assignment]
        rows = [row.decode().split(":") for row in listed]
        values = [float(value) for row_tag, value in rows if row_tag == tag]
        if len(values) >= count:
            return values
        time.sleep(0.05)
    raise TimeoutError(f"only {len(values)} of {count} {tag!r} messages arrived")


def measure(kind: BrokerKind, redis_url: str) -> dict[str, list[float]]:
    """Start a worker of ``kind`` and measure the idle and steady regimes against it."""
    namespace = f"sbbench-{uuid.uuid4()}"
    client = redis.Redis.from_url(redis_url)
    worker = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--worker",
            kind,
            "--namespace",
            namespace,
            "--redis-url",
            redis_url,
        ]
    )
    try:
        give_up_at = time.monotonic() + READY_DEADLINE_S
        while not client.exists(ready_key(namespace)):
            if time.monotonic() > give_up_at or worker.poll() is not None:
                raise RuntimeError(f"{kind} worker did not start")
            time.sleep(0.05)

        broker = make_broker(redis_url, namespace=namespace, consumer=kind)
        hop = declare_hop(broker, redis_url, namespace)
        send_paced(hop, "warm", WARM_UP_COUNT, 0.01)
        collect(client, namespace, "warm", WARM_UP_COUNT)

        time.sleep(SETTLE_S)
        send_paced(hop, "idle", IDLE_COUNT, IDLE_GAP_S)
        idle = collect(client, namespace, "idle", IDLE_COUNT)

        time.sleep(SETTLE_S)
        send_paced(hop, "steady", STEADY_COUNT, 1 / STEADY_RATE_PER_S)
        steady = collect(client, namespace, "steady", STEADY_COUNT)
        broker.close()
        return {"idle": idle, "steady": steady}
    finally:
        worker.terminate()
        worker.wait(timeout=10)
        keys = list(client.scan_iter(match=f"{namespace}:*"))
        if keys:
            client.delete(*keys)
        client.close()


def percentiles(values: list[float]) -> str:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return f"{cuts[49]:6.2f} / {cuts[94]:6.2f} / {cuts[98]:6.2f}  (max {max(values):6.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    parser.add_argument("--worker", choices=["wake", "stock"], help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        run_worker(args.worker, args.redis_url, args.namespace)
        return

    results = {kind: measure(kind, args.redis_url) for kind in ("wake", "stock")}
    print(f"\nsend() → actor start, ms; worker: {WORKER_THREADS} threads, timeout {WORKER_TIMEOUT_MS} ms")
    print(f"{'':9}{'p50 /    p95 /    p99':>24}")
    for regime, label in (
        ("idle", f"idle n={IDLE_COUNT} @{IDLE_GAP_S * 1000:.0f} ms"),
        ("steady", f"steady n={STEADY_COUNT} @{STEADY_RATE_PER_S}/s"),
    ):
        print(label)
        for kind, figures in results.items():
            print(f"  {kind:6} {percentiles(figures[regime])}")


if __name__ == "__main__":
    main()
