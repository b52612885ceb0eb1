"""Late and terminal: an ended or failed session records what arrives and acts on nothing."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.admission import ADMISSION_TIMER, CEILING_TIMER
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import CloseCall, PersistTranscript, RecordIncident, ScheduleTimer
from tests.pipeline import events as ev


def _ended() -> SessionState:
    return ev.state_after(
        [
            *ev.listening(),
            ev.user_final("item_U1", "Hi"),
            ev.response_created("resp_1"),
            ev.end_requested(),
        ]
    )


def _failed() -> SessionState:
    # Admission is the one failure a fold reaches in a few events (an admission failure after
    # the call connected changes nothing: it is a stale message).
    return ev.state_after(
        [ev.session_created(), ev.admission_begun(), ev.admission_failed("provider_error", "no call")]
    )


def test_end_requested_ends_the_session_and_hangs_up() -> None:
    """An end request ends a live session, drops its turn, and hangs its call up."""
    state, steps = ev.fold(
        [*ev.listening(), ev.user_final("item_U1", "Hi"), ev.end_requested("caller_hung_up")]
    )

    assert state.phase is Phase.ENDED
    assert state.end_reason == "caller_hung_up"
    assert state.realtime.turn is None
    assert steps[-1].controls == ()
    assert steps[-1].effects == (CloseCall(reason="caller_hung_up", hangup=True),)


def test_end_requested_without_a_call_does_not_hang_up() -> None:
    """An end request before any call attached closes without a hang-up."""
    _, steps = ev.fold([ev.session_created(), ev.end_requested()])

    assert steps[-1].effects == (CloseCall(reason="app_ended", hangup=False),)


def test_a_second_end_request_changes_nothing() -> None:
    """Ending an ended session changes nothing and closes nothing again."""
    ended = _ended()

    step = ev.step_of(ended, ev.end_requested("again"))

    assert step.state == ended
    assert step.controls == ()
    assert step.effects == ()


LATER_EVENTS: list[tuple[str, Any]] = [
    ("session_updated", ev.session_updated),
    ("speech_started", lambda: ev.speech_started("item_U9")),
    ("response_created", lambda: ev.response_created("resp_9")),
    ("response_done_of_turn", lambda: ev.response_done("resp_1")),
    ("response_done_other", lambda: ev.response_done("resp_9", "failed")),
    ("user_failed", lambda: ev.user_failed("item_U9")),
    ("provider_error", ev.provider_error),
    ("sideband_connected", ev.sideband_connected),
    ("sideband_closed_1000", lambda: ev.sideband_closed(1000)),
    ("sideband_closed_1006", lambda: ev.sideband_closed(1006)),
    ("end_requested", ev.end_requested),
    ("admission_failed", ev.admission_failed),
    ("admission_timer", lambda: ev.timer_fired(ADMISSION_TIMER)),
    ("ceiling_timer", lambda: ev.timer_fired(CEILING_TIMER)),
    ("unknown", ev.unknown),
]


@pytest.mark.parametrize("terminal", [_ended, _failed], ids=["ended", "failed"])
@pytest.mark.parametrize("make", [make for _, make in LATER_EVENTS], ids=[name for name, _ in LATER_EVENTS])
def test_a_terminal_session_is_absorbing(terminal: Any, make: Any) -> None:
    """Every later event leaves an ended or failed session as it is, sending and doing nothing."""
    before = terminal()

    step = ev.step_of(before, make())

    assert step.state == before
    assert step.controls == ()
    assert step.effects == ()


@pytest.mark.parametrize("terminal", [_ended, _failed], ids=["ended", "failed"])
def test_a_repeated_session_created_leaves_a_terminal_session_alone(terminal: Any) -> None:
    """A session_created for an ended or failed session neither rewrites it nor sets a timer."""
    before = terminal()

    step = ev.step_of(before, ev.session_created("Different instructions."))

    assert step.state == before
    assert step.controls == ()
    assert step.effects == ()


@pytest.mark.parametrize("terminal", [_ended, _failed], ids=["ended", "failed"])
def test_late_transcripts_still_land(terminal: Any) -> None:
    """A terminal session still persists late user and assistant finals, and sends nothing."""
    before = terminal()

    user = ev.step_of(before, ev.user_final("item_U9", "Are you there?"))
    assistant = ev.step_of(before, ev.assistant_final("resp_1", "item_A9", "Goodbye."))

    assert user.state == before
    assert assistant.state == before
    assert user.controls == ()
    assert assistant.controls == ()
    assert user.effects == (PersistTranscript(role="user", text="Are you there?", item_id="item_U9"),)
    assert assistant.effects == (
        PersistTranscript(role="assistant", text="Goodbye.", item_id="item_A9", response_id="resp_1"),
    )


def test_an_event_of_an_older_generation_is_late() -> None:
    """An event from a superseded sideband sends nothing (its speech does not barge in on the
    answer now running); its transcript still lands."""
    speaking = ev.state_after(
        [*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")]
    ).evolve(generation=2)

    spoke = ev.step_of(speaking, ev.speech_started("item_U2"), generation=1)
    said = ev.step_of(speaking, ev.assistant_final("resp_1", "item_A1", "Hello."), generation=1)
    closed = ev.step_of(speaking, ev.sideband_closed(1006), generation=1)

    assert spoke.controls == () and spoke.state == speaking and spoke.effects == ()
    assert said.controls == () and said.state == speaking
    assert said.effects == (
        PersistTranscript(role="assistant", text="Hello.", item_id="item_A1", response_id="resp_1"),
    )
    assert closed.state == speaking
    assert closed.effects == ()


def test_an_event_of_the_current_generation_is_not_late() -> None:
    """An event from the current sideband is acted on."""
    listening = ev.state_after(ev.listening()).evolve(generation=2)

    step = ev.step_of(listening, ev.user_final("item_U1", "Hello"), generation=2)

    assert len(step.controls) == 1


def test_a_normal_sideband_close_ends_the_session() -> None:
    """The provider closing the sideband with 1000 ends the session as caller_hung_up."""
    before = ev.state_after(ev.listening())

    step = ev.step_of(before, ev.sideband_closed(1000))

    assert step.state.phase is Phase.ENDED
    assert step.state.end_reason == "caller_hung_up"
    assert step.controls == ()
    assert not any(isinstance(e, RecordIncident) for e in step.effects)
    assert step.effects == (CloseCall(reason="caller_hung_up", hangup=False),)


@pytest.mark.parametrize("code", [1006, 1011, 4000, None])
def test_an_abnormal_sideband_close_is_recorded_and_reconnected(code: int | None) -> None:
    """The sideband closing with anything but 1000 is a warning incident and a reconnect
    timer, under a new generation that fences off the old sideband."""
    before = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi")])

    step = ev.step_of(before, ev.sideband_closed(code, "going away"))

    assert step.state.phase is Phase.RESPONDING
    assert step.state.sideband_down and step.state.generation == before.generation + 1
    assert step.controls == ()
    (incident,) = [e for e in step.effects if isinstance(e, RecordIncident)]
    assert (incident.code, incident.severity) == ("sideband_lost", "warning")
    assert ScheduleTimer(name="sideband_reconnect:2", delay_ms=250) in step.effects


@pytest.mark.parametrize("code", [1000, 1006])
def test_a_close_by_the_host_changes_nothing(code: int) -> None:
    """A sideband Switchboard closed itself changes nothing."""
    before = ev.state_after(ev.listening())

    step = ev.step_of(before, ev.sideband_closed(code, by_host=True))

    assert step.state == before
    assert step.effects == ()
