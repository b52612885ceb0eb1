"""Admission under the row lock, on real PostgreSQL and Redis."""

from __future__ import annotations

import time
from typing import Any

from models.sessions import locked_session, new_session
from pipeline.session.wire import AdmissionBegun, SessionCreated
from tests.support.calls import GATEWAY, new_session_id
from tests.workers.conftest import drain


def test_a_call_created_after_the_admission_timeout_is_hung_up_and_refused(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """When the admission timer fails a session while its call is being created, attaching the
    call answers 409 and tells the gateway to hang that call up."""
    from workers.actors import attach_call, session_timer

    session_id = new_session_id()
    with new_session(session_id, GATEWAY, worker_runtime.settings.broker_namespace) as session:
        session.apply_host(SessionCreated(instructions="Hi."), time.time())
    with locked_session(session_id) as session:
        session.apply_host(AdmissionBegun(), time.time())
    session_timer.fn(session_id=session_id, name="admission_timeout")
    drain(control_inbox)

    attach_call.fn(
        request_id="req_1", gateway_id=GATEWAY, session_id=session_id, call_id="rtc_late", now=time.time()
    )

    items = [item for batch in drain(control_inbox) for item in batch["items"]]
    close = [item for item in items if item["kind"] == "close_call"]
    assert [(c["call_id"], c["hangup"]) for c in close] == [("rtc_late", True)]
    (reply,) = [item for item in items if item["kind"] == "reply"]
    assert (reply["status"], reply["body"]["error"]["code"]) == (409, "session_ended")


def test_connect_is_refused_unless_the_session_was_just_created(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """A second begin_admission answers 409 admission_refused and changes nothing."""
    from workers.actors import begin_admission

    session_id = new_session_id()
    with new_session(session_id, GATEWAY, worker_runtime.settings.broker_namespace) as session:
        session.apply_host(SessionCreated(instructions="Hi."), time.time())
    begin_admission.fn(request_id="req_1", gateway_id=GATEWAY, session_id=session_id, now=time.time())
    begin_admission.fn(request_id="req_2", gateway_id=GATEWAY, session_id=session_id, now=time.time())
    replies = [item for batch in drain(control_inbox) for item in batch["items"] if item["kind"] == "reply"]
    assert [(reply["request_id"], reply["status"]) for reply in replies] == [("req_1", 200), ("req_2", 409)]
    assert replies[1]["body"]["error"]["code"] == "admission_refused"
    with locked_session(session_id) as session:
        assert session.state.phase == "admitting"


def test_a_session_whose_tools_changed_before_it_connected_fails(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """A new version of a session's tool between creation and connect fails the session with
    tool_catalog_changed instead of connecting it (answered session_ended with that end reason)."""
    from pipeline.call.catalog import ToolSpec
    from workers import actors
    from workers.tools.registry import Registry, Tool

    session_id = new_session_id()
    actors.create_session.fn(
        request_id="req_c",
        gateway_id=GATEWAY,
        session_id=session_id,
        spec={"instructions": "Hi.", "tools": ["echo"]},
        now=time.time(),
    )
    original = worker_runtime.registry
    echo = original.get("echo")
    changed = Registry()
    changed.register(Tool(spec=echo.spec.model_copy(update={"version": "2"}), fn=echo.fn))
    assert isinstance(changed.get("echo").spec, ToolSpec)
    worker_runtime.registry = changed
    try:
        actors.begin_admission.fn(
            request_id="req_b", gateway_id=GATEWAY, session_id=session_id, now=time.time()
        )
    finally:
        worker_runtime.registry = original
    replies = [item for batch in drain(control_inbox) for item in batch["items"] if item["kind"] == "reply"]
    assert [(r["request_id"], r["status"]) for r in replies] == [("req_c", 201), ("req_b", 409)]
    error = replies[1]["body"]["error"]
    assert (error["code"], error["end_reason"]) == ("session_ended", "tool_catalog_changed")
    with locked_session(session_id) as session:
        assert (session.state.phase, session.state.end_reason) == ("failed", "tool_catalog_changed")


def test_read_requests_have_a_queue_of_their_own(worker_runtime: Any) -> None:
    """Every request that only reads is declared on the reads queue and enqueued there by the
    gateway, so reads never queue in front of a call's admission; the rest stay on admission."""
    from pipeline.platform.names import ADMISSION_QUEUE, READ_REQUESTS, READS_QUEUE, queue_of_request

    broker = worker_runtime.broker
    declared = broker.get_declared_actors()
    on_reads = {name for name in declared if broker.get_actor(name).queue_name == READS_QUEUE}
    assert on_reads == READ_REQUESTS
    assert {queue_of_request(name) for name in READ_REQUESTS} == {READS_QUEUE}
    for name in ("create_session", "begin_admission", "attach_call", "ring", "take_over", "routes"):
        assert queue_of_request(name) == ADMISSION_QUEUE
