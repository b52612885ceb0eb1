"""`Retention`: what the event sink (`gateway.sink.EventSink`) remembers of each session, and for
how long: the highest seq it issued (numbering resumes above it if Redis lost the counter) and
the events it enqueued and does not know applied (enqueued again if Redis lost them).

Everything here is touched on the sink's thread only, but `applied`, which the event loop calls
once per control batch. Time is the sink's up clock: monotonic seconds less the time Redis was
unreachable, so nothing ages while no worker could have applied it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.outbox import new_message_id
from pipeline.call.limits import SEQ_COUNTER_TTL_SECONDS
from pipeline.platform.envelope import NumberedMessage, numbered_body
from pipeline.platform.names import EVENT_ACTOR

# Enqueued events are held for retransmission this long of Redis being reachable (an event not
# applied by then is stuck behind something a retransmission cannot fix), and at most this many
# per session. A session this gateway only numbered events for is forgotten this long after its
# last one: it never hears that they were applied.
RETRANSMIT_WINDOW_S = 30.0
RETRANSMIT_MAXIMUM_PER_SESSION = 1_024


@dataclass(frozen=True, slots=True)
class Held:
    """An enqueued event kept until it is known applied: what it takes to enqueue it again."""

    seq: int
    queue: str
    envelope: dict[str, Any]  # the envelope's fields but its seq
    enqueued_at: float


class Retention:
    """The sessions the sink remembers: a hosted one (its control batches come here) until
    forgotten or, never forgotten (its call moved to another gateway), as long as its counter
    lives; a guest (an API request for a call held elsewhere) RETRANSMIT_WINDOW_S after its last
    event."""

    def __init__(self, up_clock: Callable[[], float]) -> None:
        self._up_clock = up_clock
        # The highest seq this gateway issued per session: if Redis lost its counters (a
        # restart without persistence, or a counter that expired), numbering resumes above it.
        self.issued: dict[str, int] = {}
        # Events enqueued and not yet known applied.
        self.held: dict[str, deque[Held]] = {}
        # How far each session is known applied, reported from the event loop (one report per
        # control batch) and taken on the sink thread whenever it next runs.
        self._released: dict[str, int] = {}
        self._released_lock = threading.Lock()
        # When each remembered session was last used, on the up clock, oldest first: those this
        # gateway hosts (it gets their control batches) and those it only numbered events for.
        self.hosted: dict[str, float] = {}
        self.guests: dict[str, float] = {}

    def applied(self, session_id: str, applied_seq: int) -> None:
        """On the event loop: a worker applied the session's events up to `applied_seq`. Noted,
        and taken on the sink thread when it next runs: a task per control batch cost more than
        the rest of the release."""
        with self._released_lock:
            if applied_seq > self._released.get(session_id, 0):
                self._released[session_id] = applied_seq

    def enqueued(self, session_id: str, seq: int, queue: str, envelope: dict[str, Any], up: float) -> None:
        """The event numbered `seq` was enqueued (at `up`): hold it until it is known applied."""
        self.issued[session_id] = max(self.issued.get(session_id, 0), seq)
        remembered = self.hosted if session_id in self.hosted else self.guests
        remembered.pop(session_id, None)
        remembered[session_id] = up
        held = self.held.setdefault(session_id, deque(maxlen=RETRANSMIT_MAXIMUM_PER_SESSION))
        held.append(Held(seq, queue, envelope, up))

    def take_releases(self) -> None:
        """Stop holding what the control batches since the last look said was applied."""
        with self._released_lock:
            released, self._released = self._released, {}
        if not released:
            return
        up = self._up_clock()
        for session_id, applied_seq in released.items():
            held = self.held.get(session_id)
            while held and held[0].seq <= applied_seq:
                held.popleft()
            self.guests.pop(session_id, None)
            self.hosted.pop(session_id, None)
            self.hosted[session_id] = up

    def forget(self, session_id: str) -> None:
        self.take_releases()
        self.issued.pop(session_id, None)
        self.held.pop(session_id, None)
        self.hosted.pop(session_id, None)
        self.guests.pop(session_id, None)

    def prune(self) -> None:
        """Let go of held events past the retransmit window, and forget the sessions unused for
        their retention: a guest after the retransmit window (its events were applied or are
        past helping), a hosted one never forgotten as long as its counter lives. Each pass
        over the sessions stops at the first one still in use."""
        self.take_releases()
        up = self._up_clock()
        for session_id, held in list(self.held.items()):
            while held and held[0].enqueued_at < up - RETRANSMIT_WINDOW_S:
                held.popleft()
            if not held:
                del self.held[session_id]
        for remembered, retention in (
            (self.guests, RETRANSMIT_WINDOW_S),
            (self.hosted, float(SEQ_COUNTER_TTL_SECONDS)),
        ):
            while remembered:
                session_id, used = next(iter(remembered.items()))
                if used > up - retention:
                    break
                self.forget(session_id)

    def retransmissions(self, now_ms: int) -> list[NumberedMessage]:
        """Every event held and still within the retransmit window, as a message to enqueue
        again: its own seq, under a new message id (the old one may still be remembered)."""
        horizon = self._up_clock() - RETRANSMIT_WINDOW_S
        resend: list[NumberedMessage] = []
        for held in self.held.values():
            while held and held[0].enqueued_at < horizon:
                held.popleft()
            for event in held:
                message_id = new_message_id()
                head, tail = numbered_body(
                    event.queue, EVENT_ACTOR[event.queue], [event.envelope], message_id, now_ms
                )
                body = head + str(event.seq).encode() + tail
                resend.append(NumberedMessage(event.queue, message_id, (body,)))
        return resend
