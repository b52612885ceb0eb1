"""What waits in the event sink's outbox (`gateway.sink.EventSink`): a durable event, a tally of
a session's events that could not be kept, an admission actor's request; and how the outbox
goes out as messages."""

from __future__ import annotations

import uuid
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pipeline.session.wire import EventsDropped, host_event

# A session's events of one flush travel in one message, up to this many (its worker applies
# them under one lock, in one transaction); a burst beyond it takes a few.
EVENTS_PER_MESSAGE = 32


def new_message_id() -> str:
    """A new message id, unique to the message."""
    return str(uuid.uuid4())


@dataclass(slots=True)
class Event:
    """A durable event on its way out; numbered (`seq`) once its enqueue answered. Its message
    id is its own from the first attempt on, so a send whose reply was lost is recognised."""

    session_id: str
    generation: int
    event: dict[str, Any]
    received_at: float
    future: Future[int]
    after_seq: int = 0
    seq: int | None = None
    message_id: str = field(default_factory=new_message_id)
    # The W3C trace context of the gateway's span of it, when tracing is on.
    traceparent: str | None = None
    # The id of the message it was first sent in (with the session's other events of its
    # flush); it is sent in that message again if the reply was lost.
    group_id: str | None = None


@dataclass(slots=True)
class Dropped:
    """Events of one session that could not be kept, in a row: numbered as one
    `switchboard.events_dropped` event where they would have been."""

    session_id: str
    generation: int
    received_at: float
    reason: str
    types: Counter[str] = field(default_factory=Counter)
    seq: int | None = None
    message_id: str = field(default_factory=new_message_id)
    group_id: str | None = None

    def as_event(self) -> dict[str, Any]:
        dropped = EventsDropped(count=sum(self.types.values()), types=dict(self.types), reason=self.reason)
        return host_event(dropped)


@dataclass(frozen=True, slots=True)
class Request:
    """A message for an admission actor: an API request (its caller gives up at `give_up_at`,
    monotonic) or a gateway incident about `session_id` (kept until sent)."""

    actor_name: str
    kwargs: dict[str, Any]
    future: Future[None] | None = None
    session_id: str | None = None
    give_up_at: float | None = None
    message_id: str = field(default_factory=new_message_id)


Unsent = Event | Dropped | Request


def grouped(outbox: list[Unsent]) -> list[list[Unsent]]:
    """The outbox in messages: a request alone; a session's events together, in order, up to
    EVENTS_PER_MESSAGE. Events sent before (their reply lost) keep the message they went in,
    under its id, so the script recognises it; only events never sent are grouped anew."""
    groups: list[list[Unsent]] = []
    sent_before: dict[str, list[Unsent]] = {}
    forming: dict[str, list[Unsent]] = {}
    for item in outbox:
        if isinstance(item, Request):
            groups.append([item])
            continue
        if item.group_id is not None:
            group = sent_before.get(item.group_id)
            if group is None:
                group = sent_before[item.group_id] = []
                groups.append(group)
            group.append(item)
            continue
        group = forming.get(item.session_id)
        if group is None or len(group) >= EVENTS_PER_MESSAGE:
            group = forming[item.session_id] = []
            groups.append(group)
        group.append(item)
    for group in groups:
        first = group[0]
        if not isinstance(first, Request) and first.group_id is None:
            for item in group:
                assert not isinstance(item, Request)
                item.group_id = first.message_id
    return groups
