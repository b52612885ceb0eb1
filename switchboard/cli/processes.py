"""The commands that are one of Switchboard's processes (gateway, worker, migrate) or start their
own (demo, replay, eval, bench)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from pipeline.platform.config import Settings
from switchboard.cli.reach import IN_DATABASE, THROUGH_GATEWAY, apply_migrations, reach_services
from switchboard.folders import metrics_folder


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`demo`, `gateway`, `worker`, `migrate`, `replay`, `eval` and `bench`."""
    demo = commands.add_parser(
        "demo", help="place a scripted three-turn call through every process (starts its own)"
    )
    demo.add_argument(
        "--phone",
        action="store_true",
        help="a phone call instead: routed, rung through the SIP door, answered",
    )
    demo.add_argument(
        "--provider",
        choices=["realtime", "live"],
        default="realtime",
        help="the provider protocol of the call: OpenAI's Realtime API (the default) or its Live API",
    )
    demo.add_argument(
        "--campaign",
        action="store_true",
        help="a small campaign instead, on the Live API: every outcome, and its table",
    )
    demo.set_defaults(run=_demo)
    gateway = commands.add_parser(
        "gateway", help="run a gateway process: the API and the calls' sockets (Redis, not the database)"
    )
    gateway.add_argument(
        "--port", type=int, help="the API's port (default SWITCHBOARD_GATEWAY_PORT; 0: any free port)"
    )
    gateway.set_defaults(run=_gateway)
    worker = commands.add_parser(
        "worker", help="run a worker process (all queues): the calls' decisions, in the database and Redis"
    )
    worker.add_argument(
        "--threads", type=int, help="messages handled at once (default SWITCHBOARD_WORKER_THREADS)"
    )
    worker.add_argument("--queues", help="comma-separated queues to consume (default: all)")
    worker.set_defaults(run=_worker)
    commands.add_parser("migrate", help=f"apply the schema's migrations {IN_DATABASE}").set_defaults(
        run=_migrate
    )
    replay = commands.add_parser(
        "replay", help="push a recorded call through the real pipeline (starts its own)"
    )
    replay.add_argument("file", type=Path, help="the recording, JSON lines (from `sessions export`)")
    replay.add_argument("--json", action="store_true", help="print controls and a summary as JSON lines")
    replay.add_argument("--speed", type=float, default=1.0, help="playback speed (1 = recorded timing)")
    replay.add_argument(
        "--provider-log", type=Path, help="also write the simulator's log of the call (events, controls)"
    )
    replay.add_argument(
        "--open-loop",
        action="store_true",
        help='play on the recorded clock whatever the host sends (as a header saying "host": "other" does)',
    )
    replay.add_argument(
        "--gate-timeout",
        type=float,
        default=60.0,
        help="closed loop: seconds to wait for the host's control before the replay fails (60)",
    )
    replay.set_defaults(run=_replay)
    evals = commands.add_parser(
        "eval",
        help=f"run eval cases on fresh sessions: on a simulator it starts, or {THROUGH_GATEWAY} (--gateway)",
    )
    evals.add_argument("action", choices=["run"], help="what to do")
    evals.add_argument("path", type=Path, help="a case file, or a folder of them (*.json)")
    evals.add_argument("--repeat", type=int, default=1, help="run each case N times and report pass rates")
    evals.add_argument("--junit", type=Path, help="also write JUnit XML to this file")
    evals.add_argument(
        "--typed", action="store_true", help="type the caller's lines (the simulator speaks them)"
    )
    evals.add_argument(
        "--gateway",
        help="run against this gateway's API (its provider; the lines are typed) instead of a simulator",
    )
    evals.add_argument("--judge-model", help="the judge model (default gpt-4.1-mini with --gateway)")
    evals.add_argument("--judge-base-url", help="an OpenAI-compatible endpoint for the judge")
    evals.set_defaults(run=_eval)
    bench = commands.add_parser(
        "bench", help="benchmarks: latency and capacity in one run, or either (starts its own)"
    )
    bench.add_argument(
        "which",
        nargs="?",
        choices=["all", "latency", "capacity"],
        default="all",
        help="which benchmark (default: all)",
    )
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.add_argument("--save", type=Path, help="all: also write the figures as JSON to this file")
    bench.add_argument("--calls", type=int, default=50, help="latency: concurrent calls under load")
    bench.add_argument(
        "--max-calls", type=int, default=800, help="capacity: the highest level of concurrent calls to try"
    )
    bench.add_argument(
        "--levels",
        type=lambda text: tuple(int(part) for part in text.split(",")),
        help="capacity: only these levels of concurrent calls, e.g. 50,100,200 (no scaling or held calls)",
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="latency: only the floor, idle event → control, idle tool turnaround and the peer",
    )
    bench.set_defaults(run=_bench)


