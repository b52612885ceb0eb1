"""The Live seam of the pure core (LIVE_PROTOCOL.md §5.2-5.3): frames classified, transcript
deltas written down durably, a delegation's task rebuilt from them, the settle window, and
every control built valid against `openai.types.live`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.call.errors import MalformedFrame, OversizedFrame
from pipeline.call.limits import MAXIMUM_PROVIDER_FRAME_BYTES
from pipeline.call.tokens import estimated_tokens
from pipeline.live.capabilities import APPEND_TOKEN_BUDGET
from pipeline.live.controls import (
    commentary_append,
    input_audio_mute,
    input_audio_unmute,
    instructions_append,
    session_close,
    thinking_append,
)
from pipeline.live.frames import (
    COALESCE_GAP_MS,
    DELEGATION_SETTLE_MS,
    FLUSH_AFTER_MS,
    LIVE_DURABLE_TYPES,
    MAXIMUM_COALESCED_FRAGMENTS,
    MAXIMUM_COALESCED_SPAN_MS,
    MAXIMUM_OPEN_FRAGMENTS,
    REMEMBERED_WRITTEN_FRAGMENTS,
    TranscriptBuffer,
    buffer_fragment,
    classify_live_frame,
    flush_transcript,
    fragment_of,
    fragments_of,
    is_flush_due,
    live_transcript,
    read_live_transcript,
)
from pipeline.live.tasks import SettleVerdict, build_task, distinct_fragments, settle, settle_timer
from pipeline.session.timeline import Speaker, TranscriptFragment
from pipeline.session.wire import FrameKind
from simulator.live_oracle import live_wire_errors

NOW = 1_750_000_000.0


def _caller(event_id: str, start_ms: int, end_ms: int, text: str) -> TranscriptFragment:
    return TranscriptFragment(
        speaker=Speaker.CALLER, event_id=event_id, start_ms=start_ms, end_ms=end_ms, text=text
    )


def _agent(event_id: str, start_ms: int, end_ms: int, text: str) -> TranscriptFragment:
    return TranscriptFragment(
        speaker=Speaker.AGENT, event_id=event_id, start_ms=start_ms, end_ms=end_ms, text=text
    )


def _frame(event: dict[str, Any]) -> str:
    return json.dumps(event)


# The §3.3 examples, as a Live sideband delivers them.
DELTA = {
    "type": "session.input_transcript.delta",
    "event_id": "event_EWIVgpQ2fwmwhPDTlhXxf",
    "start_ms": 4600,
    "end_ms": 4800,
    "delta": " result.",
}
DELEGATED = {
    "type": "session.delegation.created",
    "event_id": "event_EWIVg4OxlYeS7yerFtsMw",
    "offset_ms": 4600,
    "delegation": {"id": "item_EWIVgjaxCfSlntqN73664", "type": "delegation", "target": "client"},
}


# ── frames ──────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("event", "kind", "is_transcript"),
    [
        (DELTA, FrameKind.STREAMED, True),
        (
            {**DELTA, "type": "session.output_transcript.delta", "delta": " checking"},
            FrameKind.STREAMED,
            True,
        ),
        (DELEGATED, FrameKind.DURABLE, False),
        (
            {
                "type": "session.commentary.appended",
                "event_id": "e",
                "client_event_id": "k2",
                "start_ms": 1,
                "end_ms": 2,
            },
            FrameKind.DURABLE,
            False,
        ),
        (
            {"type": "session.usage.updated", "event_id": "e", "usage": {"seconds": 7}},
            FrameKind.DURABLE,
            False,
        ),
        (
            {
                "type": "session.closed",
                "event_id": "e",
                "reason": "close_requested",
                "session": {},
                "usage": {"seconds": 4},
            },
            FrameKind.DURABLE,
            False,
        ),
        (
            {
                "type": "error",
                "event_id": "e",
                "error": {"type": "invalid_request_error", "code": "x", "message": "m"},
            },
            FrameKind.DURABLE,
            False,
        ),
        ({"type": "session.input_audio.muted", "event_id": "e"}, FrameKind.DURABLE, False),
        ({"type": "transport.dtmf.received", "event_id": "e", "event": "5"}, FrameKind.DURABLE, False),
        ({"type": "session.input_audio.append", "audio": "AAAA"}, FrameKind.STREAMED, False),
        (
            {"type": "session.output_audio.delta", "delta": "AAAA", "start_ms": 0, "end_ms": 20},
            FrameKind.STREAMED,
            False,
        ),
        (
            {
                "type": "response.event",
                "event_id": "e",
                "event": {
                    "type": "response.output_item.done",
                    "item": {"type": "function_call", "call_id": "c"},
                },
            },
            FrameKind.DURABLE,
            False,
        ),
        (
            {"type": "response.event", "event_id": "e", "event": {"type": "response.completed"}},
            FrameKind.DURABLE,
            False,
        ),
        (
            {
                "type": "response.event",
                "event_id": "e",
                "event": {"type": "response.output_text.delta", "delta": "x"},
            },
            FrameKind.STREAMED,
            False,
        ),
        (
            {"type": "response.event", "event_id": "e", "event": {"type": "response.in_progress"}},
            FrameKind.IGNORED,
            False,
        ),
        ({"type": "response.done", "event_id": "e"}, FrameKind.UNKNOWN, False),
    ],
)
def test_each_frame_is_sorted_by_what_the_gateway_must_do(
    event: dict[str, Any], kind: FrameKind, is_transcript: bool
) -> None:
    """Durable inputs are queued, reflected audio and nested deltas only fanned out, transcript
    deltas fanned out and buffered, and a Realtime event on a Live sideband is unknown."""
    frame = classify_live_frame(_frame(event))
    assert (frame.kind, frame.type, frame.is_transcript) == (kind, event["type"], is_transcript)
    assert frame.event_id == event.get("event_id")


def test_every_durable_type_of_section_5_2_is_durable() -> None:
    """Each type §5.2 lists as durable classifies DURABLE with just an event id (where its shape
    needs no more)."""
    shaped = {"session.delegation.created", "session.usage.updated", "session.closed", "error"}
    shaped |= {"session.instructions.appended", "session.thinking.appended", "session.commentary.appended"}
    for event_type in LIVE_DURABLE_TYPES - shaped:
        assert classify_live_frame(_frame({"type": event_type, "event_id": "e"})).kind is FrameKind.DURABLE


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        ("{not json", MalformedFrame),
        ("[1, 2]", MalformedFrame),
        ('{"event_id": "e"}', MalformedFrame),
        (_frame({**DELTA, "start_ms": "soon"}), MalformedFrame),
        (_frame({**DELTA, "end_ms": 4500}), MalformedFrame),
        (_frame({k: v for k, v in DELTA.items() if k != "event_id"}), MalformedFrame),
        (
            _frame({**DELEGATED, "delegation": {"id": "d", "type": "delegation", "target": "elsewhere"}}),
            MalformedFrame,
        ),
        (_frame({k: v for k, v in DELEGATED.items() if k != "offset_ms"}), MalformedFrame),
        (_frame({"type": "session.input_audio.append"}), MalformedFrame),
        (_frame({"type": "switchboard.live_transcript", "event_id": "e"}), MalformedFrame),
        (_frame({"type": "session.paused", "event_id": "e", "note": "a\u0000b"}), MalformedFrame),
        (_frame({"type": "info", "event_id": "e", "deep": json.loads("[" * 70 + "]" * 70)}), MalformedFrame),
        ("x" * (MAXIMUM_PROVIDER_FRAME_BYTES + 1), OversizedFrame),
    ],
)
def test_bad_frames_raise_a_typed_error(frame: str, error: type[Exception]) -> None:
    """A frame that cannot be read, speaks for the host, or has the wrong shape for what it
    claims to be is a typed BadInput, never a crash."""
    with pytest.raises(error):
        classify_live_frame(frame)


# ── durable transcripts ─────────────────────────────────────────────────────────────────


def _feed(
    fragments: list[TranscriptFragment], *, gap_ms: int = COALESCE_GAP_MS
) -> tuple[list[dict[str, Any]], TranscriptBuffer]:
    buffer = TranscriptBuffer()
    written: list[dict[str, Any]] = []
    for fragment in fragments:
        coalesced = buffer_fragment(buffer, fragment, now=NOW, gap_ms=gap_ms)
        buffer = coalesced.buffer
        written.extend(coalesced.written)
    return written, buffer


def test_a_speaker_change_writes_the_previous_speakers_words_down() -> None:
    """Caller words stay buffered until the agent speaks; then they become one durable event
    carrying every fragment's id and range."""
    written, buffer = _feed(
        [
            _caller("c1", 600, 800, "Please"),
            _caller("c2", 800, 1000, " check"),
            _agent("a1", 1100, 1300, "Okay,"),
        ]
    )
    assert written == [
        {
            "type": "switchboard.live_transcript",
            "speaker": "caller",
            "text": "Please check",
            "start_ms": 600,
            "end_ms": 1000,
            "fragments": [
                {"speaker": "caller", "event_id": "c1", "start_ms": 600, "end_ms": 800, "text": "Please"},
                {"speaker": "caller", "event_id": "c2", "start_ms": 800, "end_ms": 1000, "text": " check"},
            ],
        }
    ]
    assert buffer.speaker is Speaker.AGENT and [f.event_id for f in buffer.fragments] == ["a1"]


