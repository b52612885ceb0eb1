"""Dramatiq middleware: the session id travels to Sentry as a tag; worker threads open their
connections when they start, not on the first event of a call."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import dramatiq
import sentry_sdk

from models.db import database, is_connection_lost

logger = logging.getLogger(__name__)


class SessionTag(dramatiq.Middleware):
    """Tags the Sentry scope of each message with the session it concerns."""

    def before_process_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        session_id = _session_of(message)
        if session_id is not None:
            sentry_sdk.set_tag("session_id", session_id)


class WarmConnections(dramatiq.Middleware):
    """Opens each worker thread's PostgreSQL connection and control-queue producer as the
    thread boots. Both are per thread and opened lazily otherwise, so the first event each
    thread handles would pay for a connect (measured: 10-100 ms) in the middle of a call."""

    def __init__(self, warm: Callable[[], None]) -> None:
        self._warm = warm

    def after_worker_thread_boot(self, broker: dramatiq.Broker, thread: Any) -> None:
        self._warm()


class ReconnectAfterDatabaseLoss(dramatiq.Middleware):
    """Drops a worker thread's PostgreSQL connection when a message failed on it, so the retry
    opens a fresh one: peewee keeps a dead connection (a PostgreSQL restart) until closed."""

    def __init__(self, close: Callable[[], None]) -> None:
        self._close = close

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: dramatiq.MessageProxy,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        if exception is not None and is_connection_lost(exception):
            self._close()


class Sweeps(dramatiq.Middleware):
    """The periodic sweeps of a worker process, each on a thread of its own, started when the
    worker boots: the timer sweep fires timers whose delayed message was lost, and others (the
    retention sweep erases the sessions whose retention is over). Several processes may sweep
    at once: each claims its rows with SKIP LOCKED.

    One middleware for every sweep: Dramatiq warns, at every start, about a middleware type
    added twice, and a sweep each made three warnings greet a clean start. A process runs one
    Dramatiq worker per pool (`workers.runtime.start_worker`), each booting: the sweeps start with
    the first, and stop when the first begins to shut down."""

    def __init__(self) -> None:
        self._sweeps: list[tuple[Callable[[], int], float, str, str | None]] = []
        self._stopping = threading.Event()
        self._running = False

    def add(
        self,
        sweep: Callable[[], int],
        interval_s: float,
        *,
        name: str,
        report: str | None,
    ) -> None:
        """Run `sweep` every `interval_s` on a thread called `name`; `report` warns what a sweep
        that did something did (its count the one placeholder), None when that is routine."""
        self._sweeps.append((sweep, interval_s, name, report))

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        if self._running:
            return
        self._running = True
        self._stopping.clear()
        for sweep, interval_s, name, report in self._sweeps:
            threading.Thread(
                target=self._run, args=(sweep, interval_s, name, report), name=name, daemon=True
            ).start()

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        self._stopping.set()
        self._running = False

    def _run(self, sweep: Callable[[], int], interval_s: float, name: str, report: str | None) -> None:
        while not self._stopping.wait(interval_s):
            try:
                done = sweep()
            except Exception as error:  # a database or Redis outage: the next sweep retries
                logger.exception("%s: a sweep failed; the next sweep retries", name)
                if is_connection_lost(error):
                    database.close()
                continue
            if done and report is not None:
                logger.warning(report, done)


class ReportDeadLetters(dramatiq.Middleware):
    """One Sentry event per message that will not be retried again (dead-lettered), tagged with
    its session and actor: a failed attempt that a retry may still fix is not a report.
    Its after-hook must run after Retries', which decides that: Dramatiq runs after-hooks in
    reverse order, so it is added before Retries."""

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: dramatiq.MessageProxy,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        if exception is None or not message.failed:
            return
        with sentry_sdk.new_scope() as scope:
            session_id = _session_of(message)
            if session_id is not None:
                scope.set_tag("session_id", session_id)
            scope.set_tag("actor", message.actor_name)
            scope.set_tag("dead_letter", "true")
            scope.set_context(
                "dead_letter",
                {
                    "message_id": message.message_id,
                    "queue": message.queue_name,
                    "retries": message.options.get("retries", 0),
                },
            )
            scope.fingerprint = ["dead_letter", message.actor_name, type(exception).__name__]
            # A new exception chained to the failure: Sentry drops a second capture of the same
            # exception object (its Dramatiq middleware saw it on every attempt).
            retries = message.options.get("retries", 0)
            try:
                raise DeadLettered(
                    f"{message.actor_name} dead-lettered after {retries} retries: {exception!r}"
                ) from exception
            except DeadLettered as report:
                sentry_sdk.capture_exception(report)


class DeadLettered(Exception):
    """A message that failed for good: it is in the dead-letter queue (`switchboard dlq`)."""


def _session_of(message: dramatiq.MessageProxy) -> str | None:
    if "session_id" in message.kwargs:
        return str(message.kwargs["session_id"])
    for argument in message.args:
        if isinstance(argument, dict) and isinstance(argument.get("session_id"), str):
            return str(argument["session_id"])
    return None
