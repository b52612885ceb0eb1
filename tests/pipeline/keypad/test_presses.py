"""What only a phone call has: keypad presses, the caller's silences, the model's transfer."""

from __future__ import annotations

from typing import Any

from pipeline.call.built_in import TRANSFER_CALL
from pipeline.phone.sip import PhoneLine
from pipeline.realtime.controls import ItemCreate, ResponseCreate
from pipeline.realtime.silences import GOODBYE_SILENT
from pipeline.realtime.turns import SAY_EXACTLY
from pipeline.session.state import Phase
from pipeline.session.step import LogEntry, ScheduleTimer, Step, Suppress, TransferCall
from pipeline.session.wire import SessionUpdate
from tests.pipeline import events as ev
from tests.pipeline import line_events as op

LINE = PhoneLine(
    caller="+14155550100",
    dialled="+18005551212",
    route_id="route_1",
    transfer_targets=("tel:+14155550123",),
    keys={"0": "attention", "#": "end"},
    silences=2,
    silence_ms=8_000,
)


def _phone_call() -> list[dict[str, Any]]:
    created = {**ev.session_created(), "phone": LINE.model_dump(mode="json")}
    attached = {**ev.call_attached(), "medium": "sip"}
    return [created, ev.admission_begun(), attached, ev.sideband_connected(), ev.session_updated()]


def _entries(step: Step) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data) for e in step.effects if isinstance(e, LogEntry)]


def _key(key: str) -> dict[str, Any]:
    return {"type": "input_audio_buffer.dtmf_event_received", "event": key, "received_at": 1_750_000_000}


def _silence() -> dict[str, Any]:
    return {
        "type": "input_audio_buffer.timeout_triggered",
        "event_id": "event_silence",
        "item_id": "item_silence",
        "audio_start_ms": 1_000,
        "audio_end_ms": 9_000,
    }


def test_a_phone_call_is_configured_with_its_idle_timeout_and_transfer_tool() -> None:
    _, steps = ev.fold(_phone_call()[:4])
    [configure] = steps[-1].controls
    assert isinstance(configure, SessionUpdate)
    assert configure.session["audio"]["input"]["turn_detection"]["idle_timeout_ms"] == 8_000
    [tool] = configure.session["tools"]
    assert tool["name"] == TRANSFER_CALL
    assert tool["parameters"]["properties"]["target"]["enum"] == ["tel:+14155550123"]


def test_the_attention_key_asks_for_a_person_and_the_end_key_ends_the_call() -> None:
    state = ev.state_after(_phone_call())

    pressed = ev.step_of(state, _key("0"))

    assert [kind for kind, _ in _entries(pressed)] == ["call.key", "attention.requested", "call.line"]
    # The caller asked, with their keypad: the call log says so (an app's request says "app").
    assert _entries(pressed)[1][1] == {"reason": "the caller pressed 0", "wait_s": 120.0, "by": "caller"}
    assert pressed.state.held and pressed.state.attention is not None
    assert any(isinstance(e, ScheduleTimer) and e.name == "attention:1" for e in pressed.effects)
    assert ev.step_of(state, _key("5")).state == state  # an unmapped key is only logged
    ended = ev.step_of(state, _key("#"))
    assert ended.state.phase is Phase.ENDED and ended.state.end_reason == "caller_pressed_end"


def _opting_out(caller: str) -> list[dict[str, Any]]:
    line = LINE.model_copy(update={"caller": caller, "keys": {"9": "opt_out"}})
    return [{**_phone_call()[0], "phone": line.model_dump(mode="json")}, *_phone_call()[1:]]


def test_a_caller_who_opts_out_is_suppressed_by_their_e164_number_and_one_with_none_is_not() -> None:
    """The opt-out key puts the caller's number on the list in its E.164 form and ends the
    call; a caller with no number to list (`anonymous`, a number no caller has) is as if the
    key were unmapped: nothing goes on the list, and the call goes on."""
    pressed = ev.step_of(ev.state_after(_opting_out("+4402071234567")), _key("9"))
    assert [e.number for e in pressed.effects if isinstance(e, Suppress)] == ["+442071234567"]
    assert pressed.state.phase is Phase.ENDED and pressed.state.end_reason == "opted_out"
    for caller in ("anonymous", "+1415", ""):
        state = ev.state_after(_opting_out(caller))
        pressed = ev.step_of(state, _key("9"))
        assert not [e for e in pressed.effects if isinstance(e, Suppress)], caller
        assert pressed.state.phase is state.phase, caller


def test_silences_ask_whether_the_caller_is_there_then_the_agent_says_goodbye_and_hangs_up() -> None:
    state = ev.state_after(_phone_call())

    first = ev.step_of(state, _silence())

    assert _entries(first) == [("call.silence", {"count": 1})]
    [ask] = [c for c in first.controls if isinstance(c, ResponseCreate)]
    assert ask.response is not None and ask.response.instructions is not None
    assert ask.response.instructions.endswith("whether they are still there.")
    state = ev.fold([ev.response_created("resp_1"), ev.response_done("resp_1")], first.state)[0]

    second = ev.step_of(state, _silence())

    [goodbye] = [c for c in second.controls if isinstance(c, ResponseCreate)]
    assert goodbye.response is not None and goodbye.response.instructions == SAY_EXACTLY.format(
        text=GOODBYE_SILENT
    )
    ended = ev.fold([ev.response_created("resp_2"), ev.response_done("resp_2")], second.state)[0]
    assert ended.phase is Phase.ENDED and ended.end_reason == "caller_silent"


def test_the_caller_speaking_starts_the_silences_again() -> None:
    state = ev.state_after(
        [*_phone_call(), _silence(), ev.response_created("resp_1"), ev.response_done("resp_1")]
    )
    assert state.realtime.silences_heard == 1
    spoke = ev.step_of(state, ev.user_final("item_u1", "Sorry, I'm here."))
    assert spoke.state.realtime.silences_heard == 0


def test_the_model_transfers_only_to_a_route_target_and_is_told_when_it_fails() -> None:
    state = ev.state_after(
        [*_phone_call(), ev.user_final("item_u1", "A person, please."), ev.response_created("resp_1")]
    )

    invented = ev.step_of(
        state,
        ev.function_call("call_x", "resp_1", name=TRANSFER_CALL, arguments='{"target": "tel:+19005550000"}'),
    )
    assert not any(isinstance(e, TransferCall) for e in invented.effects)

    asked = ev.step_of(
        state,
        ev.function_call("call_t", "resp_1", name=TRANSFER_CALL, arguments='{"target": "tel:+14155550123"}'),
    )
    assert TransferCall(to="tel:+14155550123") in asked.effects
    after = ev.step_of(asked.state, ev.response_done("resp_1")).state

    went = ev.step_of(after, op.transfer_finished("tel:+14155550123"))
    assert went.state.end_reason == "agent_transferred"

    failed = ev.step_of(after, op.transfer_finished("tel:+14155550123", ok=False, error="486 busy"))
    [output] = [c for c in failed.controls if isinstance(c, ItemCreate)]
    assert output.item["call_id"] == "call_t" and "486 busy" in output.item["output"]
    assert any(isinstance(c, ResponseCreate) for c in failed.controls)
    assert failed.state.phase is Phase.RESPONDING
