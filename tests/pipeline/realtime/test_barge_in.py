"""Barge-in: the caller talks over a running response — cut what they did not hear, then cancel."""

from __future__ import annotations

from typing import Any

from pipeline.realtime.controls import ItemTruncate, ResponseCancel, ResponseCreate
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import CancelTool, RecordIncident
from pipeline.session.wire import control_wire
from simulator.oracle import wire_errors
from tests.pipeline import events as ev

LOOKUP = {"type": "function", "name": "lookup_order", "parameters": {"type": "object"}}


def _speaking(response_id: str = "resp_1") -> SessionState:
    return ev.state_after(
        [*ev.listening(), ev.user_final("item_U1", "Hours?"), ev.response_created(response_id)]
    )


def _speech(item_id: str = "item_U2", playback: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = ev.speech_started(item_id)
    if playback is not None:
        raw["playback"] = playback
    return raw


def test_talking_over_a_response_cuts_it_where_the_caller_stopped_hearing_then_cancels() -> None:
    step = ev.step_of(
        _speaking(), _speech(playback={"item_id": "item_A1", "response_id": "resp_1", "played_ms": 1840})
    )

    truncate, cancel = step.controls
    assert truncate == ItemTruncate(item_id="item_A1", content_index=0, audio_end_ms=1840)
    assert cancel == ResponseCancel(response_id="resp_1")
    for control in step.controls:
        wire = control_wire(control.model_copy(update={"event_id": "ctl_9_0"}))
        assert wire_errors(wire, direction="client") == []
    assert step.state.realtime.speech_started_count == 1


def test_nothing_is_cut_when_nothing_of_the_response_had_played() -> None:
    """No playback (no transcript delta yet), or playback of an older response: cancel only."""
    for playback in (None, {"item_id": "item_A0", "response_id": "resp_0", "played_ms": 5000}):
        step = ev.step_of(_speaking(), _speech(playback=playback))
        assert step.controls == (ResponseCancel(response_id="resp_1"),)


def test_a_negative_playback_position_is_clamped_to_zero() -> None:
    step = ev.step_of(
        _speaking(), _speech(playback={"item_id": "item_A1", "response_id": "resp_1", "played_ms": -30})
    )
    assert step.controls[0] == ItemTruncate(item_id="item_A1", audio_end_ms=0)


def test_speech_while_listening_or_before_the_response_started_sends_nothing() -> None:
    listening = ev.state_after(ev.listening())
    asked = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hours?")])
    for state in (listening, asked):
        step = ev.step_of(
            state, _speech(playback={"item_id": "item_A1", "response_id": "resp_1", "played_ms": 10})
        )
        assert step.controls == ()
        assert step.state == state.with_realtime(speech_started_count=1)


def test_after_a_barge_in_the_cancelled_response_ends_the_turn_and_the_caller_is_answered() -> None:
    state = ev.step_of(_speaking(), _speech(playback=None)).state
    state = ev.step_of(state, ev.user_final("item_U2", "Sorry, one more thing")).state
    assert state.realtime.queued_input_item_id == "item_U2"

    step = ev.step_of(state, ev.response_done("resp_1", "cancelled"))

    [create] = step.controls
    assert isinstance(create, ResponseCreate)
    assert step.state.phase is Phase.RESPONDING and step.state.realtime.turn is not None
    assert step.state.realtime.turn.context.input_item_id == "item_U2"


def test_talking_over_a_running_tool_cancels_it_and_not_a_finished_response() -> None:
    """The response that called the tool has completed: only the tool is stopped."""
    state = ev.state_after(
        [
            *ev.listening(tools=[LOOKUP]),
            ev.user_final("item_U1", "Where is 4417?"),
            ev.response_created("resp_1"),
            ev.function_call("call_1", "resp_1", "item_F1"),
            ev.response_done("resp_1"),
        ]
    )
    assert state.realtime.chain.pending is not None and state.realtime.chain.response_completed

    step = ev.step_of(
        state, _speech(playback={"item_id": "item_A1", "response_id": "resp_1", "played_ms": 10})
    )

    assert step.controls == ()
    assert step.effects == (CancelTool(call_id="call_1", reason="barge_in"),)
    assert step.state.realtime.chain.continuation_allowed is False


def test_a_response_the_provider_cancels_itself_is_cancelled_once_more_harmlessly() -> None:
    """A client that configured `interrupt_response` lets the provider cancel a response on the
    caller's speech itself (`turn_detected`). Switchboard, seeing the same speech_started, sends
    its own `response.cancel`: decided harmless. Whether the provider's cancel comes first (the
    host's is then refused `response_cancel_not_active`, kept as a warning like every provider
    error) or the host's does, the turn ends once, nothing fails, and the caller's new line is
    answered exactly once."""
    turn_detected = {"reason": "turn_detected", "type": "cancelled"}
    orders = {
        "provider first": [  # the refusal is the one warning
            ev.response_done("resp_1", "cancelled", status_details=turn_detected),
            ev.provider_error("response_cancel_not_active"),
            ev.user_final("item_U2", "Actually, Saturday?"),
        ],
        "host first": [
            ev.user_final("item_U2", "Actually, Saturday?"),
            ev.response_done(
                "resp_1", "cancelled", status_details={"reason": "client_cancelled", "type": "cancelled"}
            ),
        ],
    }
    for order, after in orders.items():
        barged = ev.step_of(_speaking(), _speech(playback=None))
        assert barged.controls == (ResponseCancel(response_id="resp_1"),), order
        state, steps = ev.fold(
            [*after, ev.response_created("resp_2"), ev.response_done("resp_2")], barged.state
        )
        sent = ev.controls_of(steps)
        assert [type(control) for control in sent] == [ResponseCreate], (order, sent)
        warned = [(i.code, i.severity) for i in ev.effects_of(steps, RecordIncident)]
        refused = [("provider_response_cancel_not_active", "warning")] if order == "provider first" else []
        assert warned == refused, order
        assert state.phase is Phase.LISTENING and state.end_reason is None, order
