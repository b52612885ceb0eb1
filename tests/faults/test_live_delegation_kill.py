"""kill -9 of the worker while a Live delegation's handler runs: the delegation is answered
exactly once (DESIGN invariant 7 on Live: one terminal commentary per delegation)."""

from __future__ import annotations

import time
from collections.abc import Callable

from models.db import connect
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.support.live import controls_of, live_session, set_live_script
from tests.support.waiting import wait_for

# The handler waits this long: the kill lands well inside it.
HANDLER_MS = 3_000
ASK = f"Please wait {HANDLER_MS} ms and check order 4417."


def test_a_worker_killed_while_a_delegation_runs_answers_it_exactly_once(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    """The only worker is killed -9 a few hundred milliseconds into the handler's run (its step
    running, nothing said yet); a new worker gets the run back when the dead one's heartbeat
    lapses, runs the handler again, and the model hears one commentary for the delegation."""
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-livekill") as stack:
        stack.start(workers=1)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        database = connect(services.database_url)
        set_live_script(
            stack,
            {
                "timing": {"fragment_ms": 40, "reply_after_ms": 50, "answer_wait_ms": 30_000},
                "caller": [
                    {"say": ASK, "after_ms": 100, "delegate": True},
                    {"hangup": True, "after_ms": 300},
                ],
                "model": [],
            },
        )
        session = client.create_session(
            "You are the order desk.", provider="live", live={"delegation": "wait_task"}
        )
        call_id = client.connect(session["id"])["call_id"]

        def running_since() -> float | None:
            row = database.execute_sql(
                "SELECT extract(epoch FROM started_at)::float FROM tool_steps"
                " WHERE session_id = %s AND status = 'running'",
                (session["id"],),
            ).fetchone()
            return float(row[0]) if row else None

        started = wait_for(running_since, "the handler to start", timeout_s=20, every_s=0.01)
        time.sleep(0.3)
        # The fault is real only if it lands while the handler runs: its step is still running and
        # nothing has been said for the delegation.
        assert running_since() == started
        assert not [
            c for c in controls_of(live_session(stack, call_id)) if c["type"] == "session.commentary.append"
        ]
        victim = stack.workers[0]
        victim.kill()
        killed_at = time.time()
        assert victim.popen.returncode == -9
        stack.add_worker()

        record = client.wait_for_status(session["id"], timeout_s=60)
        log = live_session(stack, call_id)

    assert (record["status"], record["end_reason"]) == ("ended", "caller_hung_up")
    assert log["errors"] == []
    [delegation] = [e["event"] for e in log["events"] if e["event"]["type"] == "session.delegation.created"]
    commentaries = [
        entry for entry in log["controls"] if entry["control"]["type"] == "session.commentary.append"
    ]
    assert len(commentaries) == 1, commentaries
    assert commentaries[0]["control"]["delegation_id"] == delegation["delegation"]["id"]
    assert commentaries[0]["control"]["content"].endswith(ASK)
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("wait_task", "succeeded")]
    # The first run was cut short by the kill: the answer came from the run done again after it.
    answered_after_s = commentaries[0]["t"] - killed_at
    assert answered_after_s > HANDLER_MS / 1000, answered_after_s
    figure(
        f"worker kill -9 while a Live delegation's handler ran: answered once, {answered_after_s:.1f} s "
        f"after the kill (the dead worker's heartbeat timeout, then a {HANDLER_MS} ms handler run again)"
    )
