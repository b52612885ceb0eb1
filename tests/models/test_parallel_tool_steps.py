"""Parallel tool calls on real PostgreSQL: the calls of one response each get a durable step and
a run; a run whose worker died is answered at its deadline, and its late outcome changes
nothing; each call's output goes once, then one response.create."""

from __future__ import annotations

import time
from typing import Any

import pytest

from models import tool_steps
from models.records import session_record
from models.sessions import locked_session, new_session
from pipeline.call.catalog import ToolOutcome
from pipeline.call.errors import ToolOutcomeConflict
from pipeline.platform.envelope import SendControl
from pipeline.session.state import ModelChoice
from pipeline.session.wire import AdmissionBegun, CallAttached, SessionCreated, ToolFinished
from tests.support.calls import GATEWAY, deliver, new_session_id, spoken_turns

LOOKUP = {"type": "function", "name": "lookup_order", "parameters": {"type": "object", "properties": {}}}


def _parallel_session() -> str:
    """A session on a model that calls tools in parallel, which asked for it, with a call attached."""
    session_id = new_session_id()
    created = SessionCreated(
        instructions="Be brief.",
        tools=(LOOKUP,),
        catalog_digest="sha256:test",
        tool_versions={"lookup_order": "1"},
        tool_side_effects={"lookup_order": "read_only"},
        model=ModelChoice(id="gpt-realtime-2.1", parallel_tool_calls=True),
    )
    now = time.time()
    with new_session(session_id, GATEWAY) as session:
        session.apply_host(created, now)
    for event in (AdmissionBegun(), CallAttached(call_id="rtc_test")):
        with locked_session(session_id) as session:
            session.apply_host(event, now)
    return session_id


def _call(call_id: str, order_id: str) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.done",
        "event_id": f"ev_{call_id}",
        "response_id": "resp_0",
        "item_id": f"item_{call_id}",
        "output_index": 0,
        "call_id": call_id,
        "name": "lookup_order",
        "arguments": f'{{"order_id": "{order_id}"}}',
    }


def _finish(session_id: str, call_id: str) -> list[dict[str, Any]]:
    """What a tool_runs worker does once a body has run: the step's one outcome, then the
    outcome applied under the row lock (workers.actors.tools). Answers the controls sent."""
    outcome = ToolOutcome(status="succeeded", result={"call": call_id}, elapsed_ms=5.0)
    with locked_session(session_id) as session:
        tool_steps.finish_step(session, call_id, outcome)
        applied = session.apply_host(
            ToolFinished(call_id=call_id, outcome=outcome.model_dump(mode="json")), time.time()
        )
    return [item.control for item in applied.to_gateway if isinstance(item, SendControl)]


def test_each_parallel_call_is_a_step_a_lost_run_is_answered_at_its_deadline_and_one_response_follows(
    database: Any,
) -> None:
    session_id = _parallel_session()
    connected, updated, speech, final, created, *_ = spoken_turns(1)
    runs = []
    sent: list[dict[str, Any]] = []
    stream = [connected, updated, speech, final, created, _call("call_a", "4417"), _call("call_b", "4418")]
    for seq, event in enumerate(stream, start=1):
        applied = deliver(session_id, seq, event)
        runs += [run.call_id for run in applied.tool_runs]
        sent += [item.control for item in applied.to_gateway if isinstance(item, SendControl)]
    # Both run at once: neither waits for the other, neither is refused.
    assert runs == ["call_a", "call_b"]
    assert [c["type"] for c in sent] == ["session.update", "response.create"]
    assert [(s["call_id"], s["status"]) for s in session_record(session_id)["tool_steps"]] == [
        ("call_a", "running"),
        ("call_b", "running"),
    ]

    # call_a's body finishes before the response is done: its output waits.
    assert _finish(session_id, "call_a") == []
    done = {
        "type": "response.done",
        "event_id": "ev_done",
        "response": {"id": "resp_0", "status": "completed"},
    }
    applied = deliver(session_id, len(stream) + 1, done)
    assert [item for item in applied.to_gateway if isinstance(item, SendControl)] == []

    # call_b's worker died with the body running: its deadline answers it, which completes the
    # set, so both outputs go and then the one response.
    with locked_session(session_id) as session:
        applied = session.fire_timer("tool_deadline:call_b", time.time())
    controls = [item.control for item in applied.to_gateway if isinstance(item, SendControl)]
    assert [c["type"] for c in controls] == ["conversation.item.create"] * 2 + ["response.create"]
    assert [c["item"]["call_id"] for c in controls[:2]] == ["call_a", "call_b"]

    # The redelivered run of call_b finishes after all: the interrupted outcome stands, and
    # nothing more is sent (the worker stops at the conflict, as workers.actors.tools does).
    outcome = ToolOutcome(status="succeeded", result={"late": True}, elapsed_ms=40_000.0)
    with pytest.raises(ToolOutcomeConflict), locked_session(session_id) as session:
        tool_steps.finish_step(session, "call_b", outcome)
    with locked_session(session_id) as session:
        late = session.apply_host(
            ToolFinished(call_id="call_b", outcome=outcome.model_dump(mode="json")), time.time()
        )
    assert [item for item in late.to_gateway if isinstance(item, SendControl)] == []

    steps = session_record(session_id)["tool_steps"]
    assert [(s["call_id"], s["status"]) for s in steps] == [
        ("call_a", "succeeded"),
        ("call_b", "interrupted"),
    ]
    assert steps[1]["error"]["code"] == "tool_deadline_passed"
