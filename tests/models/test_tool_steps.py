"""Durable tool steps on real PostgreSQL: requested once, started once, one terminal outcome."""

from __future__ import annotations

import time
from typing import Any

import pytest

from models.sessions import locked_session, new_session
from models.tool_steps import finish_step, interrupt_active_steps, request_step, start_step, steps_of
from pipeline.call.catalog import ToolError, ToolOutcome
from pipeline.call.errors import ProviderCallIdConflict, ToolOutcomeConflict, ToolStepTerminal
from pipeline.call.tool_steps import ToolStepIdentity
from pipeline.session.wire import SessionCreated
from tests.support.calls import GATEWAY, new_session_id


def _session() -> str:
    session_id = new_session_id()
    with new_session(session_id, GATEWAY) as session:
        session.apply_host(SessionCreated(instructions="Hi."), time.time())
    return session_id


def _identity(
    session_id: str, call_id: str = "call_1", arguments: str = '{"text": "hi"}'
) -> ToolStepIdentity:
    return ToolStepIdentity(
        session_id=session_id,
        provider_call_id=call_id,
        provider_item_id="item_fc1",
        provider_response_id="resp_1",
        turn_input_item_id="item_u1",
        tool_name="echo",
        tool_version="1",
        catalog_digest="sha256:catalog",
        side_effect="read_only",
        raw_arguments=arguments,
    )


SUCCEEDED = ToolOutcome(status="succeeded", result={"text": "hi"}, elapsed_ms=3.0)


def test_the_same_request_finds_the_same_step(database: Any) -> None:
    """Requesting a call twice with the same identity (key order aside) creates one step."""
    session_id = _session()
    with locked_session(session_id) as session:
        first, created = request_step(session, _identity(session_id, arguments='{"a": 1, "b": 2}'))
        again, existing = request_step(session, _identity(session_id, arguments='{"a": 1, "b": 2}'))
        assert (created, existing) == ("created", "existing")
        assert first == again
        assert first.status == "requested" and first.sequence == 1


def test_another_identity_for_the_same_call_id_is_a_conflict(database: Any) -> None:
    """The same call id with other arguments is refused, naming what differs."""
    session_id = _session()
    with locked_session(session_id) as session:
        request_step(session, _identity(session_id))
    with pytest.raises(ProviderCallIdConflict, match="raw_arguments"), locked_session(session_id) as session:
        request_step(session, _identity(session_id, arguments='{"text": "other"}'))


def test_a_step_starts_once_and_finishes_with_one_outcome(database: Any) -> None:
    """requested → running → succeeded; the same outcome again is accepted, another is refused,
    and a finished step cannot start again."""
    session_id = _session()
    with locked_session(session_id) as session:
        request_step(session, _identity(session_id))
        running, started = start_step(session, "call_1")
        assert (running.status, started) == ("running", "started")
        assert start_step(session, "call_1")[1] == "already_running"
        done = finish_step(session, "call_1", SUCCEEDED)
        assert (done.status, done.result, done.error) == ("succeeded", {"text": "hi"}, None)
        assert finish_step(session, "call_1", SUCCEEDED.model_copy(update={"elapsed_ms": 9.0})) == done
        failed = ToolOutcome(status="failed", error=ToolError(code="tool_error", message="x"), elapsed_ms=1)
        with pytest.raises(ToolOutcomeConflict):
            finish_step(session, "call_1", failed)
        with pytest.raises(ToolStepTerminal):
            start_step(session, "call_1")


def test_interrupting_finishes_every_active_step_with_the_real_reason(database: Any) -> None:
    """Requested and running steps become interrupted with the given code; finished ones stay."""
    session_id = _session()
    with locked_session(session_id) as session:
        for call_id in ("call_1", "call_2", "call_3"):
            request_step(session, _identity(session_id, call_id=call_id))
        start_step(session, "call_2")
        start_step(session, "call_3")
        finish_step(session, "call_3", SUCCEEDED)
        interrupted = interrupt_active_steps(session, "worker_lost", "The worker running the tool died.")
        assert [step.identity.provider_call_id for step in interrupted] == ["call_1", "call_2"]
        statuses = {step.identity.provider_call_id: step.status for step in steps_of(session)}
        assert statuses == {"call_1": "interrupted", "call_2": "interrupted", "call_3": "succeeded"}
        assert interrupted[0].error == {"code": "worker_lost", "message": "The worker running the tool died."}


def test_the_session_record_lists_its_tool_steps(database: Any) -> None:
    """A session's durable record shows each tool step with its status and error."""
    from models.records import session_record

    session_id = _session()
    with locked_session(session_id) as session:
        request_step(session, _identity(session_id))
        interrupt_active_steps(session, "session_ended", "The call ended before the tool finished.")
    (step,) = session_record(session_id)["tool_steps"]
    assert (step["call_id"], step["tool"], step["status"]) == ("call_1", "echo", "interrupted")
    assert step["error"]["code"] == "session_ended"


def test_a_function_call_in_a_response_the_host_did_not_ask_for_is_refused_on_the_log(database: Any) -> None:
    """On the real log: a client's own response calls a tool; the step is recorded refused (no
    run), the call answered once, a warning kept, and the caller's next line is still answered."""
    from models.records import session_record
    from pipeline.platform.envelope import SendControl
    from tests.support.calls import admit, deliver, spoken_turns

    session_id = new_session_id()
    admit(session_id)
    connected, updated, *turn = spoken_turns(1)
    deliver(session_id, 1, connected)
    deliver(session_id, 2, updated)
    own = [
        {
            "type": "response.created",
            "event_id": "ev_c1",
            "response": {"id": "resp_c", "status": "in_progress"},
        },
        {
            "type": "response.function_call_arguments.done",
            "event_id": "ev_c2",
            "response_id": "resp_c",
            "item_id": "item_fc",
            "output_index": 0,
            "call_id": "call_c",
            "name": "lookup_order",
            "arguments": '{"order_id": "4417"}',
        },
        {"type": "response.done", "event_id": "ev_c3", "response": {"id": "resp_c", "status": "completed"}},
    ]
    sent: list[dict[str, Any]] = []
    for seq, event in enumerate([*own, *turn], start=3):
        applied = deliver(session_id, seq, event)
        assert applied.tool_runs == []
        sent += [item.control for item in applied.to_gateway if isinstance(item, SendControl)]
    record = session_record(session_id)
    assert record["status"] == "listening", record["end_reason"]
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("lookup_order", "refused")]
    assert [(i["code"], i["severity"]) for i in record["incidents"]] == [
        ("response_context_missing", "warning")
    ]
    assert [c["type"] for c in sent] == ["conversation.item.create", "response.create"]
    assert sent[0]["item"]["call_id"] == "call_c"
