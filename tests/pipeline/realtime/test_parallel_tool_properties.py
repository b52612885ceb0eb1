"""Tool calls over interleavings (hypothesis): the order in which a response's function call
items, its response.done and the calls' outcomes (and deadlines) arrive, with duplicates of each
and the caller talking over the tools. In parallel every call of the turn up to eight runs, each
call gets exactly one function_call_output, no response.create goes while a call is unanswered
or before the response is done, and exactly one follows it (none when nothing is owed)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.realtime.controls import ItemCreate, ResponseCreate
from pipeline.realtime.tools import MAXIMUM_TOOL_CALLS_PER_TURN
from pipeline.session.state import SessionState
from pipeline.session.step import RefuseToolStep, RequestToolStep, RunTool
from tests.pipeline import events as ev

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)
LOOKUP = {"type": "function", "name": "lookup_order", "parameters": {"type": "object", "properties": {}}}
# Mostly a registered tool, sometimes one the session lacks (answered unavailable, runs nothing).
NAMES = st.sampled_from(["lookup_order", "lookup_order", "lookup_order", "missing"])
STATUSES = st.sampled_from(["completed", "completed", "completed", "cancelled", "incomplete"])


def _arguments_done(call_id: str, response_id: str, name: str) -> dict[str, Any]:
    return ev.function_call(call_id, response_id, name=name)


def _item_done(call_id: str, response_id: str, name: str) -> dict[str, Any]:
    return {
        "type": "response.output_item.done",
        "event_id": ev._event_id(),
        "response_id": response_id,
        "output_index": 0,
        "item": {
            "id": f"item_{call_id}",
            "object": "realtime.item",
            "type": "function_call",
            "status": "completed",
            "name": name,
            "call_id": call_id,
            "arguments": "{}",
        },
    }


def _finished(call_id: str) -> dict[str, Any]:
    outcome = {"status": "succeeded", "result": {"call": call_id}, "error": None, "elapsed_ms": 2.0}
    return {"type": "switchboard.tool_finished", "call_id": call_id, "outcome": outcome}


@dataclass
class Run:
    """What has been seen of one interleaving so far."""

    state: SessionState
    answered: Counter[str] = field(default_factory=Counter)
    # Calls taken up whose output has not gone yet.
    unanswered: set[str] = field(default_factory=set)
    taken: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    refused_for_limit: list[str] = field(default_factory=list)
    most_running: int = 0
    creates: list[ResponseCreate] = field(default_factory=list)
    # response.create controls since the latest round's response.done (None before it).
    creates_since_done: int | None = None


def _apply(run: Run, raw: dict[str, Any]) -> list[str]:
    """Apply one event, check the per-step invariants, and answer the calls it started."""
    step = ev.step_of(run.state, raw)
    run.state = step.state
    started = []
    for effect in step.effects:
        if isinstance(effect, RequestToolStep | RefuseToolStep) and effect.call_id not in run.taken:
            run.taken.append(effect.call_id)
            if not (isinstance(effect, RefuseToolStep) and effect.code == "tool_call_limit_reached"):
                run.unanswered.add(effect.call_id)
        if isinstance(effect, RefuseToolStep) and effect.code == "tool_call_limit_reached":
            run.refused_for_limit.append(effect.call_id)
        if isinstance(effect, RunTool):
            run.ran.append(effect.call_id)
            started.append(effect.call_id)
    for control in step.controls:
        if isinstance(control, ItemCreate) and control.item.get("type") == "function_call_output":
            call_id = control.item["call_id"]
            assert json.loads(control.item["output"])["call_id"] == call_id
            run.answered[call_id] += 1
            assert run.answered[call_id] == 1, f"{call_id} answered twice"
            run.unanswered.discard(call_id)
        if isinstance(control, ResponseCreate):
            assert not run.unanswered, f"response.create while {sorted(run.unanswered)} are unanswered"
            assert run.creates_since_done is not None, "response.create before the response was done"
            run.creates_since_done += 1
            assert run.creates_since_done == 1, "a second response.create for the same response"
            run.creates.append(control)
    running = [call.call_id for call in run.state.realtime.chain.in_flight if call.output is None]
    run.most_running = max(run.most_running, len(running))
    assert run.state.realtime.chain.calls <= MAXIMUM_TOOL_CALLS_PER_TURN
    return started


def _round(draw: st.DrawFn, number: int, first_call: int) -> tuple[list[dict[str, Any]], list[str]]:
    """A response's stream as the provider sends it: response.created, each function call (by
    its arguments' done, its item's done, or both, in that order), then response.done (whose
    status is decided when it is sent). Answers the events and the calls' names."""
    response_id = f"resp_{number}"
    names = draw(st.lists(NAMES, min_size=1, max_size=11))
    stream: list[dict[str, Any]] = [ev.response_created(response_id)] if number > 1 else []
    for index, name in enumerate(names, start=first_call):
        call_id = f"call_{index}"
        forms = draw(st.sampled_from([(_arguments_done,), (_item_done,), (_arguments_done, _item_done)]))
        stream.extend(form(call_id, response_id, name) for form in forms)
    stream.append({"type": "done", "response_id": response_id})
    return stream, names


