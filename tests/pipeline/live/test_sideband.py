"""The Live sideband's rules, driven without a socket: frames in, actions out (in the manner of
websockets' tests/test_protocol.py)."""

from __future__ import annotations

import json
from typing import Any

from pipeline.call.sideband import Action, Delta, Final, Incident, Submit, Waited
from pipeline.live.frames import FLUSH_AFTER_MS, live_transcript
from pipeline.live.sideband import FLUSH_CHECK_S, LIVE_CLOSE_WAIT_S, LiveSideband
from pipeline.session.timeline import Speaker, TranscriptFragment
from tests.pipeline.live_calls import closed, delegated, usage

T0 = 1_700_000_000.0
FLUSH_AFTER_S = FLUSH_AFTER_MS / 1000
_TYPE = {Speaker.CALLER: "session.input_transcript.delta", Speaker.AGENT: "session.output_transcript.delta"}


def _fragment(speaker: Speaker, event_id: str, start_ms: int, text: str) -> TranscriptFragment:
    return TranscriptFragment(
        speaker=speaker, event_id=event_id, start_ms=start_ms, end_ms=start_ms + 200, text=text
    )


def _frame(fragment: TranscriptFragment) -> dict[str, Any]:
    return {
        "type": _TYPE[fragment.speaker],
        "event_id": fragment.event_id,
        "start_ms": fragment.start_ms,
        "end_ms": fragment.end_ms,
        "delta": fragment.text,
    }


def _written(*fragments: TranscriptFragment, at: float) -> list[Action]:
    """What writing these fragments down calls for: the durable transcript, then its final line."""
    event = live_transcript(fragments)
    role = "user" if fragments[0].speaker is Speaker.CALLER else "assistant"
    return [Submit(event, at), Final(role, fragments[0].event_id, event["text"])]


class SidebandCase:
    """A Live sideband fed JSON frames."""

    def __init__(self) -> None:
        self.sideband = LiveSideband()

    def receive(self, event: dict[str, Any] | str, at: float = T0) -> list[Action]:
        frame = event if isinstance(event, str) else json.dumps(event)
        return self.sideband.receive(frame, at, 0.0)

    def hear(self, fragment: TranscriptFragment, at: float = T0) -> list[Action]:
        return self.receive(_frame(fragment), at)


CALLER_1 = _fragment(Speaker.CALLER, "event_c1", 0, "Where")
CALLER_2 = _fragment(Speaker.CALLER, "event_c2", 200, " is it?")
AGENT_1 = _fragment(Speaker.AGENT, "event_a1", 600, "Let me check.")


def test_a_frame_that_is_not_json_is_an_incident_and_nothing_else() -> None:
    """A frame that is not JSON is one incident, quoting the frame."""
    (incident,) = SidebandCase().receive("[1, 2")
    assert isinstance(incident, Incident)
    assert incident.code == "malformed_provider_frame"
    assert incident.context == {"frame_preview": "[1, 2", "bytes": 5}


def test_a_transcript_delta_of_the_wrong_shape_is_an_incident() -> None:
    """A delta without its timeline range is refused, and nothing is buffered."""
    case = SidebandCase()
    (incident,) = case.receive({"type": "session.input_transcript.delta", "event_id": "e", "delta": "Hi"})
    assert isinstance(incident, Incident)
    assert case.sideband.close(T0) == []


def test_a_host_event_from_the_provider_is_an_incident() -> None:
    """A provider never speaks for the host: a `switchboard.*` frame is refused."""
    (incident,) = SidebandCase().receive({"type": "switchboard.live_transcript", "event_id": "e"})
    assert isinstance(incident, Incident) and incident.code == "malformed_provider_frame"


def test_a_fragment_is_streamed_at_once_and_buffered() -> None:
    """A caller's delta goes to the watchers as the user's, and nothing is submitted yet."""
    case = SidebandCase()
    assert case.hear(CALLER_1) == [Delta("user", "event_c1", "Where")]
    assert case.hear(CALLER_2) == [Delta("user", "event_c1", " is it?")]


def test_a_fragment_delivered_again_calls_for_nothing() -> None:
    """The same delta twice is one fragment: shown once, written once."""
    case = SidebandCase()
    case.hear(CALLER_1)
    assert case.hear(CALLER_1) == []
    assert case.sideband.close(T0) == _written(CALLER_1, at=T0)
    assert case.hear(CALLER_1) == []


def test_the_other_speaker_writes_down_the_words_before() -> None:
    """The agent's first words close the caller's: those are submitted, after the new delta (and
    then the caller's wait for them, 200 ms on the timeline)."""
    case = SidebandCase()
    case.hear(CALLER_1)
    case.hear(CALLER_2)
    actions = case.hear(AGENT_1, at=T0 + 0.5)
    assert actions == [
        Delta("assistant", "event_a1", "Let me check."),
        *_written(CALLER_1, CALLER_2, at=T0 + 0.5),
        Waited("live", 200),
    ]


