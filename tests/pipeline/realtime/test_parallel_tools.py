"""Parallel tool calls (a session created with `tools_in_parallel` on a model that calls tools in
parallel): every call of a response runs, each is answered once, and one response.create
follows once the response is done and every call has its output. Driven without I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.realtime import tools
from pipeline.realtime.controls import ItemCreate, ResponseCreate
from pipeline.session.state import SessionState
from pipeline.session.step import (
    CancelTool,
    InterruptToolStep,
    RefuseToolStep,
    RequestToolStep,
    RunTool,
    ScheduleTimer,
    Step,
)
from simulator.oracle import wire_errors
from tests.pipeline import events as ev

LOOKUP = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
}


def _responding(model: dict[str, Any] | None = ev.IN_PARALLEL, **created: Any) -> SessionState:
    return ev.state_after(
        [
            *ev.listening(tools=[LOOKUP], model=model, **created),
            ev.user_final("item_U1", "Where are 4417 and 4418?"),
            ev.response_created("resp_1"),
        ]
    )


def _finished(call_id: str, status: str = "succeeded") -> dict[str, Any]:
    error = None if status == "succeeded" else {"code": status, "message": "stopped"}
    outcome = {"status": status, "result": {"call": call_id}, "error": error, "elapsed_ms": 3.0}
    return {"type": "switchboard.tool_finished", "call_id": call_id, "outcome": outcome}


def _outputs(steps: list[Step]) -> list[dict[str, Any]]:
    return [
        json.loads(c.item["output"])
        for c in ev.controls_of(steps)
        if isinstance(c, ItemCreate) and c.item["type"] == "function_call_output"
    ]


def _kinds(steps: list[Step]) -> list[str]:
    return [type(c).__name__ for c in ev.controls_of(steps)]


def test_every_call_of_a_response_runs_and_one_response_follows_their_outputs() -> None:
    """Three calls in one response each become a durable step and a run at once (none refused);
    outcomes that come before and after response.done are held until the last is in, then the
    three outputs go in the order the calls came, and one response.create with the turn's
    context after them."""
    state, steps = ev.fold(
        [
            ev.function_call("call_1", "resp_1", name="lookup_order"),
            ev.function_call("call_2", "resp_1", name="lookup_order"),
            _finished("call_2"),
            ev.function_call("call_3", "resp_1", name="lookup_order"),
            ev.response_done("resp_1"),
            _finished("call_3"),
        ],
        _responding(),
    )
    assert [e.call_id for e in ev.effects_of(steps, RunTool)] == ["call_1", "call_2", "call_3"]
    assert [e.call_id for e in ev.effects_of(steps, RequestToolStep)] == ["call_1", "call_2", "call_3"]
    assert ev.effects_of(steps, RefuseToolStep) == [] and ev.controls_of(steps) == []
    assert [o.call_id for o in state.realtime.chain.in_flight] == ["call_1", "call_2", "call_3"]
    assert state.realtime.chain.calls == 3

    last = ev.step_of(state, _finished("call_1"))
    assert [type(c).__name__ for c in last.controls] == ["ItemCreate"] * 3 + ["ResponseCreate"]
    assert [json.loads(c.item["output"])["call_id"] for c in last.controls[:3]] == [  # type: ignore[union-attr]
        "call_1",
        "call_2",
        "call_3",
    ]
    create = last.controls[3]
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.tool_choice == "auto"
    assert create.response.instructions == state.realtime.turn.context.instructions  # type: ignore[union-attr]
    assert last.state.realtime.chain.in_flight == () and last.state.realtime.chain.calls == 3
    for control in last.controls:
        assert wire_errors(control.model_dump(mode="json", exclude_none=True), direction="client") == []


def test_the_calls_of_the_next_response_run_again_and_the_limit_counts_each() -> None:
    """A continuation that calls again runs its calls too; the turn's count goes on from the
    calls before."""
    state, _ = ev.fold(
        [
            ev.function_call("call_1", "resp_1"),
            ev.function_call("call_2", "resp_1"),
            ev.response_done("resp_1"),
            _finished("call_1"),
            _finished("call_2"),
            ev.response_created("resp_2"),
        ],
        _responding(),
    )
    state, steps = ev.fold(
        [ev.function_call("call_3", "resp_2"), ev.function_call("call_4", "resp_2")], state
    )
    assert [e.call_id for e in ev.effects_of(steps, RunTool)] == ["call_3", "call_4"]
    assert state.realtime.chain.calls == 4


@pytest.mark.parametrize("model", [None, {"id": "gpt-realtime-2.1", "parallel_tool_calls": False}])
def test_one_at_a_time_a_second_call_is_refused_as_before(model: dict[str, Any] | None) -> None:
    """A model that takes no parallel_tool_calls, or a session that did not ask for them: the
    second call of a response is refused at once, as the seed did."""
    state, steps = ev.fold(
        [ev.function_call("call_1", "resp_1"), ev.function_call("call_2", "resp_1")], _responding(model)
    )
    assert [e.call_id for e in ev.effects_of(steps, RunTool)] == ["call_1"]
    [refused] = _outputs(steps)
    assert (refused["call_id"], refused["error"]["code"]) == ("call_2", "parallel_tool_calls_not_supported")
    assert refused["error"]["message"] == tools.PARALLEL_REFUSAL
    assert state.realtime.chain.parallel == ()


def test_the_ninth_call_is_refused_and_the_one_response_after_the_outputs_is_tool_free() -> None:
    """Ten calls in one response: eight run, the ninth and tenth are refused at once as terminal
    steps; once the eight are in, their outputs go and the one response that follows is the
    tool-free report, after which the turn ends."""
    calls = [ev.function_call(f"call_{index}", "resp_1") for index in range(10)]
    state, steps = ev.fold([*calls, ev.response_done("resp_1")], _responding())
    assert len(ev.effects_of(steps, RunTool)) == tools.MAXIMUM_TOOL_CALLS_PER_TURN
    refused = ev.effects_of(steps, RefuseToolStep)
    assert [(r.call_id, r.code) for r in refused] == [
        ("call_8", "tool_call_limit_reached"),
        ("call_9", "tool_call_limit_reached"),
    ]
    assert [o["call_id"] for o in _outputs(steps)] == ["call_8", "call_9"]
    assert not any(isinstance(c, ResponseCreate) for c in ev.controls_of(steps))

    state, finishing = ev.fold([_finished(f"call_{index}") for index in range(8)], state)
    assert _kinds(finishing) == ["ItemCreate"] * 8 + ["ResponseCreate"]
    [create] = [c for c in ev.controls_of(finishing) if isinstance(c, ResponseCreate)]
    assert create.response is not None and create.response.tool_choice == "none"

    state, reported = ev.fold(
        [
            ev.response_created("resp_2"),
            ev.assistant_final("resp_2", "item_A", "Here is all."),
            ev.response_done("resp_2"),
        ],
        state,
    )
    assert ev.controls_of(reported) == [] and state.realtime.turn is None


def test_barge_in_cancels_every_running_call_and_their_outputs_precede_the_answer() -> None:
    """The caller talks over two running tools: both are cancelled (one already in is not);
    the outputs go once both are in, no response is driven from them, and the caller's new
    line is answered after them."""
    state, steps = ev.fold(
        [
            ev.function_call("call_1", "resp_1"),
            ev.function_call("call_2", "resp_1"),
            ev.function_call("call_3", "resp_1"),
            _finished("call_3"),
            ev.speech_started("item_U2"),
        ],
        _responding(),
    )
    assert [(c.call_id, c.reason) for c in ev.effects_of(steps, CancelTool)] == [
        ("call_1", "barge_in"),
        ("call_2", "barge_in"),
    ]
    state, steps = ev.fold(
        [
            ev.response_done("resp_1", "cancelled"),
            ev.user_final("item_U2", "Actually, never mind."),
            _finished("call_1", "cancelled"),
        ],
        state,
    )
    assert ev.controls_of(steps) == []
    last = ev.step_of(state, _finished("call_2", "cancelled"))
    assert [type(c).__name__ for c in last.controls] == ["ItemCreate"] * 3 + ["ResponseCreate"]
    assert [json.loads(c.item["output"])["status"] for c in last.controls[:3]] == [  # type: ignore[union-attr]
        "cancelled",
        "cancelled",
        "succeeded",
    ]
    assert last.state.realtime.turn is not None
    assert last.state.realtime.turn.context.input_item_id == "item_U2"


def test_a_cancelled_response_cancels_the_calls_still_running_and_answers_all_without_a_response() -> None:
    """response.done cancelled while two of three calls run: those two are cancelled; when
    they report, every call is answered and the turn ends without a response."""
    state, steps = ev.fold(
        [
            ev.function_call("call_1", "resp_1"),
            ev.function_call("call_2", "resp_1"),
            _finished("call_1"),
            ev.function_call("call_3", "resp_1"),
            ev.response_done("resp_1", "cancelled"),
            _finished("call_2", "cancelled"),
            _finished("call_3", "cancelled"),
        ],
        _responding(),
    )
    assert [(c.call_id, c.reason) for c in ev.effects_of(steps, CancelTool)] == [
        ("call_2", "response_cancelled"),
        ("call_3", "response_cancelled"),
    ]
    assert sorted(o["call_id"] for o in _outputs(steps)) == ["call_1", "call_2", "call_3"]
    assert not any(isinstance(c, ResponseCreate) for c in ev.controls_of(steps))
    assert state.phase == "listening" and state.realtime.turn is None and state.realtime.chain.in_flight == ()


def test_a_tool_that_never_reports_is_answered_at_its_deadline_and_the_rest_go_with_it() -> None:
    """One of two calls is lost: its deadline answers it interrupted; that completes the set,
    so both outputs go, then the one response. Its deadline firing again changes nothing."""
    state, _ = ev.fold(
        [
            ev.function_call("call_1", "resp_1"),
            ev.function_call("call_2", "resp_1"),
            _finished("call_2"),
            ev.response_done("resp_1"),
        ],
        _responding(),
    )
    step = ev.step_of(state, ev.timer_fired("tool_deadline:call_1"))
    assert [type(e) for e in step.effects] == [CancelTool, InterruptToolStep, ScheduleTimer]
    assert [type(c).__name__ for c in step.controls] == ["ItemCreate", "ItemCreate", "ResponseCreate"]
    first = json.loads(step.controls[0].item["output"])  # type: ignore[union-attr]
    assert (first["call_id"], first["error"]["code"]) == ("call_1", "tool_deadline_passed")
    again = ev.step_of(step.state, ev.timer_fired("tool_deadline:call_1"))
    assert again.controls == () and again.effects == ()
    # An outcome that comes after the deadline answered the call changes nothing either.
    late = ev.step_of(step.state, _finished("call_1"))
    assert late.controls == () and late.effects == ()


def test_ending_the_call_stops_every_running_tool_and_records_why() -> None:
    """The app ends the call while two of three tools run: each of the two is cancelled and
    its step interrupted; the one already in is left alone."""
    state, _ = ev.fold(
        [
            ev.function_call("call_1", "resp_1"),
            ev.function_call("call_2", "resp_1"),
            ev.function_call("call_3", "resp_1"),
            _finished("call_2"),
        ],
        _responding(),
    )
    step = ev.step_of(state, ev.end_requested())
    assert [(e.call_id, e.code) for e in step.effects if isinstance(e, InterruptToolStep)] == [
        ("call_1", "app_ended"),
        ("call_3", "app_ended"),
    ]
    assert [e.call_id for e in step.effects if isinstance(e, CancelTool)] == ["call_1", "call_3"]
    assert step.state.realtime.chain.in_flight == ()


def test_end_call_beside_running_tools_ends_the_call_at_the_response_end_and_stops_them() -> None:
    """The model says goodbye and calls end_call beside a lookup: the call ends when the
    response is done, and the lookup still running is stopped and its step interrupted."""
    created = ev.session_created(tools=[LOOKUP], model=ev.IN_PARALLEL)
    created["hangup_when"] = "the caller is done"
    state = ev.state_after(
        [
            created,
            *ev.listening()[1:],
            ev.user_final("item_U1", "That is all, thanks."),
            ev.response_created("resp_1"),
        ]
    )
    state, steps = ev.fold(
        [
            ev.function_call("call_1", "resp_1"),
            ev.function_call("call_end", "resp_1", name="end_call"),
            ev.response_done("resp_1"),
        ],
        state,
    )
    assert state.phase == "ended" and state.end_reason == "agent_hung_up"
    assert [(e.call_id, e.code) for e in ev.effects_of(steps, InterruptToolStep)] == [
        ("call_1", "agent_hung_up")
    ]
    assert not any(isinstance(c, ResponseCreate) for c in ev.controls_of(steps))


def test_a_built_in_that_holds_the_call_runs_alone_even_in_parallel() -> None:
    """collect_digits beside a running lookup is refused at once (it holds the line), and so
    is a lookup beside a built-in in flight; the refusal says why."""
    state, steps = ev.fold(
        [ev.function_call("call_1", "resp_1"), ev.function_call("call_2", "resp_1", name="collect_digits")],
        _responding(),
    )
    [refused] = _outputs(steps)
    assert (refused["call_id"], refused["error"]["code"]) == ("call_2", "parallel_tool_calls_not_supported")
    assert refused["error"]["message"] == tools.ALONE_REFUSAL
    assert [o.call_id for o in state.realtime.chain.in_flight] == ["call_1"]


def test_a_reconnect_while_calls_run_delivers_every_output_without_a_response() -> None:
    """The sideband is re-opened while two calls run: the turn's response is cancelled, and the
    outputs go once both are in, without driving a response."""
    state, _ = ev.fold(
        [ev.function_call("call_1", "resp_1"), ev.function_call("call_2", "resp_1")], _responding()
    )
    from pipeline.realtime.dialect import DIALECT

    reconnected = DIALECT.reconnected(state)
    assert reconnected.state.realtime.chain.continuation_allowed is False
    state, steps = ev.fold([_finished("call_1"), _finished("call_2")], reconnected.state)
    assert _kinds(steps) == ["ItemCreate", "ItemCreate"]
    assert state.realtime.turn is None and state.phase == "listening"


def test_erasure_drops_every_call_in_flight() -> None:
    """An erased session keeps no tool output of any call in flight."""
    from pipeline.realtime.dialect import DIALECT

    state, _ = ev.fold(
        [ev.function_call("call_1", "resp_1"), ev.function_call("call_2", "resp_1"), _finished("call_2")],
        _responding(),
    )
    erased = DIALECT.erased(state)
    assert erased.realtime.chain.in_flight == () and erased.realtime.chain.parallel == ()