def test_a_pause_on_the_timeline_closes_a_piece() -> None:
    """A gap of `gap_ms` or more between one speaker's fragments writes the words before it."""
    written, buffer = _feed(
        [_caller("c1", 0, 200, "Hello."), _caller("c2", 200 + COALESCE_GAP_MS, 1400, " Anyone?")]
    )
    assert [event["text"] for event in written] == ["Hello."]
    assert [f.event_id for f in buffer.fragments] == ["c2"]
    # Just under the gap, the words run on.
    written, buffer = _feed(
        [_caller("c1", 0, 200, "Hello"), _caller("c2", 199 + COALESCE_GAP_MS, 1400, " there")]
    )
    assert written == [] and len(buffer.fragments) == 2


def test_a_long_unbroken_turn_is_written_down_as_it_goes() -> None:
    """Neither the fragments nor the timeline span of one piece grows without bound."""
    many = [_caller(f"c{i}", i * 10, i * 10 + 10, " word") for i in range(MAXIMUM_COALESCED_FRAGMENTS)]
    written, buffer = _feed(many)
    assert len(written) == 1 and len(written[0]["fragments"]) == MAXIMUM_COALESCED_FRAGMENTS
    assert buffer.fragments == ()
    long = [
        _caller("c1", 0, 200, "One"),
        _caller("c2", MAXIMUM_COALESCED_SPAN_MS - 100, MAXIMUM_COALESCED_SPAN_MS, " two"),
    ]
    written, buffer = _feed(long, gap_ms=MAXIMUM_COALESCED_SPAN_MS)
    assert [event["text"] for event in written] == ["One two"] and buffer.fragments == ()


