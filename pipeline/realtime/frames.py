"""A Realtime sideband frame sorted by what the gateway does with it (docs/architecture.md, "The
path of one event"): durable (numbered and queued), streamed (fanned out to the watchers, never
logged), ignored, unknown (recorded, acted on never), or bad (a typed `BadInput`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.call.errors import MalformedFrame
from pipeline.call.limits import MAXIMUM_FRAME_JSON_DEPTH
from pipeline.call.messages import optional_str
from pipeline.realtime.events import (
    DURABLE_TYPES,
    IGNORED_TYPES,
    STREAMED_TYPES,
    ga_type,
    is_function_call_item,
    is_typed_item,
    parse_realtime,
)
from pipeline.session.wire import HOST_TYPES, FrameKind, decode_frame, frame_holds_unstorable, nests_too_deep


@dataclass(frozen=True, slots=True)
class ClassifiedFrame:
    """One provider frame, decoded and sorted by what the gateway must do with it."""

    kind: FrameKind
    type: str
    event: dict[str, Any]

    @property
    def event_id(self) -> str | None:
        return optional_str(self.event.get("event_id"))


def classify_frame(frame: str | bytes) -> ClassifiedFrame:
    """Decode a sideband frame and classify it; a frame that is too large, not JSON, not an
    object, or a durable/live event of the wrong shape raises a typed `BadInput`."""
    event, raw_type = decode_frame(frame)
    event_type = ga_type(raw_type)
    if event_type != raw_type:
        event = {**event, "type": event_type}
    if event_type in STREAMED_TYPES:
        if not isinstance(event.get("item_id"), str) or not isinstance(event.get("delta", ""), str):
            raise MalformedFrame(f"{event_type}: needs a string item_id and delta")
        return ClassifiedFrame(FrameKind.STREAMED, event_type, event)
    durable = event_type in DURABLE_TYPES or is_function_call_item(event) or is_typed_item(event)
    if durable or event_type not in IGNORED_TYPES:
        # What is kept (logged, or walked on its way to the log) must be storable and shallow;
        # a live delta or an ignored event is only looked at, never walked.
        if nests_too_deep(frame, event):
            raise MalformedFrame(f"frame is nested deeper than {MAXIMUM_FRAME_JSON_DEPTH} levels")
        if frame_holds_unstorable(frame, event):
            # Such an event could never be logged: PostgreSQL refuses it on every attempt.
            raise MalformedFrame(f"{event_type}: a string holds U+0000 or a lone surrogate")
    if durable:
        parse_realtime(event)
        return ClassifiedFrame(FrameKind.DURABLE, event_type, event)
    if event_type in IGNORED_TYPES:
        return ClassifiedFrame(FrameKind.IGNORED, event_type, event)
    if event_type in HOST_TYPES or event_type.startswith("switchboard."):
        # A provider must never be able to speak for the host.
        raise MalformedFrame(f"{event_type} is reserved for the gateway")
    return ClassifiedFrame(FrameKind.UNKNOWN, event_type, event)
