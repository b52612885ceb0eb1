"""Process-wide wiring for workers: settings, the broker, the database, the publisher.

Entry points call `configure` before `workers.actors` is imported (Dramatiq binds actors to
the broker that is current at declaration); a bare import configures from the environment.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

import dramatiq
import dramatiq.brokers.redis
from dramatiq.middleware import CurrentMessage, Retries, TimeLimit

from models import outbound
from models.db import connect, database, reopen
from pipeline.platform.config import Settings, settings_from
from pipeline.platform.names import TOOL_RUNS_QUEUE, worker_pools
from pipeline.privacy.sealing import DeploymentKey, parse_deployment_key
from workers.broker import WakeRedisBroker, make_broker
from workers.dead_letters import keeper
from workers.emit import ControlPublisher
from workers.middleware import ReconnectAfterDatabaseLoss, ReportDeadLetters, SessionTag, WarmConnections
from workers.tools.registry import HandlerRegistry, Registry, load_handlers, load_registry


@dataclass
class Runtime:
    settings: Settings
    database_url: str
    redis_url: str
    broker: dramatiq.brokers.redis.RedisBroker
    publisher: ControlPublisher
    registry: Registry
    # The delegation handlers a Live session's delegations run.
    handlers: HandlerRegistry
    # The deployment keys (current first): they wrap each session's private key.
    keys: tuple[DeploymentKey, ...] = ()


_current: Runtime | None = None


def configure(settings: Settings, database_url: str, redis_url: str) -> Runtime:
    """Bind the database and the broker for this process (once)."""
    global _current
    if _current is not None:
        return _current
    connect(database_url)
    broker = make_broker(
        redis_url,
        namespace=settings.broker_namespace,
        consumer=settings.broker_consumer,
        heartbeat_timeout_ms=settings.broker_heartbeat_timeout_ms,
        # Only what the actors use: time limits (tool bodies), retries, and the current message
        # (a call's message that finds the database away puts itself back to wait:
        # workers.outages). Dramatiq's other defaults (AgeLimit, ShutdownNotifications,
        # Callbacks, Pipelines) act on options no actor sets, and each would still cost every
        # message its hooks.
        middleware=[TimeLimit(), Retries(), CurrentMessage()],
    )
    if isinstance(broker, WakeRedisBroker):
        # A message given up on is kept in PostgreSQL before it leaves Redis (workers.dead_letters).
        broker.keep_dead_letter = keeper(settings.broker_namespace)
    publisher = ControlPublisher(redis_url, settings.broker_namespace)

    def warm() -> None:
        database.connect(reuse_if_open=True)
        publisher.warm()

    broker.add_middleware(SessionTag())
    broker.add_middleware(WarmConnections(warm))
    broker.add_middleware(ReconnectAfterDatabaseLoss(reopen))
    # Dramatiq runs after-hooks in reverse order: placed before Retries, it sees its verdict.
    broker.add_middleware(ReportDeadLetters(), before=Retries)
    # Declared up front so a tool_runs worker can start before the tools work adds its actors.
    broker.declare_queue(TOOL_RUNS_QUEUE)
    dramatiq.set_broker(broker)
    modules = [path.strip() for path in settings.tool_modules.split(",") if path.strip()]
    handler_modules = [path.strip() for path in settings.delegation_modules.split(",") if path.strip()]
    keys = deployment_keys(settings)
    # The trunks' passwords are encrypted under the same keys; this process may dial.
    outbound.use_keys(keys)
    _current = Runtime(
        settings,
        database_url,
        redis_url,
        broker,
        publisher,
        load_registry(modules),
        load_handlers(handler_modules),
        keys,
    )
    return _current


def deployment_keys(settings: Settings) -> tuple[DeploymentKey, ...]:
    """The deployment keys in effect, current first. `switchboard worker` checked them at start
    (and put a generated embedded key into the environment); a worker without one cannot make
    or open any session's key, so it refuses to run."""
    current = settings.data_key or os.environ.get("SWITCHBOARD_DATA_KEY")
    if not current:
        raise RuntimeError("workers need SWITCHBOARD_DATA_KEY (`switchboard worker` checks it at start)")
    keys = [parse_deployment_key(current)]
    previous = settings.data_key_previous or os.environ.get("SWITCHBOARD_DATA_KEY_PREVIOUS", "")
    if previous.strip():
        older = parse_deployment_key(previous)
        if older.key_id != keys[0].key_id:
            keys.append(older)
    return tuple(keys)


def start_worker(
    broker: dramatiq.Broker, *, queues: set[str] | None, threads: int, worker_timeout_ms: int = 1_000
) -> Pools:
    """Boot this process's middleware and start a Dramatiq worker on ``broker``'s actors
    (declared by now), one per pool of the queues it consumes (`pipeline.platform.names.worker_pools`):
    the deliveries to apps beside a call's queues get threads of their own. Dramatiq's own CLI
    emits process_boot once the actors are imported; `switchboard worker` is not that CLI, and
    without it TimeLimit never starts the thread that enforces time limits (a tool body's
    last-resort bound)."""
    broker.emit_after("process_boot")
    consumed = frozenset(queues) if queues else frozenset(broker.get_declared_queues())
    pools = worker_pools(consumed, threads)
    if len(pools) > 1 and not any(isinstance(kept, _PoolConsumers) for kept in broker.logger.filters):
        broker.logger.addFilter(_PoolConsumers())
    workers = []
    for pool in pools:
        worker = dramatiq.Worker(
            broker, queues=set(pool.queues), worker_threads=pool.threads, worker_timeout=worker_timeout_ms
        )
        worker.start()
        workers.append(worker)
    return Pools(tuple(workers))


class Pools:
    """A worker process's Dramatiq workers, one per pool. Dramatiq's docstring asks for one
    Worker a process, since each adds its consumer middleware to the one broker; each of these
    consumes only its own pool's queues (its whitelist), so the consumers never meet, and the
    process's sweeps start once (`workers.middleware.Sweeps`)."""

    def __init__(self, workers: tuple[dramatiq.Worker, ...]) -> None:
        self.workers = workers

    def stop(self) -> None:
        """Drain every pool at once: a delivery still waiting on an app's server holds up no
        other pool's drain."""
        stopping = [threading.Thread(target=worker.stop, name="pool-drain") for worker in self.workers]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()


class _PoolConsumers(logging.Filter):
    """Drops Dramatiq's warning that a second Worker's consumer middleware is "of the same type
    twice": each pool's watches its own queues, and a clean start warns nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(_TWICE)):
            return True
        added = record.args[0] if isinstance(record.args, tuple) and record.args else None
        return type(added).__name__ != "_WorkerMiddleware"


_TWICE = "You're adding a middleware of the same type twice"


def current() -> Runtime:
    """The configured runtime, or one configured from the environment's explicit URLs."""
    if _current is not None:
        return _current
    settings = settings_from(os.environ)
    if not settings.database_url or not settings.redis_url:
        raise RuntimeError(
            "workers need SWITCHBOARD_DATABASE_URL and SWITCHBOARD_REDIS_URL "
            "(run them through `switchboard worker`, which finds or starts the services)"
        )
    return configure(settings, settings.database_url, settings.redis_url)
