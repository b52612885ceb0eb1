"""The desk's queue read on real PostgreSQL: of the calls in progress, only those waiting for a
person, held, or in trouble lately are read, each in its list; a quiet call and a call that is
over are in none."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from models import desk, records
from models.db import database
from models.sessions import new_session
from pipeline.session.wire import SessionCreated
from tests.support.calls import GATEWAY, new_session_id


def _call(namespace: str, status: str, **line: Any) -> str:
    """A session in `status` whose state's line is `line` (written as the fold would leave it)."""
    session_id = new_session_id()
    with new_session(session_id, GATEWAY, namespace) as session:
        session.apply_host(SessionCreated(instructions="Hi."), time.time())
    database.execute_sql(
        "UPDATE sessions SET status = %s, state = state || %s::jsonb WHERE id = %s",
        (status, json.dumps({"phase": status, **line}), session_id),
    )
    return session_id


def test_the_queue_reads_the_waiting_the_held_and_the_troubled_and_nothing_else(database: Any) -> None:
    namespace = f"desk-{uuid.uuid4().hex[:8]}"
    waiting = _call(namespace, "listening", attention={"number": 1, "reason": "a refund", "wait_s": 60.0})
    held = _call(namespace, "listening", held=True)
    troubled = _call(namespace, "responding")
    database.execute_sql(
        "INSERT INTO incidents (session_id, code, severity, summary, context, created_at)"
        " VALUES (%s, 'response_lost', 'warning', 'no response.done', '{}', now())",
        (troubled,),
    )
    quiet = _call(namespace, "listening")
    over = _call(namespace, "ended", attention={"number": 1, "reason": "too late", "wait_s": 60.0})

    queue = desk.queue(namespace)

    assert [w["session_id"] for w in queue["waiting"]] == [waiting]
    assert (queue["waiting"][0]["reason"], queue["waiting"][0]["wait_limit_s"]) == ("a refund", 60.0)
    assert [h["session_id"] for h in queue["held"]] == [held]
    assert [(s["session_id"], s["troubles"], s["last_trouble"]) for s in queue["struggling"]] == [
        (troubled, 1, "response_lost")
    ]
    listed = {e["session_id"] for entries in queue.values() for e in entries}
    assert quiet not in listed and over not in listed


def _logged(session_id: str, seq: int, kind: str, payload: dict[str, Any], at: float) -> None:
    database.execute_sql(
        "INSERT INTO session_events (session_id, seq, kind, payload, generation, received_at, disposition)"
        " VALUES (%s, %s, %s, %s::jsonb, 1, %s, 'applied')",
        (session_id, seq, kind, json.dumps(payload), at),
    )


def test_a_wait_counts_from_the_request_or_from_the_key_the_route_maps_to_a_person(database: Any) -> None:
    """The app's request and a key press the route maps to a person both start a wait; another
    key pressed since does not; the longest wait is first."""
    namespace = f"desk-{uuid.uuid4().hex[:8]}"
    now = time.time()
    asked = _call(namespace, "listening", attention={"number": 1, "reason": "a refund", "wait_s": 120.0})
    _logged(
        asked, 1, "switchboard.attention", {"type": "switchboard.attention", "reason": "a refund"}, now - 10
    )
    pressed = _call(
        namespace,
        "listening",
        attention={"number": 1, "reason": "the caller pressed 0", "wait_s": 120.0},
        phone={"caller": "+14155550100", "dialled": "+18005551212", "keys": {"0": "attention"}},
    )
    dtmf = "input_audio_buffer.dtmf_event_received"
    _logged(pressed, 1, dtmf, {"type": dtmf, "event": "0", "received_at": 1}, now - 40)
    _logged(pressed, 2, dtmf, {"type": dtmf, "event": "5", "received_at": 2}, now - 1)

    waiting = desk.queue(namespace)["waiting"]

    assert [w["session_id"] for w in waiting] == [pressed, asked]
    # Both waits are measured against the same moment: they differ by exactly the 30 s between.
    assert waiting[1]["waited_s"] >= 10 and abs(waiting[0]["waited_s"] - waiting[1]["waited_s"] - 30) <= 0.2


def _answered(session_id: str, seq: int, waited_ms: int, at: float) -> None:
    """A logged response.done with the gateway's heard stamp: the caller waited `waited_ms`."""
    heard = {"speech_ended_at": at - waited_ms / 1000 - 1, "first_audio_at": at - 1}
    done = {"type": "response.done", "response": {"id": f"resp_{seq}", "status": "completed"}, "heard": heard}
    _logged(session_id, seq, "response.done", done, at)
    database.execute_sql(
        "UPDATE session_events SET applied_order = %s WHERE session_id = %s AND seq = %s",
        (seq, session_id, seq),
    )


def test_a_call_whose_latest_answers_kept_its_caller_waiting_is_read_as_struggling(database: Any) -> None:
    """The waits stamped on its last three answers are read, an older slow one is not: a call
    slow now struggles ("slow answers"), one that was slow before and is quick now does not."""
    namespace = f"desk-{uuid.uuid4().hex[:8]}"
    now = time.time()
    slow = _call(namespace, "listening")
    recovered = _call(namespace, "listening")
    for seq, waited in enumerate((450, 2_160, 2_400), start=1):
        _answered(slow, seq, waited, now - 10 + seq)
    for seq, waited in enumerate((3_000, 3_000, 480, 520, 610), start=1):
        _answered(recovered, seq, waited, now - 10 + seq)

    struggling = desk.queue(namespace)["struggling"]

    assert [(s["session_id"], s["slow_answers_ms"], s["why"]) for s in struggling] == [
        (slow, 2_160, ["slow answers: 2.2 s"])
    ]


def test_a_campaign_s_call_is_read_with_the_campaign_s_name_in_the_queue_the_list_and_its_record(
    database: Any,
) -> None:
    """A call a campaign placed names its campaign by id and by name wherever the desk reads it:
    the queue, the calls list and the call's record; a call no campaign placed names none."""
    namespace = f"desk-{uuid.uuid4().hex[:8]}"
    campaign_id = f"camp_{uuid.uuid4().hex[:12]}"
    database.execute_sql(
        "INSERT INTO campaigns (id, namespace, name, spec, status) VALUES (%s, %s, %s, '{}', 'running')",
        (campaign_id, namespace, "Dental reminders"),
    )
    outbound = {"id": "oc_1", "to": "+14155550142", "campaign_id": campaign_id, "attempt": 1}
    placed = _call(
        namespace,
        "listening",
        outbound=outbound,
        attention={"number": 1, "reason": "a refund", "wait_s": 60.0},
    )
    came_in = _call(namespace, "listening", held=True)

    queue = desk.queue(namespace)
    listed = {s["id"]: s for s in records.sessions(namespace)["sessions"]}

    [waiting] = queue["waiting"]
    assert (waiting["session_id"], waiting["campaign_id"], waiting["campaign_name"]) == (
        placed,
        campaign_id,
        "Dental reminders",
    )
    assert (queue["held"][0]["campaign_id"], queue["held"][0]["campaign_name"]) == (None, None)
    assert (listed[placed]["campaign_id"], listed[placed]["campaign_name"]) == (
        campaign_id,
        "Dental reminders",
    )
    assert listed[came_in]["campaign_name"] is None
    shown = records.session_record(placed, namespace=namespace)["outbound"]
    assert (shown["campaign_id"], shown["campaign_name"]) == (campaign_id, "Dental reminders")
    assert records.session_record(came_in, namespace=namespace)["outbound"] is None
