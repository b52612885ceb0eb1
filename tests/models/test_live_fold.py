"""A Live call on the real log: its durable transcript, a delegation's tool step and its one
commentary, a duplicate and a stale delegation, and the state the fold of the log."""

from __future__ import annotations

import time
from typing import Any

from models import tool_steps
from models.records import session_record
from models.sessions import Applied, locked_session, new_session
from pipeline.catalog import ToolOutcome
from pipeline.envelope import OpenSideband, SendControl
from pipeline.state import LiveSetup
from pipeline.timeline import Speaker
from pipeline.wire import AdmissionBegun, CallAttached, SessionCreated, ToolFinished
from tests.pipeline import live_calls as lc
from tests.support.calls import GATEWAY, deliver, new_session_id, refold


def _sent(applied: Applied) -> list[dict[str, Any]]:
    return [item.control for item in applied.outbound if isinstance(item, SendControl)]


def _admit_live(session_id: str) -> Applied:
    now = time.time()
    with new_session(session_id, GATEWAY) as session:
        created = SessionCreated(
            instructions="You are the order desk.",
            provider="live",
            live=LiveSetup(handler="order_desk", handler_version="1"),
        )
        session.apply_host(created, now)
    with locked_session(session_id) as session:
        session.apply_host(AdmissionBegun(), now)
    with locked_session(session_id) as session:
        return session.apply_host(CallAttached(call_id=lc.LIVE_ID, medium="sip"), now)


def test_a_live_delegation_on_the_real_log_is_a_tool_step_answered_once(database: Any) -> None:
    session_id = new_session_id()
    attached = _admit_live(session_id)
    [opened] = [item for item in attached.outbound if isinstance(item, OpenSideband)]
    assert (opened.call_id, opened.provider) == (lc.LIVE_ID, "live")
    prefix = lc.listening()[3:]
    fragments = lc.words(Speaker.CALLER, "Where is order 4417", 0)
    words = lc.piece(fragments)
    delegated = lc.delegated("D1", fragments[-1].start_ms)
    for seq, event in enumerate([*prefix, words], start=1):
        deliver(session_id, seq, event)
    started = deliver(session_id, 4, delegated)
    assert [c["type"] for c in _sent(started)] == ["session.thinking.append"]
    assert [run.name for run in started.tool_runs] == ["delegation:order_desk"]
    # The provider delivers the delegation again (another event id): taken up once.
    again = deliver(session_id, 5, {**delegated, "event_id": "event_again"})
    assert _sent(again) == [] and again.tool_runs == []

    outcome = ToolOutcome(status="succeeded", result="Order 4417 ships Friday.", elapsed_ms=3)
    with locked_session(session_id) as session:
        step = tool_steps.find_step(session, "D1")
        assert step is not None and step.status == "running" and step.identity.tool_version == "1"
        tool_steps.finish_step(session, "D1", outcome)
        answered = session.apply_host(
            ToolFinished(call_id="D1", outcome=outcome.model_dump(mode="json")), time.time()
        )
    [commentary] = _sent(answered)
    assert commentary == {
        "type": "session.commentary.append",
        "event_id": commentary["event_id"],
        "delegation_id": "D1",
        "content": "Order 4417 ships Friday.",
    }
    assert commentary["event_id"].startswith("ctl_x")
    record = session_record(session_id)
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("order_desk", "succeeded")]
    assert [(t["role"], t["text"]) for t in record["transcript"]] == [("user", "Where is order 4417")]
    with locked_session(session_id) as session:
        assert session.state == refold(session_id)