def _digits_open(text: str) -> int:
    """A stand-in for the privacy boundary's rule: everything after the last "." may go on."""
    return text.rfind(".") + 1 if "." in text else 0


def test_with_open_tails_a_piece_at_its_bound_ends_before_its_open_tail_or_grows_to_the_open_bound() -> None:
    """A piece at its bound is cut where its open tail begins; one whose words could all be one
    value going on grows to the open bound, then is written down as it stands."""
    buffer = TranscriptBuffer()
    written: list[dict[str, Any]] = []
    said = [_caller("c0", 0, 10, "Done.")] + [
        _caller(f"c{i}", i * 10, i * 10 + 10, " one") for i in range(1, MAXIMUM_OPEN_FRAGMENTS - 1)
    ]
    for fragment in said:
        coalesced = buffer_fragment(buffer, fragment, now=NOW, open_tail=_digits_open)
        buffer, written = coalesced.buffer, written + list(coalesced.written)
    assert written == [] and len(buffer.fragments) == MAXIMUM_OPEN_FRAGMENTS - 1
    cut = buffer_fragment(buffer, _caller("cx", 1_270, 1_280, " one"), now=NOW + 1, open_tail=_digits_open)
    assert [event["text"] for event in cut.written] == ["Done."]
    assert len(cut.buffer.fragments) == MAXIMUM_OPEN_FRAGMENTS - 1 and cut.buffer.oldest_at is None
    whole = buffer_fragment(
        cut.buffer, _caller("cy", 1_280, 1_290, " one"), now=NOW + 2, open_tail=_digits_open
    )
    assert len(whole.written) == 1 and len(whole.written[0]["fragments"]) == MAXIMUM_OPEN_FRAGMENTS
    assert whole.buffer.fragments == ()


