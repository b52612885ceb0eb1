"""A worker started as `switchboard worker` starts it enforces actors' time limits (the last
resort bound on a tool body), against the real local Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import dramatiq
import pytest
import redis
from dramatiq.middleware import Retries, TimeLimit

from workers.broker import make_broker
from workers.runtime import start_worker

REDIS_URL = "redis://127.0.0.1:6379/0"
DEADLINE_S = 5.0


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"sbtest-{uuid.uuid4()}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{name}:*"))
    if keys:
        client.delete(*keys)
    client.close()


def test_a_message_over_its_time_limit_is_failed_and_the_worker_goes_on(namespace):
    """Without process_boot (Dramatiq's CLI emits it, `switchboard worker` is not that CLI)
    TimeLimit never watches: the slow message would run to its end and count as done."""
    broker = make_broker(REDIS_URL, namespace=namespace, middleware=[TimeLimit(interval=50), Retries()])
    done: list[str] = []

    def slow() -> None:
        # Short sleeps: a time limit is raised in the thread between two bytecodes, never
        # inside one long C call.
        for _ in range(300):
            time.sleep(0.01)
        done.append("slow")

    dramatiq.actor(slow, broker=broker, queue_name="calls", actor_name="slow", max_retries=0, time_limit=300)
    dramatiq.actor(lambda: done.append("quick"), broker=broker, queue_name="calls", actor_name="quick")
    worker = start_worker(broker, queues=None, threads=1, worker_timeout_ms=200)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        broker.get_actor("slow").send()
        broker.get_actor("quick").send()
        give_up_at = time.monotonic() + DEADLINE_S
        while time.monotonic() < give_up_at and not (
            done == ["quick"] and client.zcard(f"{namespace}:calls.XQ") == 1
        ):
            time.sleep(0.01)
        # One thread: the quick message ran after the slow one was cut off, well before its 3 s.
        assert done == ["quick"]
        assert client.zcard(f"{namespace}:calls.XQ") == 1
    finally:
        worker.stop()
        broker.close()
        client.close()
    assert done == ["quick"]
