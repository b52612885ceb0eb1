"""Any provider frame at all (hypothesis): the classifier answers or raises a typed BadInput —
never anything else — and whatever it lets through as durable parses, applies without error,
and can be stored."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.call.errors import BadInput
from pipeline.dialects import parse_inbound
from pipeline.realtime.events import DURABLE_TYPES, IGNORED_TYPES, STREAMED_TYPES
from pipeline.realtime.frames import classify_frame
from pipeline.session.wire import FrameKind, holds_unstorable
from pipeline.transitions import apply
from tests.pipeline import events as ev

_TYPES = st.sampled_from(
    [*sorted(DURABLE_TYPES | STREAMED_TYPES | IGNORED_TYPES), "switchboard.end_requested", "x.y"]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(alphabet=st.characters(codec="utf-8")),
)
_JSON = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)
_FIELDS = st.sampled_from(
    [
        "event_id",
        "item_id",
        "response_id",
        "call_id",
        "transcript",
        "text",
        "delta",
        "response",
        "session",
        "error",
        "name",
        "arguments",
        "audio_start_ms",
        "content_index",
    ]
)
_EVENTS = st.builds(
    lambda kind, fields: {"type": kind, **fields},
    _TYPES,
    st.dictionaries(_FIELDS, _JSON, max_size=8),
)
_ESCAPES = st.sampled_from(["\\u0000", "\\ud800", "\\udfff", "\\ud83d\\ude00", "ok"])
_FRAMES = st.one_of(
    st.builds(
        lambda kind, escape: f'{{"type": "{kind}", "event_id": "e{escape}", "item_id": "i"}}',
        _TYPES,
        _ESCAPES,
    ),
    st.text(),
    st.binary(max_size=200),
    _JSON.map(json.dumps),
    _EVENTS.map(json.dumps),
    _EVENTS.map(lambda event: json.dumps(event)[: max(1, len(json.dumps(event)) // 2)]),
)
LISTENING = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])


@settings(max_examples=1_500, deadline=None)
@given(_FRAMES)
def test_every_frame_is_classified_or_refused_with_a_typed_error(frame: Any) -> None:
    try:
        classified = classify_frame(frame)
    except BadInput:
        return
    if classified.kind is FrameKind.DURABLE:
        event = parse_inbound(classified.event)
        apply(LISTENING, event, LISTENING.generation)  # never raises
        assert not holds_unstorable(classified.event)
    if classified.kind is FrameKind.UNKNOWN:
        assert not holds_unstorable(classified.event)
        assert not classified.type.startswith("switchboard.")