def test_the_same_delta_twice_is_buffered_once() -> None:
    """A fragment already buffered (same event id) changes nothing."""
    fragment = _caller("c1", 0, 200, "Hi")
    written, buffer = _feed([fragment, fragment])
    assert written == [] and buffer.fragments == (fragment,)


def test_a_delta_delivered_again_after_its_piece_was_written_is_not_written_twice() -> None:
    """The record holds each delta's words once, even when the delta comes again after the
    speaker change (or pause, or flush) that wrote its piece down; the memory is bounded."""
    first, again = _caller("c1", 0, 200, "Hi"), _caller("c1", 0, 200, "Hi")
    written, buffer = _feed([first, _agent("a1", 300, 500, "Hello"), again])
    assert [event["text"] for event in written] == ["Hi"]
    assert [f.event_id for f in buffer.fragments] == ["a1"]
    flushed = flush_transcript(buffer)
    assert buffer_fragment(flushed.buffer, _agent("a1", 300, 500, "Hello"), now=NOW).written == ()
    assert buffer_fragment(flushed.buffer, _agent("a1", 300, 500, "Hello"), now=NOW).buffer.fragments == ()
    # Only the latest are remembered: a buffer never grows without bound.
    many = [_caller(f"m{i}", i * 10, i * 10 + 10, " w") for i in range(REMEMBERED_WRITTEN_FRAGMENTS + 40)]
    written, buffer = _feed(many)
    emptied = flush_transcript(buffer).buffer
    assert len(emptied.written_ids) == REMEMBERED_WRITTEN_FRAGMENTS
    assert emptied.holds(f"m{REMEMBERED_WRITTEN_FRAGMENTS + 39}") and not emptied.holds("m0")


def test_flushing_writes_whatever_is_buffered_and_is_due_after_the_wait() -> None:
    """Before a delegation, on close or when due, the buffer is written and emptied; the flush
    is due once the oldest fragment has waited FLUSH_AFTER_MS of wall time."""
    coalesced = buffer_fragment(TranscriptBuffer(), _caller("c1", 0, 200, "Hi"), now=NOW)
    later = buffer_fragment(coalesced.buffer, _caller("c2", 200, 400, " there"), now=NOW + 0.5)
    assert later.buffer.oldest_at == NOW  # the oldest fragment's arrival, not the latest
    assert not is_flush_due(later.buffer, now=NOW + FLUSH_AFTER_MS / 1000 - 0.001)
    assert is_flush_due(later.buffer, now=NOW + FLUSH_AFTER_MS / 1000)
    flushed = flush_transcript(later.buffer)
    assert [event["text"] for event in flushed.written] == ["Hi there"]
    assert flushed.buffer.fragments == () and not is_flush_due(flushed.buffer, now=NOW + 60)
    assert flush_transcript(TranscriptBuffer()).written == ()


def test_a_durable_transcript_reads_back_into_its_fragments() -> None:
    """What is logged is read back fragment by fragment, in log order, other events skipped."""
    first = live_transcript([_caller("c1", 0, 200, "Hi"), _caller("c2", 200, 400, " there")])
    second = live_transcript([_agent("a1", 500, 700, "Hello!")])
    fragments = fragments_of([first, {"type": "session.delegation.created"}, second])
    assert [fragment.event_id for fragment in fragments] == ["c1", "c2", "a1"]
    assert read_live_transcript(first).text == "Hi there"
    with pytest.raises(MalformedFrame):
        read_live_transcript({**first, "fragments": []})
    with pytest.raises(ValueError, match="one speaker"):
        live_transcript([_caller("c1", 0, 200, "Hi"), _agent("a1", 0, 200, "Hi")])


