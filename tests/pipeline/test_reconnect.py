"""A lost sideband: recorded, re-opened on the same call twice with backoff, then failed; the
generation fences off the old sideband's events and controls."""

from __future__ import annotations

from typing import Any

from pipeline.realtime.controls import ResponseCancel, ResponseCreate
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import CloseCall, OpenSideband, RecordIncident, ScheduleTimer
from tests.pipeline import events as ev


def _lost(state: SessionState) -> SessionState:
    return ev.step_of(state, ev.sideband_closed(1011, "dropped")).state


def test_the_sideband_is_reopened_after_the_backoff_and_the_call_goes_on() -> None:
    state = _lost(ev.state_after(ev.listening()))
    assert state.generation == 2

    reopen = ev.step_of(state, ev.timer_fired("sideband_reconnect:2"))
    assert reopen.effects == (OpenSideband(call_id=ev.CALL_ID),)
    assert reopen.state.reconnect_attempts == 1

    back = ev.step_of(reopen.state, ev.sideband_connected(), generation=2)
    assert not back.state.sideband_down and back.state.reconnect_attempts == 0
    assert back.controls == ()  # the provider kept the session's configuration
    heard = ev.step_of(back.state, ev.user_final("item_U1", "Hello again"), generation=2)
    assert len(heard.controls) == 1


def test_the_old_generations_events_are_late_after_a_loss() -> None:
    state = _lost(ev.state_after(ev.listening()))
    for stale in (ev.speech_started("item_U1"), ev.response_created("resp_9"), ev.sideband_closed(1006)):
        step = ev.step_of(state, stale, generation=1)
        assert step.controls == () and step.state == state


def test_a_stale_reconnect_timer_does_nothing() -> None:
    state = _lost(ev.state_after(ev.listening()))
    assert ev.step_of(state, ev.timer_fired("sideband_reconnect:1")).state == state


def test_the_backoff_grows_and_two_failed_attempts_fail_the_session() -> None:
    """250 ms, then 500 ms; the third timer finds both attempts spent."""
    state = ev.state_after(ev.listening())
    delays = []
    for attempt in range(3):
        lost = ev.step_of(state, ev.sideband_closed(None, "open failed"), generation=state.generation)
        [timer] = [e for e in lost.effects if isinstance(e, ScheduleTimer)]
        delays.append(timer.delay_ms)
        fired = ev.step_of(lost.state, ev.timer_fired(timer.name))
        state = fired.state
        if attempt < 2:
            assert fired.effects == (OpenSideband(call_id=ev.CALL_ID),)
    assert delays == [250, 500, 750]
    assert (state.phase, state.end_reason) == (Phase.FAILED, "sideband_reconnect_exhausted")
    assert CloseCall(reason="sideband_reconnect_exhausted", hangup=True) in fired.effects
    assert [e.code for e in fired.effects if isinstance(e, RecordIncident)] == [
        "sideband_reconnect_exhausted"
    ]


