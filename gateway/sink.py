"""`EventSink`: numbers each durable event of a session and enqueues it, off the event loop.

Dramatiq's `send` and Redis `INCR` are blocking calls (~0.5 ms each); they run on one
dedicated thread, which also keeps every session's events in the order they were submitted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import dramatiq
import redis

from pipeline.envelope import EventEnvelope
from pipeline.names import ADMISSION_QUEUE, EVENT_ACTOR, queue_for

logger = logging.getLogger(__name__)

T = TypeVar("T")

# How long the sink keeps trying to number and enqueue one event while Redis is unreachable
# (a restart takes a second or two); past this the event is logged as lost.
ENQUEUE_PATIENCE_S = 10.0
ENQUEUE_FIRST_RETRY_S = 0.05
ENQUEUE_MAXIMUM_RETRY_S = 1.0


class EventSink:
    def __init__(self, redis_url: str, broker: dramatiq.Broker, gateway_id: str, namespace: str) -> None:
        self._redis = redis.Redis.from_url(redis_url)
        self._broker = broker
        self._gateway_id = gateway_id
        self._namespace = namespace
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-sink")
        # The highest seq this gateway issued per session: if Redis lost its counters (a
        # restart without persistence), numbering resumes above it instead of reusing seqs.
        self._issued: dict[str, int] = {}

    def submit_event(
        self, session_id: str, generation: int, event: dict[str, Any], received_at: float
    ) -> Future[int]:
        """Number and enqueue one durable event; returns a future of its seq."""
        future = self._executor.submit(self._enqueue_event, session_id, generation, event, received_at)
        future.add_done_callback(_log_failure)
        return future

    def submit_request(self, actor_name: str, **kwargs: Any) -> Future[None]:
        """Enqueue an API request for an admission actor."""
        future = self._executor.submit(self._enqueue, ADMISSION_QUEUE, actor_name, kwargs)
        future.add_done_callback(_log_failure)
        return future

    def submit_incident(
        self, session_id: str | None, code: str, summary: str, context: dict[str, Any]
    ) -> None:
        self._executor.submit(
            self._enqueue,
            ADMISSION_QUEUE,
            "record_incident",
            {"session_id": session_id, "code": code, "summary": summary, "context": context},
        ).add_done_callback(_log_failure)

    def within_rate(self, session_id: str, kind: str, per_minute: int) -> Future[bool]:
        """Count one use of `kind` for the session in the current minute (shared by every
        gateway through Redis); answers whether it is within `per_minute`."""

        def count() -> bool:
            key = f"{self._namespace}:rate:{kind}:{session_id}:{int(time.time() // 60)}"
            pipeline = self._redis.pipeline()
            pipeline.incr(key)
            pipeline.expire(key, 120)
            used, _ = pipeline.execute()
            return int(used) <= per_minute

        return self._executor.submit(count)

    def forget(self, session_id: str) -> None:
        self._executor.submit(self._issued.pop, session_id, None)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._redis.close()

    def _enqueue_event(
        self, session_id: str, generation: int, event: dict[str, Any], received_at: float
    ) -> int:
        seq = _patiently(lambda: self._next_seq(session_id))
        envelope = EventEnvelope(
            session_id=session_id,
            seq=seq,
            generation=generation,
            gateway_id=self._gateway_id,
            received_at=received_at,
            event=event,
        )
        queue = queue_for(str(event.get("type", "")))
        message = {"envelope": envelope.model_dump(mode="json")}
        # Retried with the same seq: if a lost reply hid a stored message, the copy is a
        # redelivered seq, which the workers apply once.
        _patiently(lambda: self._enqueue(queue, EVENT_ACTOR[queue], message))
        return seq

    def _next_seq(self, session_id: str) -> int:
        key = f"{self._namespace}:seq:{session_id}"
        seq = int(self._redis.incr(key))
        issued = self._issued.get(session_id, 0)
        if seq <= issued:
            seq = issued + 1
            self._redis.set(key, seq)
        self._issued[session_id] = seq
        return seq

    def _enqueue(self, queue: str, actor_name: str, kwargs: dict[str, Any]) -> None:
        message: dramatiq.Message[Any] = dramatiq.Message(
            queue_name=queue,
            actor_name=actor_name,
            args=(),
            kwargs=kwargs,
            options={},
            message_timestamp=int(time.time() * 1000),
        )
        self._broker.enqueue(message)


def _patiently(work: Callable[[], T]) -> T:
    """Run a Redis operation, retrying with backoff through a short outage (a restart), so a
    durable event is not dropped the moment Redis blinks. Later events wait behind it on the
    sink thread, which keeps the session's order."""
    deadline = time.monotonic() + ENQUEUE_PATIENCE_S
    delay = ENQUEUE_FIRST_RETRY_S
    while True:
        try:
            return work()
        except redis.RedisError:
            if time.monotonic() >= deadline:
                raise
            logger.warning("Redis unavailable while enqueueing; retrying in %.2f s", delay)
            time.sleep(delay)
            delay = min(delay * 2, ENQUEUE_MAXIMUM_RETRY_S)


def _log_failure(future: Future[Any]) -> None:
    error = future.exception()
    if error is not None:
        logger.error("enqueue failed: %r", error)
