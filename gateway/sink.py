"""`EventSink`: numbers each durable event of a session and enqueues it, off the event loop.

Dramatiq's `send` and Redis `INCR` are blocking calls (~0.5 ms each); they run on one
dedicated thread, which also keeps every session's events in the order they were submitted.
Events submitted while that thread is busy are taken together: one pipelined round trip
numbers all of them and one enqueues all of them, so a burst costs two round trips, not two
per event (at 100 calls, numbering and enqueueing one event at a time queued events for tens
of milliseconds behind each other).

Redis here keeps nothing on disk, so a Redis restart loses the events that sat in the queues
unfetched. The sink holds each event it enqueued until a control batch reports its session
applied that far (or 30 s pass), and watches a marker key it wrote: when the marker is gone,
Redis lost its data, and every held event is enqueued again with its seq. The workers apply a
seq once, so a copy of an event that was applied changes nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
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
# Enqueued events are held for retransmission this long (an event not applied by then is
# stuck behind something a retransmission cannot fix), and at most this many per session.
RETRANSMIT_WINDOW_S = 30.0
RETRANSMIT_MAXIMUM_PER_SESSION = 1_024
# How often the sink checks that Redis still has its marker (i.e. did not restart empty).
MARKER_CHECK_S = 0.25


@dataclass(frozen=True, slots=True)
class _Pending:
    session_id: str
    generation: int
    event: dict[str, Any]
    received_at: float
    future: Future[int]


@dataclass(frozen=True, slots=True)
class _Held:
    seq: int
    queue: str
    message: dict[str, Any]
    enqueued_at: float


class EventSink:
    def __init__(self, redis_url: str, broker: dramatiq.Broker, gateway_id: str, namespace: str) -> None:
        self._redis = redis.Redis.from_url(redis_url)
        self._broker = broker
        self._gateway_id = gateway_id
        self._namespace = namespace
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-sink")
        # Events waiting for the sink thread, in submission order, and whether a flush of them
        # is already queued on it.
        self._pending: list[_Pending] = []
        self._pending_lock = threading.Lock()
        self._flush_queued = False
        # The highest seq this gateway issued per session: if Redis lost its counters (a
        # restart without persistence), numbering resumes above it instead of reusing seqs.
        self._issued: dict[str, int] = {}
        # Touched only on the sink thread: events enqueued and not yet known applied.
        self._held: dict[str, deque[_Held]] = {}
        self._marker_key = f"{namespace}:gateway-marker:{gateway_id}"
        self._marker = uuid.uuid4().hex
        self.retransmitted = 0
        self._executor.submit(self._set_marker).add_done_callback(_log_failure)
        self._closing = threading.Event()
        self._watcher = threading.Thread(target=self._watch_marker, name="sink-marker", daemon=True)
        self._watcher.start()

    def submit_event(
        self, session_id: str, generation: int, event: dict[str, Any], received_at: float
    ) -> Future[int]:
        """Number and enqueue one durable event; returns a future of its seq."""
        future: Future[int] = Future()
        future.add_done_callback(_log_failure)
        with self._pending_lock:
            self._pending.append(_Pending(session_id, generation, event, received_at, future))
            if self._flush_queued:
                return future
            self._flush_queued = True
        self._executor.submit(self._flush_events)
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

    def applied(self, session_id: str, applied_seq: int) -> None:
        """A worker applied the session's events up to `applied_seq`: stop holding them."""
        self._executor.submit(self._release, session_id, applied_seq)

    def forget(self, session_id: str) -> None:
        self._executor.submit(self._forget, session_id)

    def close(self) -> None:
        self._closing.set()
        self._executor.shutdown(wait=True)
        self._redis.close()

    # ── on the sink thread ─────────────────────────────────────────────────────────────

    def _forget(self, session_id: str) -> None:
        self._issued.pop(session_id, None)
        self._held.pop(session_id, None)

    def _release(self, session_id: str, applied_seq: int) -> None:
        held = self._held.get(session_id)
        while held and held[0].seq <= applied_seq:
            held.popleft()

    def _set_marker(self) -> None:
        _patiently(lambda: self._redis.set(self._marker_key, self._marker))

    def _check_marker(self) -> None:
        """Retransmit what is held if Redis came back without the marker (it lost its data)."""
        if self._redis.get(self._marker_key) == self._marker.encode():
            return
        self._redis.set(self._marker_key, self._marker)
        horizon = time.monotonic() - RETRANSMIT_WINDOW_S
        count = 0
        for held in self._held.values():
            while held and held[0].enqueued_at < horizon:
                held.popleft()
            for event in held:
                _patiently(
                    functools.partial(self._enqueue, event.queue, EVENT_ACTOR[event.queue], event.message)
                )
                count += 1
        self.retransmitted += count
        logger.warning("Redis lost its data (restarted empty): retransmitted %d held events", count)

    def _watch_marker(self) -> None:
        while not self._closing.wait(MARKER_CHECK_S):
            if not self._held:
                continue
            try:
                self._executor.submit(self._check_marker).add_done_callback(_log_failure)
            except RuntimeError:  # the executor shut down while closing
                return

    def _flush_events(self) -> None:
        """Number and enqueue every pending event: two round trips for the whole batch."""
        with self._pending_lock:
            batch, self._pending = self._pending, []
            self._flush_queued = False
        try:
            seqs = _patiently(
                lambda: self._next_seqs([pending.session_id for pending in batch]),
                on_recovery=self._check_marker,
            )
            envelopes = []
            for pending, seq in zip(batch, seqs, strict=True):
                envelope = EventEnvelope(
                    session_id=pending.session_id,
                    seq=seq,
                    generation=pending.generation,
                    gateway_id=self._gateway_id,
                    received_at=pending.received_at,
                    event=pending.event,
                )
                queue = queue_for(str(pending.event.get("type", "")))
                envelopes.append((queue, {"envelope": envelope.model_dump(mode="json")}))
            # Retried whole, with the same seqs: if a lost reply hid stored messages, their
            # copies are redelivered seqs, which the workers apply once.
            _patiently(lambda: self._enqueue_events(envelopes))
        except Exception as error:  # noqa: BLE001 - every waiting future must learn of it
            for pending in batch:
                pending.future.set_exception(error)
            return
        now = time.monotonic()
        for pending, seq, (queue, message) in zip(batch, seqs, envelopes, strict=True):
            held = self._held.setdefault(pending.session_id, deque(maxlen=RETRANSMIT_MAXIMUM_PER_SESSION))
            held.append(_Held(seq, queue, message, now))
            pending.future.set_result(seq)

    def _next_seqs(self, session_ids: list[str]) -> list[int]:
        """The next seq of each session, in order (a session may appear more than once)."""
        with self._redis.pipeline(transaction=False) as pipe:
            for session_id in session_ids:
                pipe.incr(self._seq_key(session_id))
            counted = pipe.execute()
        seqs = []
        lifted: dict[str, int] = {}
        for session_id, value in zip(session_ids, counted, strict=True):
            seq = int(value)
            issued = self._issued.get(session_id, 0)
            if seq <= issued:
                # Redis lost its counters (a restart): resume above what this gateway issued.
                seq = issued + 1
                lifted[session_id] = seq
            self._issued[session_id] = seq
            seqs.append(seq)
        if lifted:
            with self._redis.pipeline(transaction=False) as pipe:
                for session_id, seq in lifted.items():
                    pipe.set(self._seq_key(session_id), seq)
                pipe.execute()
        return seqs

    def _seq_key(self, session_id: str) -> str:
        return f"{self._namespace}:seq:{session_id}"

    def _enqueue_events(self, envelopes: list[tuple[str, dict[str, Any]]]) -> None:
        messages = [self._message(queue, EVENT_ACTOR[queue], kwargs) for queue, kwargs in envelopes]
        # Switchboard's broker takes a batch in one round trip; Dramatiq's stock one (kept to
        # compare against) takes them one at a time.
        enqueue_many = getattr(self._broker, "enqueue_many", None)
        if enqueue_many is not None:
            enqueue_many(messages)
            return
        for message in messages:
            self._broker.enqueue(message)

    def _enqueue(self, queue: str, actor_name: str, kwargs: dict[str, Any]) -> None:
        self._broker.enqueue(self._message(queue, actor_name, kwargs))

    @staticmethod
    def _message(queue: str, actor_name: str, kwargs: dict[str, Any]) -> dramatiq.Message[Any]:
        return dramatiq.Message(
            queue_name=queue,
            actor_name=actor_name,
            args=(),
            kwargs=kwargs,
            options={},
            message_timestamp=int(time.time() * 1000),
        )


def _patiently(work: Callable[[], T], on_recovery: Callable[[], None] | None = None) -> T:
    """Run a Redis operation, retrying with backoff through a short outage (a restart), so a
    durable event is not dropped the moment Redis blinks. Later events wait behind it on the
    sink thread, which keeps the session's order. `on_recovery` runs once Redis answers again
    after an outage, before the work's result is used."""
    deadline = time.monotonic() + ENQUEUE_PATIENCE_S
    delay = ENQUEUE_FIRST_RETRY_S
    failed = False
    while True:
        try:
            result = work()
            break
        except redis.RedisError:
            failed = True
            if time.monotonic() >= deadline:
                raise
            logger.warning("Redis unavailable while enqueueing; retrying in %.2f s", delay)
            time.sleep(delay)
            delay = min(delay * 2, ENQUEUE_MAXIMUM_RETRY_S)
    if failed and on_recovery is not None:
        # Outside the retry: a failure here must not repeat `work` (an INCR would skip a seq).
        try:
            on_recovery()
        except redis.RedisError as error:
            logger.warning("recovery check failed (the marker watcher retries): %r", error)
    return result


def _log_failure(future: Future[Any]) -> None:
    error = future.exception()
    if error is not None:
        logger.error("enqueue failed: %r", error)
