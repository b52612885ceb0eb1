"""Wire: parsing logged events, classifying sideband frames, and the controls' wire shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.call.errors import MalformedFrame, OversizedFrame
from pipeline.call.limits import MAXIMUM_PROVIDER_FRAME_BYTES
from pipeline.dialects import parse_inbound
from pipeline.realtime.events import ResponseDone, UserTranscriptFinal
from pipeline.realtime.frames import classify_frame
from pipeline.session.state import Phase
from pipeline.session.wire import FrameKind, UnknownEvent, control_wire
from tests.pipeline import events as ev

# ── parse_inbound ────────────────────────────────────────────────────────────────────────


def test_a_user_final_parses_from_its_ga_shape() -> None:
    """A GA transcription.completed event parses into a user final, its extra fields ignored."""
    event = parse_inbound(ev.user_final("msg_003", "Hello, how are you?"))

    assert isinstance(event, UserTranscriptFinal)
    assert event.item_id == "msg_003"
    assert event.transcript == "Hello, how are you?"


def test_response_done_usage_parses() -> None:
    """A GA response.done parses with its id, status and token usage."""
    event = parse_inbound(ev.response_done("resp_001", input_tokens=127, output_tokens=148))

    assert isinstance(event, ResponseDone)
    assert event.response.id == "resp_001"
    assert event.response.usage is not None
    assert event.response.usage.total_tokens == 275


def test_an_unknown_event_type_parses_to_unknown_event() -> None:
    """An event type Switchboard does not know parses to UnknownEvent, keeping its id."""
    event = parse_inbound({"type": "foo.bar", "event_id": "event_9", "whatever": [1, 2]})

    assert isinstance(event, UnknownEvent)
    assert event.type == "foo.bar"
    assert event.event_id == "event_9"


def test_an_ignored_provider_type_parses_to_unknown_event() -> None:
    """A known event nothing decides on parses to UnknownEvent too."""
    event = parse_inbound({"type": "rate_limits.updated", "event_id": "event_5758", "rate_limits": []})

    assert isinstance(event, UnknownEvent)


@pytest.mark.parametrize("phase_events", [ev.listening(), [*ev.listening(), ev.user_final("item_U1", "Hi")]])
def test_an_unknown_event_changes_nothing(phase_events: list[dict[str, Any]]) -> None:
    """Applying an unknown event leaves the session unchanged, sending and doing nothing."""
    before = ev.state_after(phase_events)

    step = ev.step_of(before, ev.unknown("scooby.dooby.doo"))

    assert step.state == before
    assert step.controls == ()
    assert step.effects == ()


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (
            {k: v for k, v in ev.user_final("item_U1", "Hi").items() if k != "transcript"},
            "transcript",
        ),
        ({k: v for k, v in ev.user_final("item_U1", "Hi").items() if k != "item_id"}, "item_id"),
        ({k: v for k, v in ev.response_created("resp_1").items() if k != "response"}, "response"),
        ({**ev.response_done("resp_1"), "response": {"status": "completed"}}, "id"),
        (
            {k: v for k, v in ev.assistant_final("r", "i", "t").items() if k != "transcript"},
            "transcript",
        ),
        (
            {k: v for k, v in ev.speech_started("item_U1").items() if k != "audio_start_ms"},
            "audio_start_ms",
        ),
        ({"type": "switchboard.call_attached"}, "call_id"),
        ({"type": "switchboard.timer_fired"}, "name"),
    ],
)
def test_a_known_type_missing_a_required_field_is_malformed(raw: dict[str, Any], field: str) -> None:
    """A durable or host event without a required field is a MalformedFrame naming the field."""
    with pytest.raises(MalformedFrame, match=field):
        parse_inbound(raw)


def test_an_event_without_a_type_is_malformed() -> None:
    """A logged event with no string type is a MalformedFrame."""
    with pytest.raises(MalformedFrame, match="type"):
        parse_inbound({"event_id": "event_1"})


# ── classify_frame ───────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "raw",
    [
        {
            "type": "conversation.item.input_audio_transcription.delta",
            "event_id": "event_001",
            "item_id": "item_001",
            "content_index": 0,
            "delta": "Hello",
        },
        {
            "type": "response.output_audio_transcript.delta",
            "event_id": "event_4546",
            "response_id": "resp_001",
            "item_id": "msg_008",
            "output_index": 0,
            "content_index": 0,
            "delta": "Hello, how can I a",
        },
        {
            "type": "response.output_text.delta",
            "event_id": "event_4142",
            "response_id": "resp_001",
            "item_id": "msg_007",
            "output_index": 0,
            "content_index": 0,
            "delta": "Sure, I can h",
        },
    ],
)
def test_transcript_deltas_are_live(raw: dict[str, Any]) -> None:
    """Transcript deltas are classified LIVE."""
    classified = classify_frame(json.dumps(raw))

    assert classified.kind is FrameKind.STREAMED
    assert classified.type == raw["type"]
    assert classified.event_id == raw["event_id"]


@pytest.mark.parametrize(
    "raw",
    [
        ev.user_final("msg_003", "Hello, how are you?"),
        ev.user_failed("msg_003"),
        ev.response_created("resp_1"),
        ev.response_done("resp_1"),
        ev.assistant_final("resp_1", "item_A1", "Hi"),
        ev.assistant_text_final("resp_1", "item_A1", "Hi"),
        ev.speech_started("item_U1"),
        ev.session_updated(),
        ev.provider_error(),
    ],
    ids=lambda raw: raw["type"],
)
def test_finals_and_response_events_are_durable(raw: dict[str, Any]) -> None:
    """Finals, response lifecycle events, speech starts, session updates and errors are DURABLE."""
    classified = classify_frame(json.dumps(raw))

    assert classified.kind is FrameKind.DURABLE
    assert classified.event == raw


@pytest.mark.parametrize(
    "raw",
    [
        {
            "type": "rate_limits.updated",
            "event_id": "event_5758",
            "rate_limits": [{"name": "requests", "limit": 1000, "remaining": 999, "reset_seconds": 60}],
        },
        {"type": "output_audio_buffer.started", "event_id": "event_11b", "response_id": "resp_1"},
        {
            "type": "input_audio_buffer.committed",
            "event_id": "event_1121",
            "previous_item_id": "msg_001",
            "item_id": "msg_002",
        },
    ],
)
def test_known_events_nothing_depends_on_are_ignored(raw: dict[str, Any]) -> None:
    """Known events that no decision depends on are IGNORED."""
    assert classify_frame(json.dumps(raw)).kind is FrameKind.IGNORED


def test_an_unknown_type_is_unknown() -> None:
    """A frame of an unknown type is classified UNKNOWN, its content kept."""
    classified = classify_frame('{"type": "foo.bar", "event_id": "event_1"}')

    assert classified.kind is FrameKind.UNKNOWN
    assert classified.type == "foo.bar"
    assert classified.event == {"type": "foo.bar", "event_id": "event_1"}


def test_bytes_frames_are_classified() -> None:
    """A frame given as bytes is decoded like a text frame."""
    assert classify_frame(json.dumps(ev.response_created("resp_1")).encode()).kind is FrameKind.DURABLE


def test_a_beta_type_is_renamed_in_the_classified_event() -> None:
    """A beta event name is renamed to its GA name in the classified frame and its event."""
    raw = {
        **ev.assistant_final("resp_1", "item_A1", "Hi there!"),
        "type": "response.audio_transcript.done",
    }

    classified = classify_frame(json.dumps(raw))

    assert classified.kind is FrameKind.DURABLE
    assert classified.type == "response.output_audio_transcript.done"
    assert classified.event["type"] == "response.output_audio_transcript.done"


def test_a_beta_delta_is_renamed_and_live() -> None:
    """A beta transcript delta is renamed to GA and classified LIVE."""
    raw = {
        "type": "response.audio_transcript.delta",
        "event_id": "e",
        "response_id": "r",
        "item_id": "i",
        "output_index": 0,
        "content_index": 0,
        "delta": "Hel",
    }

    classified = classify_frame(json.dumps(raw))

    assert classified.kind is FrameKind.STREAMED
    assert classified.type == "response.output_audio_transcript.delta"


@pytest.mark.parametrize("frame", ["{not json", b"\xff\xfe{}", "", "null"])
def test_invalid_json_is_malformed(frame: str | bytes) -> None:
    """A frame that is not a JSON object is a MalformedFrame."""
    with pytest.raises(MalformedFrame):
        classify_frame(frame)


def test_a_json_array_is_malformed() -> None:
    """A JSON array is a MalformedFrame saying it is not an object."""
    with pytest.raises(MalformedFrame, match="list"):
        classify_frame('[{"type": "response.done"}]')


@pytest.mark.parametrize("frame", ['{"event_id": "event_1"}', '{"type": 7}'])
def test_a_frame_without_a_string_type_is_malformed(frame: str) -> None:
    """A frame with no string type is a MalformedFrame."""
    with pytest.raises(MalformedFrame, match="type"):
        classify_frame(frame)


def test_a_durable_frame_of_the_wrong_shape_is_malformed() -> None:
    """A durable frame missing a required field is a MalformedFrame naming it."""
    raw = {k: v for k, v in ev.user_final("item_U1", "Hi").items() if k != "transcript"}

    with pytest.raises(MalformedFrame, match="transcript"):
        classify_frame(json.dumps(raw))


def test_a_live_frame_without_an_item_id_is_malformed() -> None:
    """A transcript delta without an item id is a MalformedFrame."""
    with pytest.raises(MalformedFrame, match="item_id"):
        classify_frame('{"type": "response.output_text.delta", "event_id": "e", "delta": "x"}')


def _frame_of(size: int, filler: str = "a") -> str:
    head = '{"type": "foo.bar", "pad": "'
    tail = '"}'
    return head + filler * (size - len(head) - len(tail)) + tail


def test_a_frame_over_one_mebibyte_is_oversized() -> None:
    """A frame over 1 MiB is an OversizedFrame, and one of exactly 1 MiB is not."""
    assert MAXIMUM_PROVIDER_FRAME_BYTES == 1_048_576
    assert classify_frame(_frame_of(MAXIMUM_PROVIDER_FRAME_BYTES)).kind is FrameKind.UNKNOWN

    with pytest.raises(OversizedFrame):
        classify_frame(_frame_of(MAXIMUM_PROVIDER_FRAME_BYTES + 1))
    with pytest.raises(OversizedFrame):
        classify_frame(_frame_of(MAXIMUM_PROVIDER_FRAME_BYTES + 1).encode())


def test_the_frame_limit_counts_bytes_not_characters() -> None:
    """A text frame over 1 MiB in UTF-8 is an OversizedFrame, though it has fewer characters."""
    frame = '{"type": "foo.bar", "pad": "' + "é" * (MAXIMUM_PROVIDER_FRAME_BYTES // 2) + '"}'
    assert len(frame) <= MAXIMUM_PROVIDER_FRAME_BYTES < len(frame.encode())

    with pytest.raises(OversizedFrame):
        classify_frame(frame)


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "switchboard.end_requested", "reason": "spoofed"},
        {"type": "switchboard.sideband_connected", "call_id": "rtc_x"},
        {"type": "switchboard.something_new"},
    ],
)
def test_a_provider_frame_claiming_a_host_type_is_malformed(raw: dict[str, Any]) -> None:
    """A provider frame may never speak for the host: a switchboard.* type is a MalformedFrame."""
    with pytest.raises(MalformedFrame, match="reserved"):
        classify_frame(json.dumps(raw))


# ── controls on the wire ─────────────────────────────────────────────────────────────────

_TOOL = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
}

SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "admission": ev.listening(),
    "admission_with_tools": ev.listening(tools=[_TOOL]),
    "unbounded_output": [
        *ev.listening(limits={"max_output_tokens": "inf", "max_session_seconds": 60}),
        ev.user_final("item_U1", "Hi"),
    ],
    "turns": [
        *ev.listening(),
        ev.user_final("item_U1", "Hi"),
        ev.response_created("resp_1"),
        ev.user_final("item_U2", "and also"),
        ev.assistant_final("resp_1", "item_A1", "Hello!"),
        ev.response_done("resp_1"),
        ev.response_created("resp_2"),
        ev.response_done("resp_2", "failed"),
        ev.user_final("item_U3", "Bye"),
        ev.end_requested(),
    ],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_control_passes_the_strict_wire_oracle(name: str) -> None:
    """Every control a transition emits, with its event id, passes the strict wire oracle."""
    from simulator.oracle import wire_errors

    _, steps = ev.fold(SCENARIOS[name])
    controls = ev.controls_of(steps)
    assert controls

    for index, control in enumerate(controls):
        event = control_wire(control.model_copy(update={"event_id": f"ctl_1_{index}"}))
        assert event["event_id"] == f"ctl_1_{index}"
        assert wire_errors(event, direction="client") == [], event


def test_the_scenarios_reach_the_phases_they_claim() -> None:
    """The oracle scenarios run through admission and turns to the end."""
    assert ev.state_after(SCENARIOS["admission"]).phase is Phase.LISTENING
    assert ev.state_after(SCENARIOS["turns"]).phase is Phase.ENDED


def test_a_frame_postgresql_could_not_store_is_refused() -> None:
    """U+0000 and lone surrogates cannot be stored (jsonb and UTF-8 refuse them): such an event
    would fail on every retry, so it is refused up front. Escaped text that only looks like them,
    and a proper surrogate pair, pass."""
    import json as _json

    from pipeline.call.errors import MalformedFrame
    from pipeline.realtime.frames import classify_frame
    from pipeline.session.wire import FrameKind

    final = {
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": "e1",
        "item_id": "i1",
        "content_index": 0,
    }
    for transcript in ("nul \x00 here", "lone \ud800 surrogate"):
        try:
            classify_frame(_json.dumps({**final, "transcript": transcript}))
        except MalformedFrame as refused:
            assert "U+0000 or a lone surrogate" in str(refused)
        else:
            raise AssertionError(f"{transcript!r} was accepted")
    for transcript in ("a literal \\u0000 in text", "a smile \U0001f600"):
        assert classify_frame(_json.dumps({**final, "transcript": transcript})).kind is FrameKind.DURABLE