def test_a_delta_event_becomes_its_fragment() -> None:
    """The provider's delta maps onto a fragment: speaker from the type, words from `delta`."""
    assert fragment_of(DELTA) == _caller("event_EWIVgpQ2fwmwhPDTlhXxf", 4600, 4800, " result.")
    with pytest.raises(MalformedFrame):
        fragment_of(DELEGATED)


@given(
    st.lists(
        st.tuples(
            st.sampled_from([Speaker.CALLER, Speaker.AGENT]), st.integers(0, 3_000), st.integers(0, 400)
        ),
        max_size=60,
    )
)
def test_coalescing_loses_and_duplicates_nothing(steps: list[tuple[Speaker, int, int]]) -> None:
    """Whatever the fragments, writing down (with a final flush) keeps each exactly once, in
    arrival order, each durable event of one speaker."""
    fragments = [
        TranscriptFragment(
            speaker=speaker, event_id=f"e{i}", start_ms=start, end_ms=start + width, text=f" w{i}"
        )
        for i, (speaker, start, width) in enumerate(steps)
    ]
    written, buffer = _feed(fragments)
    written.extend(flush_transcript(buffer).written)
    assert [f.event_id for f in fragments_of(written)] == [f.event_id for f in fragments]
    assert all(len({f["speaker"] for f in event["fragments"]}) == 1 for event in written)


# ── delegation tasks ────────────────────────────────────────────────────────────────────

# §1.5's turn: "Please check the staging result." with the covering fragment at 4600.
TURN = [
    _caller("c1", 600, 800, "Please"),
    _caller("c2", 800, 1000, " check"),
    _caller("c3", 4200, 4400, " the"),
    _caller("c4", 4400, 4600, " staging"),
    _caller("c5", 4600, 4800, " result."),
]


def test_the_task_is_the_callers_words_up_to_the_offset() -> None:
    """Caller fragments starting at or before `offset_ms` make the task; the agent's words and
    what the caller says after the offset do not."""
    after = _caller("c6", 4800, 5000, " Thanks.")
    ack = _agent("a1", 4700, 4900, "Okay, checking now.")
    task = build_task([*TURN, ack, after], delegation_id="D", offset_ms=4600)
    assert task.text == "Please check the staging result."
    assert task.fragment_ids == ("c1", "c2", "c3", "c4", "c5")
    assert task.is_covered and task.delegation_id == "D" and task.offset_ms == 4600


def test_out_of_order_and_repeated_fragments_make_the_same_task() -> None:
    """Fragments are put in timeline order, and one delivered twice (same id, or the same words
    at the same place under another id) counts once."""
    shuffled = [
        TURN[4],
        TURN[2],
        TURN[0],
        TURN[3],
        TURN[1],
        TURN[2],
        TURN[0].model_copy(update={"event_id": "c1-again"}),
    ]
    task = build_task(shuffled, delegation_id="D", offset_ms=4600)
    assert task.text == "Please check the staging result."
    assert task.fragment_ids == ("c1", "c2", "c3", "c4", "c5")


def test_overlapping_fragments_are_kept_in_order_of_where_they_start() -> None:
    """Two fragments whose ranges overlap are both words of the caller, ordered by start."""
    overlapping = [
        _caller("b", 700, 900, " two"),
        _caller("a", 600, 800, "one"),
        _caller("c", 850, 950, " three"),
    ]
    assert build_task(overlapping, delegation_id="D", offset_ms=900).text == "one two three"
    assert [f.event_id for f in distinct_fragments(overlapping)] == ["a", "b", "c"]


def test_the_previous_delegations_words_are_not_asked_again() -> None:
    """With `since_ms` the previous delegation's offset, the task starts just after it."""
    second = [*TURN, _caller("c6", 6000, 6200, "And"), _caller("c7", 6200, 6400, " production?")]
    task = build_task(second, delegation_id="D2", offset_ms=6200, since_ms=4600)
    assert (task.text, task.fragment_ids, task.since_ms) == ("And production?", ("c6", "c7"), 4600)


def test_a_task_without_its_covering_fragment_says_so() -> None:
    """Before the covering fragment arrives the task is built from what there is, uncovered;
    an agent fragment past the offset does not cover it."""
    early = build_task([*TURN[:4], _agent("a1", 4700, 4900, "Okay,")], delegation_id="D", offset_ms=4600)
    assert early.text == "Please check the staging"
    assert not early.is_covered
    assert build_task([], delegation_id="D", offset_ms=0).text == ""