def test_buffered_words_are_written_down_when_due() -> None:
    """A tick before FLUSH_AFTER_MS calls for nothing; one at it writes the words down."""
    case = SidebandCase()
    case.hear(CALLER_1)
    assert case.sideband.tick(T0 + FLUSH_AFTER_S - 0.01) == []
    assert case.sideband.tick(T0 + FLUSH_AFTER_S) == _written(CALLER_1, at=T0 + FLUSH_AFTER_S)
    assert case.sideband.tick(T0 + 5 * FLUSH_AFTER_S) == []


def test_reflected_audio_is_the_clock_of_the_buffer() -> None:
    """Reflected audio is never submitted, but a frame of it after FLUSH_AFTER_MS writes the
    buffered words down."""
    case = SidebandCase()
    case.hear(CALLER_1)
    audio = {"type": "session.output_audio.delta", "event_id": "event_o1", "delta": "AAAA"}
    assert case.receive(audio, at=T0 + 0.1) == []
    assert case.receive(audio, at=T0 + FLUSH_AFTER_S) == _written(CALLER_1, at=T0 + FLUSH_AFTER_S)


def test_a_delegation_is_submitted_after_the_words_before_it() -> None:
    """The words buffered when a delegation arrives are submitted just before it."""
    case = SidebandCase()
    case.hear(CALLER_1)
    case.hear(CALLER_2)
    delegation = delegated("del_1", offset_ms=300)
    assert case.receive(delegation, at=T0 + 0.2) == [
        *_written(CALLER_1, CALLER_2, at=T0 + 0.2),
        Submit(delegation, T0 + 0.2),
    ]


def test_the_words_covering_a_waiting_delegation_are_written_down_at_once() -> None:
    """A delegation whose offset the caller's words had not reached is waited for: the fragment
    that passes the offset is written down on arrival, not a second later."""
    case = SidebandCase()
    case.hear(CALLER_1)
    delegation = delegated("del_1", offset_ms=300)
    case.receive(delegation, at=T0 + 0.1)
    # The words go on the caller's line, written down before the delegation: the watchers see
    # them on it, whole.
    assert case.hear(CALLER_2, at=T0 + 0.2) == [
        Delta("user", "event_c1", " is it?"),
        Submit(live_transcript((CALLER_2,)), T0 + 0.2),
        Final("user", "event_c1", "Where is it?"),
    ]
    later = _fragment(Speaker.CALLER, "event_c3", 400, " Thanks.")
    assert case.hear(later, at=T0 + 0.3) == [Delta("user", "event_c1", " Thanks.")]


def test_a_delegation_the_words_had_passed_waits_for_nothing() -> None:
    """Once the caller's words are past a delegation's offset, the next fragment is only buffered."""
    case = SidebandCase()
    case.hear(CALLER_2)
    case.receive(delegated("del_1", offset_ms=100))
    later = _fragment(Speaker.CALLER, "event_c3", 400, " Thanks.")
    assert case.hear(later) == [Delta("user", "event_c2", " Thanks.")]


def test_the_last_words_are_submitted_before_the_session_closes() -> None:
    """`session.closed` comes after the words buffered before it."""
    case = SidebandCase()
    case.hear(AGENT_1)
    end = closed()
    assert case.receive(end, at=T0 + 0.3) == [*_written(AGENT_1, at=T0 + 0.3), Submit(end, T0 + 0.3)]


def test_a_durable_event_is_submitted_without_flushing() -> None:
    """A usage update is submitted alone; the words stay buffered."""
    case = SidebandCase()
    case.hear(CALLER_1)
    update = usage(12.5)
    assert case.receive(update) == [Submit(update, T0)]
    assert case.sideband.close(T0 + 0.1) == _written(CALLER_1, at=T0 + 0.1)


def test_the_sideband_s_close_writes_down_what_it_holds() -> None:
    """When the sideband closes, its buffered words are written down; an empty one calls for nothing."""
    case = SidebandCase()
    assert case.sideband.close(T0) == []
    case.hear(CALLER_1)
    assert case.sideband.close(T0 + 0.4) == _written(CALLER_1, at=T0 + 0.4)
    assert case.sideband.close(T0 + 0.5) == []


def test_a_live_sideband_ticks_has_no_playback_and_is_closed_by_its_provider() -> None:
    """It wants a tick every FLUSH_CHECK_S, never says what plays, and its provider closes it
    within LIVE_CLOSE_WAIT_S of the call's end."""
    sideband = LiveSideband()
    assert sideband.tick_every_s == FLUSH_CHECK_S
    assert sideband.closed_by_provider_within_s == LIVE_CLOSE_WAIT_S
    assert sideband.playback(100.0) is None


