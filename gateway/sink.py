"""`EventSink`: numbers each durable event of a session and enqueues it, off the event loop.

Numbering and enqueueing are a blocking Redis round trip; they run on one dedicated thread,
which also keeps every session's events in the order they were submitted. Events submitted
while that thread is busy are taken together, and one call of the broker's numbering enqueue
numbers each (the session's `INCR`, inside the script) and stores it as a Dramatiq message:
a burst costs one round trip, not one per event (at 100 calls, numbering and enqueueing one
event at a time queued events for tens of milliseconds behind each other). A send whose reply
was lost is sent again with the same message ids, and the script answers the seqs it gave the
first time instead of numbering twice.

**Redis unreachable.** Nothing is given up because Redis is away. What the sink could not number
or enqueue waits in its outbox, in submission order, and the sink thread tries again (50 ms
after, doubling to once a second) while it goes on with everything else: a release, a forget or
a rate count never waits behind an outage, and the event loop never waits at all. While Redis is
away the outbox keeps at most MAXIMUM_UNSENT_EVENTS_PER_SESSION events of one session; what a
full session refuses is counted, and once Redis answers the count is numbered in the session's
order as one `switchboard.events_dropped` event, so the session's log shows where the hole is
(the worker that applies it records the incident). An API request waits only as long as its
caller waits for the reply: past that the caller was told 503 (and may have asked again), so
acting on it would surprise them; it is dropped and logged.

**Redis restarted empty.** Redis here keeps nothing on disk, so a restart loses the events that
sat in the queues unfetched, and the seq counters. The sink holds each event it enqueued until a
control batch reports its session applied that far (or RETRANSMIT_WINDOW_S of Redis being
reachable pass), and watches a marker key it wrote: when the marker is gone, every held event is
enqueued again with its seq (the workers apply a seq once). It numbers above the highest seq it
issued for a session, so a counter lost with Redis never makes it reuse a seq.

**Redis failed over.** A replica that Sentinel promotes has the marker (it copied it) but not
the master's writes of its last moment (replication is asynchronous). The sink also notes which
server answers (its run id): when another one does, every held event is enqueued again, as after
an empty restart.

**Retention.** A seq counter expires SEQ_COUNTER_TTL_SECONDS after its last use, the marker
GATEWAY_MARKER_TTL_SECONDS after the gateway last refreshed it. The sink remembers a session it
hosts (one whose control batches come here) until `forget`, or, if it is never forgotten (its
call moved to another gateway), as long as its counter lives; a session it only numbered events
for (an API request for a call held elsewhere) RETRANSMIT_WINDOW_S after its last event.

Its parts, one noun each: the thread it runs on (`gateway.sink_thread`), what waits in its outbox
(`gateway.outbox`), what it remembers of each session (`gateway.retention`), the restart marker
(`gateway.restart_marker`), and the counts and claims shared with the other gateways, reached as
`EventSink.counts` (`gateway.shared_counts`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from concurrent.futures import Future
from typing import Any, Protocol

import redis

from gateway.outbox import Dropped, Event, Request, Unsent, grouped
from gateway.redis_clients import redis_client
from gateway.restart_marker import MARKER_CHECK_S, RestartMarker
from gateway.retention import Retention
from gateway.shared_counts import SharedCounts
from gateway.sink_thread import SinkThread
from pipeline.call.errors import Fault, ReplyTimeout
from pipeline.call.limits import (
    API_REPLY_TIMEOUT_MS,
    MAXIMUM_UNSENT_EVENTS_PER_SESSION,
    SEQ_COUNTER_TTL_SECONDS,
)
from pipeline.platform.envelope import NumberedMessage, numbered_body, plain_body
from pipeline.platform.names import EVENT_ACTOR, queue_for, queue_of_request

logger = logging.getLogger(__name__)

# After a round trip failed, the sink tries again this long after, doubling up to the maximum:
# a restart takes a second or two, and a longer outage is retried once a second.
RETRY_FIRST_S = 0.05
RETRY_MAXIMUM_S = 1.0
# How often the sink lets go of held events past the window and of sessions past their retention.
PRUNE_INTERVAL_S = 5.0


class NumberingBroker(Protocol):
    """What the sink needs of the broker (`workers.broker.NumberingEnqueue`)."""

    def enqueue_numbered(self, messages: list[NumberedMessage], seq_ttl_s: int) -> list[int]: ...


class EventSink:
    def __init__(self, redis_url: str, broker: NumberingBroker, gateway_id: str, namespace: str) -> None:
        self._redis = redis_client(redis_url)
        self._broker = broker
        self._gateway_id = gateway_id
        self._namespace = namespace
        self._executor = SinkThread("event-sink")
        # Rates, counters and directive claims shared with the other gateways, on the same thread.
        self.counts = SharedCounts(self._redis, self._executor, gateway_id, namespace)
        # Submitted and not yet taken by the sink thread, and whether a flush is queued on it.
        self._pending: list[Event | Request] = []
        self._pending_lock = threading.Lock()
        self._flush_queued = False
        # ── touched only on the sink thread ──
        # Taken, not yet enqueued, in submission order; how many events (and incidents) of each
        # session it keeps; each session's open tally of what it could not keep.
        self._outbox: list[Unsent] = []
        self._unsent: Counter[str] = Counter()
        self._tallies: dict[str, Dropped] = {}
        # Since when (monotonic) Redis has failed, for how long it failed before, and when the
        # next attempt is due (also read by the keeper thread, which brings it about).
        self._down_since: float | None = None
        self._downtime = 0.0
        self._retry_delay = RETRY_FIRST_S
        self._retry_due: float | None = None
        # What is remembered of each session (seqs issued, events held for retransmission), and
        # the marker whose loss says Redis lost what it held.
        self._retention = Retention(self._up_clock)
        self._marker = RestartMarker(self._redis, namespace, gateway_id)
        self.retransmitted = 0
        self.dropped = 0
        self.abandoned = 0
        self._executor.call(self._watch_marker)
        self._closing = threading.Event()
        self._keeper = threading.Thread(target=self._keep_time, name="sink-keeper", daemon=True)
        self._keeper.start()

    def submit_event(
        self,
        session_id: str,
        generation: int,
        event: dict[str, Any],
        received_at: float,
        *,
        after_seq: int = 0,
        traceparent: str | None = None,
    ) -> Future[int]:
        """Number and enqueue one durable event; returns a future of its seq. `after_seq` is
        the highest seq the caller knows the session logged (an API request's session record):
        the event is numbered above it even if Redis lost the session's counter. `traceparent`:
        the span it travels under (pipeline.platform.tracing)."""
        future: Future[int] = Future()
        self._take(
            Event(session_id, generation, event, received_at, future, after_seq, traceparent=traceparent)
        )
        return future

    def submit_request(
        self, actor_name: str, *, reply_timeout_ms: int = API_REPLY_TIMEOUT_MS, **kwargs: Any
    ) -> Future[None]:
        """Enqueue an API request for an admission actor. While Redis is unreachable it waits
        at most `reply_timeout_ms`, the time its caller waits for the reply; then it is dropped
        (the future raises `ReplyTimeout`)."""
        future: Future[None] = Future()
        give_up_at = time.monotonic() + reply_timeout_ms / 1000
        self._take(Request(actor_name, kwargs, future, give_up_at=give_up_at))
        return future

    def submit_incident(
        self, session_id: str | None, code: str, summary: str, context: dict[str, Any]
    ) -> None:
        kwargs = {"session_id": session_id, "code": code, "summary": summary, "context": context}
        self._take(Request("record_incident", kwargs, session_id=session_id))

    @property
    def reachable(self) -> bool:
        """Whether Redis answered the sink's last attempt (read across threads: a flag's read)."""
        return self._down_since is None

    def applied(self, session_id: str, applied_seq: int) -> None:
        """A worker applied the session's events up to `applied_seq`: stop holding them. Only
        the gateway that hosts a session gets its control batches, so the session is hosted.
        Noted here and taken by the sink thread when it next runs (it runs at least every
        MARKER_CHECK_S while it holds events): a task per control batch cost more than the rest
        of the release."""
        self._retention.applied(session_id, applied_seq)

    def forget(self, session_id: str) -> None:
        """The session's call closed here: keep nothing of it."""
        self._executor.call(self._retention.forget, session_id)

    def close(self) -> None:
        self._closing.set()
        try:
            self._executor.call(self._last_flush)
        except RuntimeError:  # closed already
            return
        self._executor.shutdown(wait=True)
        self._keeper.join(1.0)
        self._redis.close()

    def _take(self, item: Event | Request | None = None) -> None:
        """Hand `item` to the sink thread; with none, have it try the outbox again."""
        with self._pending_lock:
            if item is not None:
                self._pending.append(item)
            if self._flush_queued:
                return
            self._flush_queued = True
        self._executor.call(self._flush)

    # ── on the keeper thread ───────────────────────────────────────────────────────────

    def _keep_time(self) -> None:
        """The sink's clock: it says when to try again after an outage, to check the marker and
        to prune; the sink thread does each (this thread never touches Redis)."""
        next_check = next_prune = time.monotonic()
        kicked: float | None = None
        while True:
            retry = self._retry_due
            due = min(next_check, next_prune)
            if retry is not None and retry != kicked:
                due = min(due, retry)
            if self._closing.wait(max(0.0, due - time.monotonic())):
                return
            now = time.monotonic()
            try:
                if retry is not None and retry != kicked and now >= retry:
                    kicked = retry
                    self._take()
                if now >= next_check:
                    self._executor.call(self._watch_marker)
                    next_check = now + MARKER_CHECK_S
                if now >= next_prune:
                    self._executor.call(self._retention.prune)
                    next_prune = now + PRUNE_INTERVAL_S
            except RuntimeError:  # the executor shut down while closing
                return

    # ── on the sink thread: the outbox ─────────────────────────────────────────────────

    def _flush(self) -> None:
        """Take what was submitted into the outbox and send the outbox, unless Redis is away
        and the next attempt is not due yet."""
        with self._pending_lock:
            taken, self._pending = self._pending, []
            self._flush_queued = False
        self._retention.take_releases()
        for item in taken:
            self._admit(item)
        if self._retry_due is not None and time.monotonic() < self._retry_due:
            return
        self._send_outbox()

    def _admit(self, item: Event | Request) -> None:
        session_id = item.session_id
        if session_id is None or (isinstance(item, Request) and item.give_up_at is not None):
            # API requests are bounded by their callers' patience, not by a count.
            self._outbox.append(item)
            return
        if self._down_since is not None and self._unsent[session_id] >= MAXIMUM_UNSENT_EVENTS_PER_SESSION:
            self._drop(item, session_id)
            return
        self._unsent[session_id] += 1
        self._outbox.append(item)

    def _drop(self, item: Event | Request, session_id: str) -> None:
        """The session's outbox is full: count what it refuses in the session's open tally."""
        tally = self._tallies.get(session_id)
        if tally is None:
            generation = item.generation if isinstance(item, Event) else 0
            received_at = item.received_at if isinstance(item, Event) else time.time()
            tally = Dropped(session_id, generation, received_at, "redis_unreachable")
            self._tallies[session_id] = tally
            self._outbox.append(tally)
            logger.warning(
                "Redis unreachable and %s already has %d events waiting: dropping what comes next",
                session_id,
                MAXIMUM_UNSENT_EVENTS_PER_SESSION,
            )
        if isinstance(item, Event):
            tally.generation = max(tally.generation, item.generation)
            tally.types[str(item.event.get("type", ""))] += 1
            item.future.set_exception(
                Fault(f"event dropped: Redis unreachable and {session_id}'s outbox is full")
            )
        else:
            tally.types[f"incident:{item.kwargs.get('code', '')}"] += 1
        self.dropped += 1

    def _send_outbox(self) -> None:
        """Number and enqueue everything: one round trip. If Redis fails, everything stays, and
        the keeper brings the next attempt."""
        self._give_up_on_requests()
        if not self._outbox:
            return
        was_down = self._down_since is not None
        kept = len(self._outbox)
        most = max(self._unsent.values(), default=0) if was_down else 0
        try:
            self._enqueue_outbox()
        except redis.RedisError as error:
            self._unreachable(error)
            return
        except Exception:  # not Redis: drop what cannot be encoded, and try again
            logger.exception("enqueueing %d messages failed; trying again", len(self._outbox))
            self._drop_unencodable_requests()
            self._unreachable(None)
            return
        if was_down:
            self._recovered(kept, most)

    def _give_up_on_requests(self) -> None:
        now = time.monotonic()
        kept: list[Unsent] = []
        expired: list[Request] = []
        for item in self._outbox:
            if isinstance(item, Request) and item.give_up_at is not None and item.give_up_at <= now:
                expired.append(item)
            else:
                kept.append(item)
        if not expired:
            return
        self._outbox = kept
        for request in expired:
            logger.warning(
                "dropped %s request %s: Redis was unreachable until its caller stopped waiting",
                request.actor_name,
                request.kwargs.get("request_id"),
            )
            if request.future is not None:
                request.future.set_exception(
                    ReplyTimeout(
                        f"{request.actor_name} not enqueued: Redis unreachable past its reply timeout"
                    )
                )
        self.abandoned += len(expired)

    def _enqueue_outbox(self) -> None:
        """The outbox as messages — each session's events taken together in one message (its
        worker applies them in one transaction), each request in one of its own — numbered and
        enqueued in one round trip."""
        now_ms = int(time.time() * 1000)
        groups = grouped(self._outbox)
        messages = [self._encoded(group, now_ms) for group in groups]
        seqs = self._broker.enqueue_numbered([message for message, _ in messages], SEQ_COUNTER_TTL_SECONDS)
        up = self._up_clock()
        for group, (message, envelopes), first in zip(groups, messages, seqs, strict=True):
            for offset, (item, envelope) in enumerate(zip(group, envelopes, strict=True)):
                if isinstance(item, Request):
                    if item.future is not None:
                        item.future.set_result(None)
                    continue
                assert envelope is not None
                seq = first + offset
                session_id = item.session_id
                item.seq = seq
                self._retention.enqueued(session_id, seq, message.queue_name, envelope, up)
                if isinstance(item, Event):
                    item.future.set_result(seq)
        self._outbox = []
        self._unsent.clear()
        self._tallies.clear()

    def _encoded(
        self, group: list[Unsent], now_ms: int
    ) -> tuple[NumberedMessage, list[dict[str, Any] | None]]:
        """A message as it is enqueued (numbered by its session's counter, for events), and each
        event's envelope but its seq (to enqueue it again if Redis loses it). An event that
        cannot be encoded is replaced, in the outbox and the message, by an `events_dropped`
        event (so the session's log shows the hole; the worker records it as an incident)."""
        first = group[0]
        if isinstance(first, Request):
            queue = queue_of_request(first.actor_name)
            body = plain_body(queue, first.actor_name, first.kwargs, first.message_id, now_ms)
            return NumberedMessage(queue, first.message_id, (body,)), [None]
        events = [item for item in group if not isinstance(item, Request)]
        envelopes = [self._envelope(item) for item in events]
        queue = queue_for(str(envelopes[0]["event"].get("type", "")))
        try:
            parts = numbered_body(queue, EVENT_ACTOR[queue], envelopes, first.message_id, now_ms)
        except (TypeError, ValueError, RecursionError):  # one bad event must not hold the others back
            for index, item in enumerate(events):
                try:
                    json.dumps(envelopes[index])
                except (TypeError, ValueError, RecursionError):
                    assert isinstance(item, Event)
                    logger.exception("an event of %s cannot be encoded; recorded as dropped", item.session_id)
                    tally = self._unencodable(item)
                    tally.group_id = item.group_id
                    group[index] = self._outbox[self._outbox.index(item)] = tally
                    envelopes[index] = self._envelope(tally)
            parts = numbered_body(queue, EVENT_ACTOR[queue], envelopes, first.message_id, now_ms)
        # The seqs follow what this gateway issued, and an API request's knowledge of the log.
        floor = self._retention.issued.get(first.session_id, 0)
        for offset, item in enumerate(events):
            if isinstance(item, Event):
                floor = max(floor, item.after_seq - offset)
        message = NumberedMessage(
            queue, first.message_id, parts, seq_key=self._seq_key(first.session_id), floor=floor
        )
        return message, list(envelopes)

    def _envelope(self, item: Event | Dropped) -> dict[str, Any]:
        """An event's envelope but its seq."""
        event = item.as_event() if isinstance(item, Dropped) else item.event
        envelope = {
            "session_id": item.session_id,
            "generation": item.generation,
            "gateway_id": self._gateway_id,
            "received_at": item.received_at,
            "event": event,
        }
        if isinstance(item, Event) and item.traceparent is not None:
            envelope["traceparent"] = item.traceparent
        return envelope

    def _unencodable(self, item: Event) -> Dropped:
        tally = Dropped(item.session_id, item.generation, item.received_at, "unencodable")
        tally.types[str(item.event.get("type", ""))] += 1
        item.future.set_exception(Fault(f"an event of {item.session_id} cannot be encoded"))
        self.dropped += 1
        return tally

    def _drop_unencodable_requests(self) -> None:
        """Enqueueing failed, not for Redis: a request whose arguments cannot be encoded is
        dropped, so it does not hold every other message back for good."""
        for item in [item for item in self._outbox if isinstance(item, Request)]:
            try:
                plain_body(
                    queue_of_request(item.actor_name), item.actor_name, item.kwargs, item.message_id, 0
                )
            except Exception as error:  # noqa: BLE001 - whatever the encoder refuses
                logger.error(
                    "dropped %s message: its arguments cannot be encoded: %r", item.actor_name, error
                )
                self._outbox.remove(item)
                if item.future is not None:
                    item.future.set_exception(Fault(f"{item.actor_name} arguments cannot be encoded"))

    def _unreachable(self, error: redis.RedisError | None) -> None:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
            self._retry_delay = RETRY_FIRST_S
            logger.warning(
                "Redis unreachable (%r): keeping %d unsent messages, trying again until it answers",
                error,
                len(self._outbox),
            )
        else:
            self._retry_delay = min(self._retry_delay * 2, RETRY_MAXIMUM_S)
        self._retry_due = now + self._retry_delay

    def _recovered(self, kept: int, most: int) -> None:
        assert self._down_since is not None
        down_for = time.monotonic() - self._down_since
        self._downtime += down_for
        self._down_since = None
        self._retry_due = None
        logger.warning(
            "Redis answered again after %.1f s: sent %d messages kept meanwhile (at most %d events "
            "of one session), %d events dropped in all, %d requests given up in all",
            down_for,
            kept,
            most,
            self.dropped,
            self.abandoned,
        )
        # Redis may have come back empty: what it lost is enqueued again now, not at the next
        # check of the marker.
        self._watch_marker(now=True)

    def _last_flush(self) -> None:
        """Closing: one last attempt, whatever the backoff; what it cannot send is lost."""
        with self._pending_lock:
            taken, self._pending = self._pending, []
        for submitted in taken:
            self._admit(submitted)
        self._send_outbox()
        if self._outbox:
            logger.error(
                "closing with %d messages unsent (Redis unreachable): they are lost", len(self._outbox)
            )
            for item in self._outbox:
                future = item.future if not isinstance(item, Dropped) else None
                if future is not None and not future.done():
                    future.set_exception(Fault("the gateway closed while Redis was unreachable"))

    def _seq_key(self, session_id: str) -> str:
        return f"{self._namespace}:seq:{session_id}"

    # ── on the sink thread: the up clock and the restart marker ────────────────────────

    def _up_clock(self) -> float:
        """Monotonic seconds, less the time Redis was unreachable: held events and remembered
        sessions age only while a worker could have applied their events."""
        now = time.monotonic()
        down = self._downtime + (now - self._down_since if self._down_since is not None else 0.0)
        return now - down

    def _watch_marker(self, *, now: bool = False) -> None:
        """Check the marker while events are held, refresh it now and then otherwise."""
        self._retention.take_releases()
        if not now and not self._retention.held and time.monotonic() < self._marker.refresh_due:
            return
        try:
            self._check_marker()
        except redis.RedisError as error:
            if not self._marker.failing:
                logger.warning("cannot check the restart marker (checking again): %r", error)
            self._marker.failing = True
            return
        self._marker.failing = False
        if self._down_since is not None and self._outbox:
            # Redis answers again: what waits for it goes now, not at the next attempt.
            self._send_outbox()

    def _check_marker(self) -> None:
        """Retransmit what is held if Redis came back without the marker (it lost its data), or
        if another server answers now (a replica promoted by Sentinel has the marker, which it
        copied, but not the writes of the master's last moment); renew the marker either way."""
        lost = self._marker.look()
        if lost is None:
            return
        resend = self._retention.retransmissions(int(time.time() * 1000))
        if resend:
            self._broker.enqueue_numbered(resend, SEQ_COUNTER_TTL_SECONDS)
        first = self._marker.renew(lost)
        self.retransmitted += len(resend)
        if lost.failover:
            logger.warning(
                "Redis answers from another server (a failover): retransmitted %d held events", len(resend)
            )
        elif resend or (lost.found_other and not first):
            logger.warning("Redis lost its data (restarted empty): retransmitted %d held events", len(resend))
