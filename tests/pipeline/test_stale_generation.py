"""Events a superseded sideband delivers late (a gateway frozen while a peer took the call over):
the caller's lines and the current turn's response.done still count; everything else is late."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.dialects import parse_inbound
from pipeline.realtime.controls import ResponseCreate
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import PersistTranscript, RecordIncident
from pipeline.transitions import disposition_of
from tests.pipeline import events as ev

# The frozen gateway numbers what its socket still held with the generation it opened.
OLD = 1


def _taken_over(state: SessionState, *, reattached: bool = True) -> SessionState:
    """The session after a peer took it over (generation 2), with its sideband re-opened or not."""
    state = ev.step_of(state, {"type": "switchboard.gateway_lost", "gateway_id": "gw2"}).state
    assert state.generation == OLD + 1
    if reattached:
        state = ev.step_of(state, ev.sideband_connected()).state
    return state


def _stale(state: SessionState, raw: dict[str, Any]) -> tuple[Any, str]:
    """The step and the log disposition of an event numbered with the old generation."""
    return ev.step_of(state, raw, generation=OLD), disposition_of(state, parse_inbound(raw), OLD)


def test_a_caller_line_the_frozen_gateway_heard_is_answered_by_the_new_owner() -> None:
    """A caller's final transcript from a superseded sideband is persisted, answered and logged
    applied."""
    state = _taken_over(ev.state_after(ev.listening()))

    step, disposition = _stale(state, ev.user_final("item_U1", "Can you hear me?"))

    assert disposition == "applied"
    [create] = step.controls
    assert isinstance(create, ResponseCreate)
    assert step.effects[0] == PersistTranscript(role="user", text="Can you hear me?", item_id="item_U1")
    assert (
        step.state.realtime.turn is not None and step.state.realtime.turn.context.input_item_id == "item_U1"
    )


def test_a_stale_caller_line_during_a_response_is_answered_after_it() -> None:
    """A stale caller line that arrives while a response is owed is answered when that response
    is done."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi")])
    state = ev.step_of(_taken_over(state), ev.response_created("resp_2")).state

    queued, disposition = _stale(state, ev.user_final("item_U2", "One more thing"))
    assert disposition == "applied"
    assert queued.controls == () and queued.state.realtime.queued_input_item_id == "item_U2"
    done = ev.step_of(queued.state, ev.response_done("resp_2"))

    [create] = done.controls
    assert isinstance(create, ResponseCreate)
    assert (
        done.state.realtime.turn is not None and done.state.realtime.turn.context.input_item_id == "item_U2"
    )


def test_a_stale_response_done_of_the_turns_response_settles_the_turn() -> None:
    """The response.done of exactly the response the turn waits on ends the turn, though the old
    sideband delivered it."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])
    state = _taken_over(state, reattached=False)

    step, disposition = _stale(state, ev.response_done("resp_1"))

    assert disposition == "applied"
    assert (step.state.phase, step.state.realtime.turn) == (Phase.LISTENING, None)
    assert step.state.usage.responses == state.usage.responses + 1


def test_a_stale_response_done_never_ends_a_turn_whose_response_was_asked_again() -> None:
    """An old sideband's response.done is late once a re-attach asked for the turn's response
    again (it ended the older response, not the one now owed)."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])
    state = _taken_over(state)
    assert state.realtime.turn is not None and state.realtime.turn.response_id is None

    for done in (ev.response_done("resp_1"), ev.response_done("resp_9")):
        step, disposition = _stale(state, done)
        assert disposition == "late"
        assert step.state == state and step.controls == () and step.effects == ()


def test_a_stale_response_done_of_another_response_is_late() -> None:
    """A stale response.done that names a response other than the turn's is late."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])
    state = _taken_over(state, reattached=False)

    step, disposition = _stale(state, ev.response_done("resp_0"))

    assert disposition == "late"
    assert step.state == state and step.controls == ()


@pytest.mark.parametrize(
    "make",
    [
        lambda: ev.speech_started("item_U2"),
        lambda: ev.response_created("resp_9"),
        lambda: ev.user_failed("item_U2"),
        lambda: ev.provider_error("response_cancel_not_active"),
        lambda: ev.sideband_closed(1006),
        ev.unknown,
    ],
    ids=["speech_started", "response_created", "user_failed", "provider_error", "sideband_closed", "unknown"],
)
def test_every_other_stale_event_is_late(make: Any) -> None:
    """Anything else from a superseded sideband is logged late and changes nothing (its speech
    does not barge in on the answer running now)."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi")])
    state = ev.step_of(_taken_over(state), ev.response_created("resp_2")).state

    step, disposition = _stale(state, make())

    assert disposition == "late"
    assert step.state == state and step.controls == () and step.effects == ()


def test_a_caller_line_for_a_finished_session_stays_late_but_an_end_request_is_applied() -> None:
    """A finished session logs a caller line late and an end request applied."""
    ended = ev.state_after([*ev.listening(), ev.end_requested()])

    line = parse_inbound(ev.user_final("item_U1", "Hello?"))
    assert disposition_of(ended, line, ended.generation) == "late"
    assert disposition_of(ended, parse_inbound(ev.end_requested()), ended.generation) == "applied"


def test_events_the_gateway_dropped_are_a_warning_where_they_were() -> None:
    """A `switchboard.events_dropped` event records an events_dropped warning with the count,
    and changes nothing else (the turn it may have left waiting has its response deadline)."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi")])
    dropped = {
        "type": "switchboard.events_dropped",
        "count": 2,
        "types": {"response.done": 1, "response.created": 1},
        "reason": "redis_unreachable",
    }

    step = ev.step_of(state, dropped)

    assert step.state == state
    assert step.controls == ()
    [incident] = step.effects
    assert isinstance(incident, RecordIncident)
    assert (incident.code, incident.severity) == ("events_dropped", "warning")
    assert incident.context == {"count": 2, "types": dropped["types"], "reason": "redis_unreachable"}
