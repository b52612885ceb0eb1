"""Tool-call invariants over random event sequences (hypothesis): never two tools running (one
at a time), never more than eight run in a turn, every function call answered exactly once —
one at a time and in parallel."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.realtime.controls import ItemCreate, ResponseCreate
from pipeline.realtime.tools import MAXIMUM_TOOL_CALLS_PER_TURN
from pipeline.session.state import SessionState
from pipeline.session.step import RefuseToolStep, RequestToolStep, RunTool
from tests.pipeline import events as ev

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)
LOOKUP = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order",
    "parameters": {"type": "object", "properties": {}},
}
_CALLS = st.sampled_from([f"call_{index}" for index in range(12)])
_RESPONSES = st.sampled_from(["resp_1", "resp_2"])


def _function_call(call_id: str, response_id: str, name: str) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.done",
        "event_id": ev._event_id(),
        "response_id": response_id,
        "item_id": f"item_{call_id}",
        "output_index": 0,
        "call_id": call_id,
        "name": name,
        "arguments": "{}",
    }


def _tool_finished(call_id: str) -> dict[str, Any]:
    outcome = {"status": "succeeded", "result": {"ok": True}, "error": None, "elapsed_ms": 1.0}
    return {"type": "switchboard.tool_finished", "call_id": call_id, "outcome": outcome}


EVENT = st.one_of(
    st.builds(
        _function_call, _CALLS, _RESPONSES, st.sampled_from(["lookup_order", "lookup_order", "missing"])
    ),
    st.builds(_tool_finished, _CALLS),
    st.builds(ev.response_created, _RESPONSES),
    st.builds(ev.response_done, _RESPONSES, st.sampled_from(["completed", "completed", "cancelled"])),
    st.builds(ev.user_final, st.sampled_from(["item_U2", "item_U3"]), st.just("And another thing.")),
    st.builds(lambda call_id: ev.timer_fired(f"tool_deadline:{call_id}"), _CALLS),
)


def _prefix(parallel: bool) -> list[dict[str, Any]]:
    return [
        *ev.listening(tools=[LOOKUP], model=ev.IN_PARALLEL if parallel else None),
        ev.user_final("item_U1", "Where is my order?"),
        ev.response_created("resp_1"),
    ]


PREFIX = _prefix(parallel=False)


def _drain(state: SessionState) -> list[dict[str, Any]]:
    """What ends every open chain: the running tools' outcomes and their response's end."""
    events: list[dict[str, Any]] = []
    for call in state.realtime.chain.in_flight:
        if call.output is None:
            events.append(_tool_finished(call.call_id))
    if state.realtime.turn is not None:
        events.append(ev.response_done(state.realtime.turn.response_id or "resp_final"))
    return events


@pytest.mark.parametrize("parallel", [False, True], ids=["one_at_a_time", "in_parallel"])
@PROPERTY_SETTINGS
@given(st.lists(EVENT, max_size=40))
# Found by hypothesis: the same call arriving again after the caller moved on and a new turn
# began (its response id reused) was taken up, and answered, a second time.
@example(
    tail=[
        _function_call("call_0", "resp_1", "lookup_order"),
        ev.response_done("resp_1", "completed"),
        ev.user_final("item_U2", "And another thing."),
        _tool_finished("call_0"),
        ev.response_created("resp_1"),
        _function_call("call_0", "resp_1", "lookup_order"),
    ]
)
def test_tool_calls_run_one_at_a_time_at_most_eight_a_turn_and_are_answered_once(
    parallel: bool, tail: list[dict[str, Any]]
) -> None:
    """Whatever the order of calls, outcomes, responses and new input: a tool starts only when
    none runs (one at a time), no turn runs more than eight, no call is answered twice, and once
    the open chain is drained every call the host took up has exactly one output."""
    state = SessionState()
    answered: Counter[str] = Counter()
    taken_up: set[str] = set()
    raws = [*_prefix(parallel), *tail]
    index = 0
    drained = False
    while index < len(raws) or not drained:
        if index == len(raws):
            drained = True
            raws.extend(_drain(state))
            if index == len(raws):
                break
            continue
        before = state
        step = ev.step_of(state, raws[index])
        index += 1
        state = step.state
        for effect in step.effects:
            if isinstance(effect, RunTool) and not parallel:
                assert (
                    before.realtime.chain.pending is None or before.realtime.chain.pending.output is not None
                )
            if isinstance(effect, RequestToolStep | RefuseToolStep):
                taken_up.add(effect.call_id)
        assert state.realtime.chain.calls <= MAXIMUM_TOOL_CALLS_PER_TURN
        for control in step.controls:
            if isinstance(control, ItemCreate) and control.item.get("type") == "function_call_output":
                call_id = control.item["call_id"]
                answered[call_id] += 1
                taken_up.add(call_id)
                assert json.loads(control.item["output"])["call_id"] == call_id
            if isinstance(control, ResponseCreate):
                # The provider refuses a response while a call of the conversation is unanswered.
                assert taken_up <= set(answered), taken_up - set(answered)
    assert all(count == 1 for count in answered.values()), answered
    if not state.is_terminal:
        assert taken_up == set(answered), (taken_up, answered)
