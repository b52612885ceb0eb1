"""Event streams to the apps' own brokers (docs/events.md), on their own queue."""

from __future__ import annotations

import functools
import traceback
from typing import Any

import dramatiq
from dramatiq.middleware import CurrentMessage

from pipeline.api.event_streams import Waiting
from pipeline.platform.names import EVENT_STREAMS_QUEUE
from workers import event_streams, runtime
from workers.actors.shared import deployment, stream_sweep

_runtime = runtime.current()


@dramatiq.actor(
    queue_name=EVENT_STREAMS_QUEUE,
    actor_name="stream_events",
    max_retries=8,
    throws=(event_streams.EventStreamGivenUp,),
)
def stream_events(session_id: str, waiting: dict[str, Any] | None = None) -> None:
    """Publish the session's call-log entries past its stream's cursor (and its report once the
    call ended) to the app's broker. While the broker is down the session waits for its next try
    with one sweep, sent again for then (`waiting`); one that waited too long is a dead letter (a
    replay sweeps again from the cursor)."""
    settings = _runtime.settings
    swept = event_streams.sweep(
        session_id,
        Waiting.from_json(waiting),
        gate=_stream_gate(),
        price_of=settings.price_of,
        namespace=deployment(),
    )
    if swept.waiting is None:
        return
    # The waiting sweep carries its last failed try's traceback, as a retried message does: the
    # dead letter it may become says which broker failed, and how (the keeper keeps the body as
    # it was queued).
    last: str | None
    if swept.failure is not None:
        last = "".join(traceback.format_exception(swept.failure))
    else:
        current = CurrentMessage.get_current_message()
        last = current.options.get("traceback") if current is not None else None
    message = stream_sweep(session_id, swept.waiting, last_traceback=last)
    _runtime.broker.enqueue(message, delay=swept.again_in_ms)


@functools.cache
def _stream_gate() -> event_streams.StreamGate:
    """The deployment's streams' shared back-offs and marks (one per process: its scripts are
    registered once)."""
    settings = _runtime.settings
    return event_streams.StreamGate(
        _runtime.broker.client,
        settings.broker_namespace,
        minimum_ms=settings.event_stream_min_backoff_ms,
        maximum_ms=settings.event_stream_max_backoff_ms,
        retries=settings.event_stream_retries,
    )