@pytest.mark.parametrize("parallel", [True, False], ids=["in_parallel", "one_at_a_time"])
@PROPERTY_SETTINGS
@given(data=st.data())
def test_every_call_is_answered_once_and_one_response_follows_once_all_are_answered(
    parallel: bool, data: st.DataObject
) -> None:
    draw = data.draw
    model = ev.IN_PARALLEL if parallel else None
    run = Run(
        state=ev.state_after(
            [
                *ev.listening(tools=[LOOKUP], model=model),
                ev.user_final("item_U1", "Where are my orders?"),
                ev.response_created("resp_1"),
            ]
        )
    )
    rounds = draw(st.integers(1, 2), label="rounds")
    barge = draw(st.sampled_from([None, None, "speech", "speech_and_line"]), label="barge")
    provider, names = _round(draw, 1, 0)
    order = list(names)
    # Events that may come at any point from now on: outcomes, deadlines, duplicates, the caller.
    pool: list[tuple[str, dict[str, Any]]] = []
    barged = False
    last_status = None
    round_number = 1
    while provider or pool:
        can_barge = barge is not None and not barged and run.state.realtime.chain.pending is not None
        choices = (
            (["provider"] if provider else []) + (["pool"] if pool else []) + (["barge"] if can_barge else [])
        )
        choice = draw(st.sampled_from(choices))
        if choice == "barge":
            barged = True
            raw = ev.speech_started("item_U2")
            if barge == "speech_and_line":
                pool.append(("line", ev.user_final("item_U2", "Never mind that.")))
        elif choice == "provider":
            raw = provider.pop(0)
            if raw["type"] == "done":
                # A response the caller talked over was cancelled by Switchboard.
                last_status = "cancelled" if barged else draw(STATUSES)
                raw = ev.response_done(raw["response_id"], last_status)
                run.creates_since_done = 0
                if draw(st.booleans()):
                    pool.append(("done_again", raw))
        else:
            _, raw = pool.pop(draw(st.integers(0, len(pool) - 1)))
        before_creates = len(run.creates)
        for call_id in _apply(run, raw):
            pool.append(("outcome", _finished(call_id)))
            if draw(st.booleans()):
                pool.append(("outcome", _finished(call_id)))
            if draw(st.booleans()):
                pool.append(("deadline", ev.timer_fired(f"tool_deadline:{call_id}")))
        if len(run.creates) > before_creates:
            # A stale response.done arriving once the next response is asked for is another
            # matter (the turn's, not the tools'): duplicates come only within their response.
            pool = [(kind, raw) for kind, raw in pool if kind != "done_again"]
            create = run.creates[-1]
            asks_tools = create.response is not None and create.response.tool_choice == "auto"
            if (
                round_number < rounds
                and not barged
                and asks_tools
                and run.state.realtime.chain.pending is None
            ):
                round_number += 1
                more, more_names = _round(draw, round_number, len(order))
                provider.extend(more)
                order.extend(more_names)

    state = run.state
    assert not state.is_terminal, state.end_reason
    calls = [f"call_{index}" for index in range(len(order))]
    # Every call the model made, run, unavailable or refused, has exactly one output.
    assert set(run.answered) == set(calls) and not run.unanswered, (run.answered, run.unanswered)
    # One response follows once everything is answered: the continuation, or the caller's new
    # line; none when the response ended otherwise or the caller only talked over it.
    expected = 1 if barge == "speech_and_line" and barged else int(last_status == "completed" and not barged)
    assert run.creates_since_done == expected, (run.creates_since_done, expected, last_status, barge)
    if parallel:
        # The turn's first eight calls each run (or are answered unavailable), the rest are
        # refused for the limit; nothing is refused for running beside another.
        taken_up = [c for c in calls if c not in run.refused_for_limit]
        assert taken_up == calls[:MAXIMUM_TOOL_CALLS_PER_TURN]
        assert run.ran == [
            c for c, name in zip(calls, order, strict=True) if c in taken_up and name != "missing"
        ]
        assert run.refused_for_limit == calls[MAXIMUM_TOOL_CALLS_PER_TURN:]
    else:
        assert run.most_running <= 1