@pytest.mark.parametrize(
    ("fragments", "now", "verdict", "wait_ms"),
    [
        (TURN, NOW, SettleVerdict.COVERED, 0),
        (TURN[:4], NOW, SettleVerdict.WAIT, DELEGATION_SETTLE_MS),
        (TURN[:4], NOW + 0.1, SettleVerdict.WAIT, DELEGATION_SETTLE_MS - 100),
        (TURN[:4], NOW + DELEGATION_SETTLE_MS / 1000, SettleVerdict.EXPIRED, 0),
        (TURN[:4], NOW + 10, SettleVerdict.EXPIRED, 0),
        # A caller fragment running past the offset covers it; one ending exactly there does not.
        ([_caller("x", 4500, 4700, " staging")], NOW, SettleVerdict.COVERED, 0),
        ([_caller("x", 4400, 4600, " staging")], NOW, SettleVerdict.WAIT, DELEGATION_SETTLE_MS),
    ],
)
def test_the_settle_window_waits_for_the_covering_fragment_and_no_longer(
    fragments: list[TranscriptFragment], now: float, verdict: SettleVerdict, wait_ms: int
) -> None:
    """Covered: build now. Not covered: wait until `DELEGATION_SETTLE_MS` after the delegation
    arrived (a delayed message that long from now), then go ahead anyway."""
    decided = settle(fragments, offset_ms=4600, delegated_at=NOW, now=now)
    assert (decided.verdict, decided.wait_ms) == (verdict, wait_ms)
    assert decided.deadline == NOW + DELEGATION_SETTLE_MS / 1000
    assert decided.is_ready is (verdict is not SettleVerdict.WAIT)
    assert settle_timer("item_1") == "settle:item_1"


# ── controls ────────────────────────────────────────────────────────────────────────────


CONTROLS = [
    commentary_append("Staging is healthy.", delegation_id="item_EWIVgjaxCfSlntqN73664", event_id="s1_0"),
    commentary_append("A person says: we close at six.", delegation_id=None),
    thinking_append("Looking it up.", delegation_id="item_EWIVgjaxCfSlntqN73664", event_id="s1_1"),
    instructions_append("The caller is a verified account owner.", event_id="s2_0"),
    instructions_append("Answer in French.", delegation_id="item_1"),
    input_audio_mute(event_id="s3_0"),
    input_audio_unmute(),
    session_close(event_id="s4_0"),
]


@pytest.mark.parametrize("control", CONTROLS, ids=[c["type"] for c in CONTROLS])
def test_every_control_validates_strictly_against_the_live_types(control: dict[str, Any]) -> None:
    """Each control is a valid sideband client event with no unknown field (§6's oracle)."""
    assert live_wire_errors(control, direction="client") == []


def test_appends_always_carry_a_delegation_id_and_the_control_id() -> None:
    """`delegation_id` is required and nullable on the wire, so it is present even when null;
    the control id rides as `event_id` only when given."""
    assert commentary_append("Done.", delegation_id=None) == {
        "type": "session.commentary.append",
        "delegation_id": None,
        "content": "Done.",
    }
    assert thinking_append("Working.", delegation_id="D", event_id="k1") == {
        "type": "session.thinking.append",
        "delegation_id": "D",
        "content": "Working.",
        "event_id": "k1",
    }
    assert session_close() == {"type": "session.close"}


def test_appended_content_is_bounded_and_never_blank() -> None:
    """Content past the provider's limit is cut at a word with an ellipsis (a terminal
    commentary must not be refused for its length); blank content is refused."""
    long = " ".join(["staging"] * 1_000)
    cut = commentary_append(long, delegation_id="D")["content"]
    assert estimated_tokens(cut) <= APPEND_TOKEN_BUDGET and cut.endswith("staging…")
    assert live_wire_errors(commentary_append(long, delegation_id="D"), direction="client") == []
    with pytest.raises(ValueError, match="blank"):
        thinking_append("  ", delegation_id="D")
