"""Card capture by keypad (issue 25, step 8), as pure transitions: the line is held and the
boundary told to keep the presses, the prompt said, the sealed digits run the tool, the outcome
told to the model and the line given back; and every way a collection ends short."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.call.keypad import COLLECT_DIGITS, DigitsSpec
from pipeline.phone.sip import PhoneLine
from pipeline.realtime.controls import ItemCreate, ResponseCreate
from pipeline.session.state import SessionState
from pipeline.session.step import (
    AnswerRequest,
    CancelTool,
    CollectDigits,
    InterruptToolStep,
    LogEntry,
    RequestToolStep,
    RunTool,
    ScheduleTimer,
    Step,
)
from pipeline.session.wire import SessionUpdate
from tests.pipeline import events as ev
from tests.pipeline import line_events as op

PAYMENT = {
    "type": "function",
    "name": "take_payment",
    "description": "Charge a card.",
    "parameters": {
        "type": "object",
        "properties": {"card_number": {"type": "string"}, "amount_cents": {"type": "integer"}},
        "required": ["card_number", "amount_cents"],
    },
}
LOOKUP = {**PAYMENT, "name": "look_up", "parameters": {"type": "object", "properties": {}}}
LINE = PhoneLine(caller="+14155550100", dialled="+18005551212", route_id="route_1")
SEALED = "sealed:v1:AAAA"


def _phone_call(sensitive: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    created = {
        **ev.session_created(tools=[PAYMENT, LOOKUP]),
        "phone": LINE.model_dump(mode="json"),
        "tool_sensitive": sensitive if sensitive is not None else {"take_payment": ["card_number"]},
    }
    attached = {**ev.call_attached(), "medium": "sip"}
    return [created, ev.admission_begun(), attached, ev.sideband_connected(), ev.session_updated()]


def _collect(**fields: Any) -> dict[str, Any]:
    body = {
        "type": "switchboard.collect",
        "tool": "take_payment",
        "prompt": "Please type your card number, then the hash key.",
        "arguments": {"amount_cents": 500},
        **fields,
    }
    return {**body, "request_id": "req_collect", "gateway_id": "gw1"}


def _typed(count: int, digits: str | None = SEALED, number: int = 1) -> dict[str, Any]:
    return {
        "type": "switchboard.digits_collected",
        "number": number,
        "count": count,
        "digits": digits,
        "ended_by": "end",
    }


def _finished(call_id: str = "keypad_1", **outcome: Any) -> dict[str, Any]:
    result = outcome or {"status": "succeeded", "result": {"card_ending": "1111"}, "elapsed_ms": 40}
    return {"type": "switchboard.tool_finished", "call_id": call_id, "outcome": result}


def _answer(step: Step) -> tuple[int, dict[str, Any]]:
    [answer] = [effect for effect in step.effects if isinstance(effect, AnswerRequest)]
    return answer.status, answer.body


def _kinds(step: Step) -> list[str]:
    return [effect.kind for effect in step.effects if isinstance(effect, LogEntry)]


def _notes(step: Step) -> list[str]:
    return [
        control.item["content"][0]["text"]
        for control in step.controls
        if isinstance(control, ItemCreate) and control.item.get("role") == "system"
    ]


def _collecting() -> tuple[SessionState, Step]:
    """A collection begun, its prompt said (the response that said it is over)."""
    state = ev.state_after(_phone_call())
    step = ev.step_of(state, _collect())
    said = ev.fold([ev.response_created("resp_prompt"), ev.response_done("resp_prompt")], step.state)[0]
    return said, step


def test_a_collection_holds_the_line_tells_the_boundary_and_says_the_prompt() -> None:
    state, step = _collecting()

    assert _answer(step) == (202, {"status": "collecting", "collection": 1})
    assert state.held and state.collecting is not None and state.collecting.phase == "typing"
    assert state.collecting.parameter == "card_number"
    [directive] = [effect for effect in step.effects if isinstance(effect, CollectDigits)]
    assert directive == CollectDigits(number=1, digits=DigitsSpec(min=12, max=19, end="#"))
    assert any(isinstance(e, ScheduleTimer) and e.name == "keypad_deadline:1" for e in step.effects)
    assert _kinds(step) == ["keypad.collecting", "call.line", "keypad.prompted"]
    # Turn detection is off (the agent hears nothing), and the prompt is said word for word.
    [update] = [control for control in step.controls if isinstance(control, SessionUpdate)]
    assert update.session["audio"]["input"]["turn_detection"] is None
    [said] = [control for control in step.controls if isinstance(control, ResponseCreate)]
    assert "Please type your card number, then the hash key." in said.response.instructions


def test_the_sealed_digits_run_the_tool_then_the_line_is_given_back_and_the_model_told() -> None:
    state, _ = _collecting()

    typed = ev.step_of(state, _typed(16))
    [requested] = [effect for effect in typed.effects if isinstance(effect, RequestToolStep)]
    [run] = [effect for effect in typed.effects if isinstance(effect, RunTool)]
    assert requested.call_id == run.call_id == "keypad_1" and requested.response_id is None
    assert json.loads(run.arguments) == {"amount_cents": 500, "card_number": SEALED}
    assert typed.state.held and typed.state.collecting is not None
    assert typed.state.collecting.phase == "running"
    assert _kinds(typed) == ["keypad.typed"]

    finished = ev.step_of(typed.state, _finished())
    assert not finished.state.held and finished.state.collecting is None
    assert _kinds(finished) == ["keypad.finished", "call.line"]
    [note] = _notes(finished)
    assert "typed 16 digits" in note and '"card_ending": "1111"' in note
    assert any(isinstance(control, ResponseCreate) for control in finished.controls)


def test_what_a_tool_says_back_is_redacted_before_the_model_is_told() -> None:
    state, _ = _collecting()
    running = ev.step_of(state, _typed(16)).state

    echoed = {"status": "succeeded", "result": {"card": "4111 1111 1111 1111"}, "elapsed_ms": 5}
    [note] = _notes(ev.step_of(running, _finished(**echoed)))

    assert "4111 1111 1111 1111" not in note and "1111" in note


@pytest.mark.parametrize(
    ("typed", "code"),
    [(_typed(4), "too_few_digits"), (_typed(16, digits=None), "not_sealed")],
)
def test_an_entry_that_cannot_run_the_tool_gives_the_line_back_and_says_why(
    typed: dict[str, Any], code: str
) -> None:
    state, _ = _collecting()

    step = ev.step_of(state, typed)

    assert not any(isinstance(effect, RunTool) for effect in step.effects)
    [finished] = [e for e in step.effects if isinstance(e, LogEntry) and e.kind == "keypad.finished"]
    assert finished.data["code"] == code and finished.data["status"] == "failed"
    assert not step.state.held and step.state.collecting is None
    [note] = _notes(step)
    assert "did not go through" in note


def test_a_caller_who_never_finishes_is_timed_out_and_the_boundary_forgets_the_presses() -> None:
    state, _ = _collecting()

    step = ev.step_of(state, ev.timer_fired("keypad_deadline:1"))

    assert CollectDigits(number=1, digits=None) in step.effects
    assert not step.state.held and step.state.collecting is None
    assert "did not finish typing within 60 seconds" in _notes(step)[0]
    # The digits of a collection that is over are no longer taken.
    assert ev.step_of(step.state, _typed(16)).state == step.state


def test_a_tool_that_never_reports_back_is_stopped_and_its_step_interrupted() -> None:
    state, _ = _collecting()
    running = ev.step_of(state, _typed(16)).state

    step = ev.step_of(running, ev.timer_fired("keypad_deadline:1"))

    assert CancelTool(call_id="keypad_1", reason="tool_deadline_passed") in step.effects
    assert any(isinstance(effect, InterruptToolStep) for effect in step.effects)
    assert not step.state.held and step.state.collecting is None
    # Its outcome, if it comes after all, changes nothing.
    assert ev.step_of(step.state, _finished()).state == step.state


def test_a_sideband_reopened_while_the_caller_types_ends_the_collection() -> None:
    state, _ = _collecting()

    step = ev.step_of(state, ev.sideband_connected())

    assert CollectDigits(number=1, digits=None) in step.effects
    assert step.state.collecting is None and not step.state.held
    assert "re-opened" in _notes(step)[0]


def test_a_call_that_ends_while_the_tool_runs_stops_it() -> None:
    state, _ = _collecting()
    running = ev.step_of(state, _typed(16)).state

    step = ev.step_of(running, ev.end_requested())

    assert step.state.is_terminal and step.state.collecting is None
    assert any(isinstance(effect, CancelTool) and effect.call_id == "keypad_1" for effect in step.effects)
    assert any(isinstance(effect, InterruptToolStep) for effect in step.effects)


def test_a_person_who_takes_the_line_cancels_the_collection() -> None:
    state, _ = _collecting()

    step = ev.step_of(state, op.supervisor({"type": "take_over"}))

    assert step.state.taken_by is not None and step.state.collecting is None
    assert CollectDigits(number=1, digits=None) in step.effects
    assert "keypad.finished" in _kinds(step) and "supervisor.took_over" in _kinds(step)


def test_the_line_verbs_wait_for_the_collection_and_a_second_one_is_refused() -> None:
    state, _ = _collecting()

    assert _answer(ev.step_of(state, op.hold(False)))[0] == 409
    assert _answer(ev.step_of(state, op.attention()))[1]["error"]["code"] == "collecting"
    assert _answer(ev.step_of(state, _collect()))[1]["error"]["code"] == "already_collecting"


@pytest.mark.parametrize(
    ("fields", "status", "code"),
    [
        ({"tool": "nope"}, 422, "unknown_tool"),
        ({"tool": "look_up"}, 422, "tool_cannot_collect"),
        ({"parameter": "amount_cents"}, 422, "tool_cannot_collect"),
        ({"arguments": {"card_number": "4111"}}, 422, "digits_in_arguments"),
    ],
)
def test_a_collection_a_tool_cannot_take_is_refused(fields: dict[str, Any], status: int, code: str) -> None:
    state = ev.state_after(_phone_call())

    step = ev.step_of(state, _collect(**fields))

    assert _answer(step)[0] == status and _answer(step)[1]["error"]["code"] == code
    assert step.state == state


def test_only_a_live_phone_call_on_a_free_line_can_collect() -> None:
    webrtc = ev.state_after(ev.listening())
    assert _answer(ev.step_of(webrtc, _collect()))[1]["error"]["code"] == "no_keypad"
    held = ev.step_of(ev.state_after(_phone_call()), op.hold()).state
    assert _answer(ev.step_of(held, _collect()))[1]["error"]["code"] == "line_held"
    ended = ev.step_of(ev.state_after(_phone_call()), ev.end_requested()).state
    assert _answer(ev.step_of(ended, _collect()))[1]["error"]["code"] == "session_ended"


def _model_calls(state: SessionState, arguments: dict[str, Any]) -> tuple[Step, Step]:
    asked = ev.step_of(state, ev.user_final("item_u1", "I'd like to pay my bill."))
    state = ev.step_of(asked.state, ev.response_created("resp_1")).state
    called = ev.step_of(
        state, ev.function_call("call_c1", "resp_1", name=COLLECT_DIGITS, arguments=json.dumps(arguments))
    )
    done = ev.step_of(called.state, ev.response_done("resp_1"))
    return called, done


def test_the_model_s_built_in_tool_collects_after_its_own_words() -> None:
    state = ev.state_after(_phone_call())
    [update] = [c for c in ev.fold(_phone_call()[:4])[1][-1].controls if isinstance(c, SessionUpdate)]
    [offered] = [tool for tool in update.session["tools"] if tool["name"] == COLLECT_DIGITS]
    assert offered["parameters"]["properties"]["tool"]["enum"] == ["take_payment"]

    called, done = _model_calls(
        state,
        {"tool": "take_payment", "prompt": "Type your card, then hash.", "arguments": {"amount_cents": 9}},
    )

    # Begun at once, without cutting the model's response; the prompt waits for it to end.
    assert called.state.collecting is not None and called.state.collecting.by == "model"
    assert called.state.held and not any(c.type == "response.cancel" for c in called.controls)
    # The call is answered once its response is done, and the prompt is said then.
    outputs = [
        c for c in done.controls if isinstance(c, ItemCreate) and c.item["type"] == "function_call_output"
    ]
    assert json.loads(outputs[0].item["output"])["result"]["keypad"] == "collecting"
    [said] = [control for control in done.controls if isinstance(control, ResponseCreate)]
    assert "Type your card, then hash." in said.response.instructions


def test_a_built_in_call_for_a_tool_that_cannot_take_digits_is_refused_at_once() -> None:
    state = ev.state_after(_phone_call())

    called, done = _model_calls(state, {"tool": "look_up", "prompt": "Type it."})

    assert called.state.collecting is None and not called.state.held
    outputs = [
        c for c in done.controls if isinstance(c, ItemCreate) and c.item["type"] == "function_call_output"
    ]
    [output] = [json.loads(o.item["output"]) for o in outputs]
    assert output["status"] == "refused" and output["error"]["code"] == "tool_cannot_collect"
    # The model goes on with the refusal in hand (the continuation is asked for).
    assert any(isinstance(control, ResponseCreate) for control in done.controls)


def test_a_built_in_call_the_line_cannot_take_now_is_told_to_the_model() -> None:
    state = ev.state_after(_phone_call())
    collecting = ev.step_of(state, _collect()).state
    said = ev.fold([ev.response_created("resp_prompt"), ev.response_done("resp_prompt")], collecting)[0]
    # A model's response on a held line (a supervisor's words might ask for one) calls it again.
    asked = said.evolve(held=False)

    called, _ = _model_calls(asked, {"tool": "take_payment", "prompt": "Type it."})

    assert called.state.collecting is not None and called.state.collecting.number == 1
    assert "keypad.refused" in _kinds(called)
    assert "already keying in" in _notes(called)[0]


def test_the_model_is_offered_the_tool_only_on_a_phone_call_with_a_sensitive_tool() -> None:
    _, steps = ev.fold(_phone_call(sensitive={})[:4])
    [update] = [c for c in steps[-1].controls if isinstance(c, SessionUpdate)]
    assert COLLECT_DIGITS not in [tool["name"] for tool in update.session.get("tools", [])]