def _demo(settings: Settings, arguments: argparse.Namespace) -> int:
    from switchboard.demo import run_demo

    return run_demo(settings, phone=arguments.phone, provider=arguments.provider, campaign=arguments.campaign)


def _gateway(settings: Settings, arguments: argparse.Namespace) -> int:
    return run_gateway(settings, arguments.port)


def _worker(settings: Settings, arguments: argparse.Namespace) -> int:
    queues = set(arguments.queues.split(",")) if arguments.queues else None
    return run_worker(settings, arguments.threads, queues)


def _migrate(settings: Settings, _arguments: argparse.Namespace) -> int:
    services = reach_services(settings)
    print(f"applied: {', '.join(apply_migrations(services)) or 'nothing new'}")
    return 0


def _replay(settings: Settings, arguments: argparse.Namespace) -> int:
    from switchboard.replay import run_replay

    return run_replay(
        settings,
        arguments.file,
        as_json=arguments.json,
        speed=arguments.speed,
        provider_log=arguments.provider_log,
        closed_loop=not arguments.open_loop,
        gate_timeout_s=arguments.gate_timeout,
    )


def _eval(settings: Settings, arguments: argparse.Namespace) -> int:
    from switchboard.evals import run_evals

    return run_evals(
        settings,
        arguments.path,
        repeat=arguments.repeat,
        junit=arguments.junit,
        typed=arguments.typed,
        gateway=arguments.gateway,
        judge_model=arguments.judge_model,
        judge_base_url=arguments.judge_base_url,
    )


def _bench(settings: Settings, arguments: argparse.Namespace) -> int:
    if arguments.which == "all":
        from bench.everything import run_everything

        return run_everything(
            settings,
            as_json=arguments.json,
            load_calls=arguments.calls,
            max_calls=arguments.max_calls,
            save=arguments.save,
        )
    if arguments.which == "capacity":
        from bench.capacity import run_capacity_bench

        return run_capacity_bench(
            settings, as_json=arguments.json, max_calls=arguments.max_calls, levels=arguments.levels
        )
    from bench.latency import run_latency_bench

    return run_latency_bench(
        settings, as_json=arguments.json, load_calls=arguments.calls, quick=arguments.quick
    )


def _wait_for_signal() -> None:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()


def run_worker(settings: Settings, threads: int | None, queues: set[str] | None = None) -> int:
    """Run a worker on `queues` (all when None) until SIGTERM or SIGINT, then drain it."""
    from models.db import database_answers
    from switchboard.observability import init_sentry
    from switchboard.tracing import init_tracing
    from workers import metrics, runtime, tracing
    from workers.health import WorkerHealth
    from workers.redis_watch import ConsumerRetries, RedisWatch

    # Before any server is reached: a folder it cannot write is one line at start, not a
    # traceback once it runs (and a restart into the same).
    counted_in = metrics_folder(settings) if settings.metrics else None
    services = reach_services(settings)
    init_sentry(settings, "worker")
    traced = init_tracing("worker")
    if traced is not None:
        tracing.use(traced.get_tracer("switchboard.worker"))
    apply_migrations(services)
    if counted_in is not None:
        metrics.use_directory(counted_in)
    rt = runtime.configure(settings, services.database_url, services.redis_url)
    if settings.metrics:
        metrics.count_messages(rt.broker)
    import workers.actors  # noqa: F401  (declares the actors on the configured broker)

    declared = rt.broker.get_declared_queues()
    unknown = (queues or set()) - declared
    if unknown:
        print(
            f"switchboard worker: unknown queues {sorted(unknown)}; known: {sorted(declared)}",
            file=sys.stderr,
        )
        return 2
    worker = runtime.start_worker(rt.broker, queues=queues, threads=threads or settings.worker_threads)
    # Redis going away is said once, and its return once, instead of Dramatiq's line per retry.
    for handler in logging.getLogger().handlers:
        handler.addFilter(ConsumerRetries())
    watch = RedisWatch(services.redis_url)
    watch.start()
    served = ""
    if settings.metrics:
        port = metrics.serve(settings.worker_metrics_host, settings.worker_metrics_port)
        # None: the machine's port is another worker's, which serves this one's metrics too.
        served = f" metrics={port}" if port is not None else " metrics=elsewhere"
    health = WorkerHealth(lambda: watch.is_reachable, database_answers)
    if settings.worker_health_port is not None:
        served += f" health={health.serve(settings.worker_health_host, settings.worker_health_port)}"
    print(f"worker ready pid={os.getpid()} queues={','.join(sorted(queues or declared))}{served}", flush=True)
    _wait_for_signal()
    # Not ready from now on; Dramatiq's stop waits for the messages the worker holds.
    health.drain()
    print("worker draining: finishing the messages it holds", flush=True)
    worker.stop()
    watch.stop()
    health.stop()
    if settings.metrics:
        metrics.process_exited()
    rt.broker.close()
    return 0