def test_the_agent_s_first_words_after_the_caller_s_count_the_caller_s_wait_once() -> None:
    """The caller's words end at 400 ms on the timeline and the agent's start at 600 ms: one
    `Waited` of 200 ms, with the agent's first word; its next word counts nothing."""
    case = SidebandCase()
    case.hear(CALLER_1)
    case.hear(CALLER_2)
    first = case.hear(AGENT_1)
    assert [action for action in first if isinstance(action, Waited)] == [Waited("live", 200)]
    again = case.hear(_fragment(Speaker.AGENT, "event_a2", 800, " One moment."))
    assert not any(isinstance(action, Waited) for action in again)


def test_agent_words_that_overlap_the_caller_s_are_no_wait() -> None:
    """Agent words that began before the caller's ended (an overlap) count no wait."""
    case = SidebandCase()
    case.hear(CALLER_2)
    overlapping = case.hear(_fragment(Speaker.AGENT, "event_a0", 300, "Yes"))
    assert not any(isinstance(action, Waited) for action in overlapping)


def test_words_said_over_each_other_are_kept_whole_for_each_speaker() -> None:
    """The agent starts while the caller is still speaking and both go on: decided a defect that
    each delta closed the other speaker's piece (the record read as alternating scraps: "Where",
    "Let", " is it?", " me check."). Overlapping words gather per speaker; each piece is whole,
    written down in the order they began, and a turn after the overlap closes the piece before."""
    case = SidebandCase()
    caller_1 = _fragment(Speaker.CALLER, "event_c1", 0, "Where")
    agent_1 = _fragment(Speaker.AGENT, "event_a1", 100, "Let")
    caller_2 = _fragment(Speaker.CALLER, "event_c2", 200, " is it?")
    agent_2 = _fragment(Speaker.AGENT, "event_a2", 300, " me check.")
    for fragment in (caller_1, agent_1, caller_2, agent_2):
        assert [action for action in case.hear(fragment) if isinstance(action, Submit)] == []
    assert case.sideband.close(T0 + 1) == [
        *_written(caller_1, caller_2, at=T0 + 1),
        *_written(agent_1, agent_2, at=T0 + 1),
    ]
    # After the overlap, plain turns: the caller's reply closes the agent's words.
    case.hear(_fragment(Speaker.AGENT, "event_a3", 1000, "It ships Friday."), at=T0 + 2)
    reply = case.hear(_fragment(Speaker.CALLER, "event_c3", 1400, "Thanks."), at=T0 + 2.5)
    assert [a.event["text"] for a in reply if isinstance(a, Submit)] == ["It ships Friday."]


def test_words_that_begin_where_the_other_speaker_s_last_window_ended_are_an_overlap() -> None:
    """Live's deltas come on one 200 ms grid: in a captured call the caller's " is" (2600-2800)
    arrived before the agent's " your" (2600-2800), just after the agent's "You mentioned"
    (2400-2600). Taken for a turn, each such delta closed the other speaker's piece; it is an
    overlap, and both speakers' words go on gathering."""
    case = SidebandCase()
    heard = [
        _fragment(Speaker.CALLER, "event_c1", 2400, " name"),
        _fragment(Speaker.AGENT, "event_a1", 2400, "You mentioned"),
        _fragment(Speaker.CALLER, "event_c2", 2600, " is"),
        _fragment(Speaker.AGENT, "event_a2", 2600, " your"),
        _fragment(Speaker.CALLER, "event_c3", 2800, "?"),
        _fragment(Speaker.AGENT, "event_a3", 2800, " name"),
    ]
    for fragment in heard:
        assert [action for action in case.hear(fragment) if isinstance(action, Submit)] == []
    assert case.sideband.close(T0) == [
        *_written(*heard[0::2], at=T0),
        *_written(*heard[1::2], at=T0),
    ]


def test_the_watchers_see_each_speaker_s_line_whole_under_the_id_the_record_keeps() -> None:
    """Pieces written down by time go on their speaker's line, as the workers store them
    (`line_of`): the watchers' deltas and finals name the line, and each final holds the line
    so far, so a line is never shown twice beside the record's."""
    case = SidebandCase()
    case.hear(CALLER_1)
    first = case.sideband.tick(T0 + FLUSH_AFTER_S)
    assert first == _written(CALLER_1, at=T0 + FLUSH_AFTER_S)
    # The caller goes on: shown on the same line, and its final is the line so far.
    assert case.hear(CALLER_2, at=T0 + 1.1) == [Delta("user", "event_c1", " is it?")]
    assert case.sideband.tick(T0 + 2.1) == [
        Submit(live_transcript((CALLER_2,)), T0 + 2.1),
        Final("user", "event_c1", "Where is it?"),
    ]
    # The agent's turn, then the caller again: a new line.
    case.hear(AGENT_1, at=T0 + 2.2)
    again = _fragment(Speaker.CALLER, "event_c4", 1000, "Thanks.")
    assert case.hear(again, at=T0 + 2.3)[0] == Delta("user", "event_c4", "Thanks.")