def test_a_response_running_at_the_loss_is_cancelled_and_asked_again_on_reconnect() -> None:
    """What the provider said while no sideband listened is gone: the caller's response is
    asked for again (the running one cancelled first), so the turn never waits for a
    response.done nobody saw."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])
    state = _lost(state)
    state = ev.step_of(state, ev.timer_fired("sideband_reconnect:2")).state

    back = ev.step_of(state, ev.sideband_connected(), generation=2)

    cancel, create = back.controls
    assert cancel == ResponseCancel(response_id="resp_1")
    assert isinstance(create, ResponseCreate)
    assert back.state.phase is Phase.RESPONDING
    assert back.state.realtime.turn is not None and back.state.realtime.turn.response_id is None
    # The new response starts and ends as usual.
    started = ev.step_of(back.state, ev.response_created("resp_2"), generation=2)
    done = ev.step_of(started.state, ev.response_done("resp_2"), generation=2)
    assert done.state.phase is Phase.LISTENING


def test_a_takeover_reopens_the_sideband_at_once_as_a_new_generation() -> None:
    state = ev.state_after(ev.listening())
    step = ev.step_of(state, {"type": "switchboard.gateway_lost", "gateway_id": "gw2"})
    assert step.state.generation == state.generation + 1 and step.state.sideband_down
    assert OpenSideband(call_id=ev.CALL_ID) in step.effects
    [incident] = [e for e in step.effects if isinstance(e, RecordIncident)]
    assert (incident.code, incident.severity) == ("gateway_lost", "warning")
    # A provider that refuses the new sideband: one more attempt, then the failure and hangup.
    refused = ev.step_of(step.state, ev.sideband_closed(None, "open failed"), generation=2)
    fired = ev.step_of(refused.state, ev.timer_fired("sideband_reconnect:3"))
    assert fired.effects == (OpenSideband(call_id=ev.CALL_ID),)
    again = ev.step_of(fired.state, ev.sideband_closed(None, "open failed"), generation=3)
    final = ev.step_of(again.state, ev.timer_fired("sideband_reconnect:4"))
    assert (final.state.phase, final.state.end_reason) == (Phase.FAILED, "sideband_reconnect_exhausted")
    assert CloseCall(reason="sideband_reconnect_exhausted", hangup=True) in final.effects


def test_a_loss_before_any_call_fails_at_once() -> None:
    state = ev.state_after([ev.session_created(), ev.admission_begun()])
    step = ev.step_of(state, ev.sideband_closed(1006))
    assert (step.state.phase, step.state.end_reason) == (Phase.FAILED, "sideband_lost")


def _gateway_lost(handed_over: bool) -> dict[str, Any]:
    return {"type": "switchboard.gateway_lost", "gateway_id": "gw2", "handed_over": handed_over}


def test_an_answer_asked_of_the_new_sideband_is_not_asked_again_when_it_opens() -> None:
    """A call handed to another gateway; the caller speaks before the new sideband opened (the
    old one, still open, heard it). The answer asked then waits on the opening sideband and goes
    out once: asking again when it opens made the caller hear two answers."""
    moved, _ = ev.fold([*ev.listening(), _gateway_lost(handed_over=True)])
    spoke, steps = ev.fold([ev.speech_started("item_u1"), ev.user_final("item_u1", "Hello?")], moved)
    assert [type(c) for c in ev.controls_of(steps)] == [ResponseCreate]
    opened, steps = ev.fold([ev.sideband_connected()], spoke)
    assert ev.controls_of(steps) == []
    assert opened.realtime.turn is not None and not opened.sideband_down


def test_an_answer_asked_of_a_sideband_that_died_is_asked_again() -> None:
    """Asked of the old sideband (its gateway died, or the provider closed it before a new one
    was asked open), the request may be lost with it: asked again when the new one opens."""
    asked, _ = ev.fold([*ev.listening(), ev.speech_started("item_u1"), ev.user_final("item_u1", "Hello?")])
    taken, _ = ev.fold([_gateway_lost(handed_over=False)], asked)
    _, steps = ev.fold([ev.sideband_connected()], taken)
    assert ResponseCreate in [type(c) for c in ev.controls_of(steps)]


def test_a_reopening_the_provider_answers_with_no_such_call_ends_the_call() -> None:
    """The caller hung up while the sideband was down (a handover, a lost connection): the
    provider has no such call any more, so the call is over, as after a normal close — not a
    sideband lost twice and a session failed."""
    state = _lost(ev.state_after(ev.listening()))
    reopen = ev.step_of(state, ev.timer_fired("sideband_reconnect:2"))
    gone = {**ev.sideband_closed(None, "open failed: HTTP 404"), "call_gone": True}
    ended = ev.step_of(reopen.state, gone, generation=2)
    assert (ended.state.phase, ended.state.end_reason) == (Phase.ENDED, "caller_hung_up")
    assert CloseCall(reason="caller_hung_up", hangup=False) in ended.effects
    refused = ev.step_of(reopen.state, ev.sideband_closed(None, "open failed: HTTP 403"), generation=2)
    assert refused.state.phase is Phase.LISTENING and refused.state.sideband_down
