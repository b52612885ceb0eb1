"""A Live call on the real log: its durable transcript, a delegation's tool step and its one
commentary, a duplicate and a stale delegation, and the state the fold of the log."""

from __future__ import annotations

import time
from typing import Any

from models import tool_steps
from models.applied import Applied
from models.records import session_record
from models.sessions import locked_session, new_session
from pipeline.call.catalog import ToolOutcome
from pipeline.platform.envelope import OpenSideband, SendControl
from pipeline.session.state import LiveSetup
from pipeline.session.timeline import Speaker
from pipeline.session.wire import AdmissionBegun, CallAttached, SessionCreated, ToolFinished
from tests.pipeline import live_calls as lc
from tests.support.calls import GATEWAY, deliver, new_session_id, refold


def _sent(applied: Applied) -> list[dict[str, Any]]:
    return [item.control for item in applied.to_gateway if isinstance(item, SendControl)]


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
    [opened] = [item for item in attached.to_gateway if isinstance(item, OpenSideband)]
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


def test_pieces_said_over_each_other_are_stored_as_each_speakers_line(database: Any) -> None:
    """A piece that goes on its speaker's line is added to that line's row: applied next (one
    statement with its event), or after an earlier seq it waited for. A continuation whose line
    has no row is stored as one rather than lost."""
    session_id = new_session_id()
    _admit_live(session_id)
    prefix = lc.listening()[3:]
    caller = lc.words(Speaker.CALLER, "Can you remind me what my name is?", 600)
    agent = lc.words(Speaker.AGENT, "You mentioned your name is Ada.", 1600)
    pieces = [lc.piece(p) for p in (caller[:3], caller[3:6], agent[:2], agent[2:4], caller[6:], agent[4:])]
    for seq, event in enumerate([*prefix, *pieces[:3]], start=1):
        deliver(session_id, seq, event)
    # The caller's last piece is logged before the agent's second: it waits for its seq.
    deliver(session_id, 7, pieces[4])
    deliver(session_id, 6, pieces[3])

    def lines() -> list[tuple[str, str]]:
        return [(t["role"], t["text"]) for t in session_record(session_id)["transcript"]]

    assert lines() == [
        ("user", "Can you remind me what my name is?"),
        ("assistant", "You mentioned your name"),
    ]
    database.execute_sql(
        "DELETE FROM transcript_items WHERE session_id = %s AND role = 'assistant'", (session_id,)
    )
    deliver(session_id, 8, pieces[5])
    assert lines() == [("user", "Can you remind me what my name is?"), ("assistant", " is Ada.")]
    with locked_session(session_id) as session:
        assert session.state == refold(session_id)
