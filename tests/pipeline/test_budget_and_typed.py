"""The usage budget, typed text and interrupts from the API, driven without I/O."""

from __future__ import annotations

from typing import Any

from pipeline.call.limits import BUDGET_NOTICE, RESPONSE_DEADLINE_MS
from pipeline.realtime.controls import ItemCreate, ItemTruncate, ResponseCancel, ResponseCreate
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import CancelTool, CloseCall, InterruptToolStep, PersistTranscript, ScheduleTimer
from pipeline.session.wire import control_wire
from simulator.oracle import wire_errors
from tests.pipeline import events as ev

LOOKUP = {"type": "function", "name": "lookup_order", "parameters": {"type": "object"}}


def _budgeted(tokens: int, *, tools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return ev.listening(tools=tools, limits={"max_output_tokens": 512, "usage_budget_tokens": tokens})


def _turn(index: int, input_tokens: int, output_tokens: int = 0) -> list[dict[str, Any]]:
    return [
        ev.user_final(f"item_U{index}", "Hello?"),
        ev.response_created(f"resp_{index}"),
        ev.response_done(f"resp_{index}", input_tokens=input_tokens, output_tokens=output_tokens),
    ]


def _valid(control: Any) -> None:
    assert (
        wire_errors(control_wire(control.model_copy(update={"event_id": "ctl_1_0"})), direction="client")
        == []
    )


# ── the budget ───────────────────────────────────────────────────────────────────────────


def test_one_notice_at_eighty_percent_then_the_end_at_the_budget() -> None:
    state = ev.state_after([*_budgeted(1_000), *_turn(1, 700)])
    step = ev.step_of(state, ev.user_final("item_U2", "And?"))
    state = ev.step_of(step.state, ev.response_created("resp_2")).state

    noticed = ev.step_of(state, ev.response_done("resp_2", input_tokens=100, output_tokens=0))  # 800

    [notice] = noticed.controls
    assert isinstance(notice, ItemCreate) and notice.item["role"] == "system"
    assert notice.item["content"][0]["text"] == BUDGET_NOTICE
    _valid(notice)
    assert noticed.state.budget_warning_sent and noticed.state.phase is Phase.LISTENING

    state = noticed.state
    for raw in _turn(3, 150):  # 950: no second notice
        step = ev.step_of(state, raw)
        state = step.state
        assert not [c for c in step.controls if isinstance(c, ItemCreate)]
    for raw in _turn(4, 50)[:-1]:
        state = ev.step_of(state, raw).state
    ended = ev.step_of(state, _turn(4, 50)[-1])  # 1,000: the end

    assert (ended.state.phase, ended.state.end_reason) == (Phase.ENDED, "usage_budget_reached")
    assert ended.controls == ()
    assert CloseCall(reason="usage_budget_reached", hangup=True) in ended.effects


def test_the_budget_counts_maintenance_responses_too() -> None:
    state = ev.state_after([*_budgeted(500), *_turn(1, 100)])
    step = ev.step_of(
        state, ev.response_done("resp_m", input_tokens=400, output_tokens=0, metadata=ev.maintenance(1))
    )
    assert (step.state.phase, step.state.end_reason) == (Phase.ENDED, "usage_budget_reached")


def test_reaching_the_budget_mid_tool_interrupts_the_tool() -> None:
    state = ev.state_after(
        [
            *_budgeted(1_000, tools=[LOOKUP]),
            ev.user_final("item_U1", "Where is 4417?"),
            ev.response_created("resp_1"),
            ev.function_call("call_1", "resp_1", "item_F1"),
        ]
    )
    step = ev.step_of(state, ev.response_done("resp_1", input_tokens=2_000))
    assert step.state.end_reason == "usage_budget_reached"
    assert CancelTool(call_id="call_1", reason="usage_budget_reached") in step.effects
    assert any(isinstance(e, InterruptToolStep) and e.code == "usage_budget_reached" for e in step.effects)
    assert not [c for c in step.controls if isinstance(c, ResponseCreate)]


# ── typed text and interrupts ────────────────────────────────────────────────────────────


def _typed(text: str = "My order is 4417.", item_id: str = "item_typed_1") -> dict[str, Any]:
    return {"type": "switchboard.text_injected", "item_id": item_id, "text": text}


def test_typed_text_is_added_as_the_callers_message_and_answered() -> None:
    step = ev.step_of(ev.state_after(ev.listening()), _typed())

    message, create = step.controls
    assert isinstance(message, ItemCreate) and isinstance(create, ResponseCreate)
    assert message.item == {
        "id": "item_typed_1",
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "My order is 4417."}],
    }
    _valid(message)
    assert step.effects == (
        PersistTranscript(role="user", text="My order is 4417.", item_id="item_typed_1"),
        ScheduleTimer(name="response_deadline:1", delay_ms=RESPONSE_DEADLINE_MS, swept_only=True),
    )
    assert (
        step.state.realtime.turn is not None
        and step.state.realtime.turn.context.input_item_id == "item_typed_1"
    )


def test_typed_text_during_a_response_waits_for_it() -> None:
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])
    step = ev.step_of(state, _typed())
    assert [type(c) for c in step.controls] == [ItemCreate]
    assert step.state.realtime.queued_input_item_id == "item_typed_1"


def test_typed_text_into_a_call_that_is_not_live_is_only_recorded() -> None:
    state = ev.state_after([ev.session_created()])
    step = ev.step_of(state, _typed())
    assert step.controls == () and step.state == state
    assert [type(e) for e in step.effects] == [PersistTranscript]


def test_an_interrupt_stops_the_response_like_a_barge_in() -> None:
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])
    playback = {"item_id": "item_A1", "response_id": "resp_1", "played_ms": 700}
    step = ev.step_of(state, {"type": "switchboard.interrupt_requested", "playback": playback})
    assert step.controls == (
        ItemTruncate(item_id="item_A1", audio_end_ms=700),
        ResponseCancel(response_id="resp_1"),
    )
    idle: SessionState = ev.state_after(ev.listening())
    assert ev.step_of(idle, {"type": "switchboard.interrupt_requested"}).controls == ()