def _gateway_id_taken(redis_url: str, settings: Settings) -> bool:
    from gateway.liveness import held_elsewhere
    from gateway.redis_clients import redis_client

    client = redis_client(redis_url)
    try:
        return held_elsewhere(client, settings.broker_namespace, settings.gateway_id)
    finally:
        client.close()


def run_gateway(settings: Settings, port: int | None) -> int:
    """Run a gateway until SIGTERM or SIGINT (then drain it; a second signal stops it as it is)."""
    from gateway import tracing
    from gateway.app import Gateway
    from gateway.liveness import GatewayIdTaken
    from gateway.providers.realtime import provider_from
    from pipeline.api.roles import DEVELOPMENT_TOKEN, is_loopback
    from switchboard.observability import init_sentry
    from switchboard.tracing import init_tracing
    from workers.broker import make_broker

    if settings.api_token == DEVELOPMENT_TOKEN and not is_loopback(settings.gateway_host):
        # Anyone who can reach the address would hold the deployment's admin token.
        print(
            f"switchboard: refusing to listen on {settings.gateway_host} with the development API token;"
            " set SWITCHBOARD_API_TOKEN (and make keys: switchboard keys add)",
            file=sys.stderr,
        )
        return 2
    # The gateway talks to Redis only; the workers hold the database.
    services = reach_services(settings, database=False)
    init_sentry(settings, "gateway")
    traced = init_tracing("gateway")
    if traced is not None:
        tracing.use(traced.get_tracer("switchboard.gateway"), with_content=settings.trace_content)
    overrides: dict[str, Any] = {}
    if port is not None:
        overrides["gateway_port"] = port
    settings = settings.model_copy(update=overrides)
    broker = make_broker(
        services.redis_url, namespace=settings.broker_namespace, consumer=settings.broker_consumer
    )

    async def serve() -> None:
        # Before anything writes under the id: a second gateway under a running one's id would
        # overwrite its restart marker and share its control queue.
        if await asyncio.to_thread(_gateway_id_taken, services.redis_url, settings):
            raise GatewayIdTaken(
                f"a gateway with id {settings.gateway_id!r} is running in this deployment"
                f" ({settings.broker_namespace!r}): give this one another SWITCHBOARD_GATEWAY_ID"
            )
        gateway = Gateway(settings, services.redis_url, broker, provider_from(settings))
        try:
            await gateway.start()
        except BaseException:
            await gateway.stop()
            raise
        print(
            f"gateway ready id={gateway.gateway_id} http={gateway.http_port} provider={settings.provider}",
            flush=True,
        )
        signals: asyncio.Queue[int] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, signals.put_nowait, signum)
        await signals.get()
        # The first signal drains (no new calls; the calls held here move to a peer); a second
        # one, or the drain's deadline, stops the gateway as it is.
        draining = asyncio.ensure_future(gateway.drain(settings.drain_seconds))
        again = asyncio.ensure_future(signals.get())
        await asyncio.wait({draining, again}, return_when=asyncio.FIRST_COMPLETED)
        again.cancel()
        draining.cancel()
        await gateway.stop()

    try:
        asyncio.run(serve())
    except GatewayIdTaken as taken:
        print(f"switchboard gateway: {taken}", file=sys.stderr)
        return 2
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        print(
            f"switchboard gateway: {settings.gateway_host}:{settings.gateway_port} is in use (another"
            " gateway?): give this one another port (--port or SWITCHBOARD_GATEWAY_PORT)",
            file=sys.stderr,
        )
        return 2
    return 0
