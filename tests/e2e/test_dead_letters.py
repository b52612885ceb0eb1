"""Dead letters through every process: an event that failed every attempt is listed with its
session and error, replayed once the fault is gone (a second replay changes nothing), and —
its session having ended meanwhile — completes the durable record without speaking."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

from models.db import connect
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call
from tests.support.queues import doomed_message

LOST = "Please also change the delivery address to 12 Harbour Street."


def _dlq(stack: Stack, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", "dlq", *arguments],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _letters(stack: Stack) -> list[dict[str, Any]]:
    listed = _dlq(stack, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))


def _wait(predicate: Any, what: str, timeout_s: float = 40) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_dead_lettered_event_is_listed_replayed_once_and_lands_late(
    stack: Stack, client: Client, services: Services
) -> None:
    database = connect(services.database_url)
    trigger = f"refuse_line_{uuid.uuid4().hex[:10]}"
    database.execute_sql(
        f"CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" IF NEW.payload->>'transcript' = '{LOST}' THEN RAISE EXCEPTION 'disk full (simulated)';"
        " END IF; RETURN NEW; END $$"
    )
    database.execute_sql(
        f"CREATE TRIGGER {trigger} BEFORE INSERT ON session_events FOR EACH ROW EXECUTE FUNCTION {trigger}()"
    )
    try:
        set_script(
            stack,
            {
                "name": "dead-letter",
                "timing": {
                    "delta_interval_ms": 5,
                    "chars_per_delta": 40,
                    "speech_ms": 100,
                    "response_wait_ms": 2000,
                },
                "caller": [
                    {"say": "Hello, I am calling about order 4417.", "after_ms": 20},
                    {"say": LOST, "after_ms": 50},
                    {"hangup": True, "after_ms": 30000},
                ],
                "model": [{"say": "Sure, what can I do for it?"}, {"say": "Done."}],
            },
        )
        # The session's ceiling ends it while its second line sits in the dead letters.
        session = client.create_session("You are the order desk.", limits={"max_session_seconds": 4})
        call_id = client.connect(session["id"])["call_id"]

        def dead() -> list[dict[str, Any]]:
            return [letter for letter in _letters(stack) if letter["session_id"] == session["id"]]

        [letter] = _wait(dead, "the event to be dead-lettered")
        assert letter["actor"] == "transcript_event" and letter["queue"] == "transcript"
        assert letter["retries"] == 10 and "disk full (simulated)" in letter["error"]
        record = client.wait_for_status(session["id"], timeout_s=30)
        assert (record["status"], record["end_reason"]) == ("ended", "max_duration")
        assert LOST not in [t["text"] for t in record["transcript"]]
        shown = _dlq(stack, "show", letter["id"][:12])
        assert shown.returncode == 0
        kwargs = json.loads(shown.stdout)["kwargs"]
        assert (kwargs.get("envelopes") or [kwargs["envelope"]])[0]["seq"] == letter["seq"]
    finally:
        database.execute_sql(f"DROP TRIGGER {trigger} ON session_events")
        database.execute_sql(f"DROP FUNCTION {trigger}()")
    controls_before = len(simulator_call(stack, call_id)["controls"])

    replayed = _dlq(stack, "replay", letter["id"])
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr

    def landed() -> list[dict[str, Any]]:
        return [t for t in client.session(session["id"])["transcript"] if t["text"] == LOST]

    [line] = _wait(landed, "the replayed transcript to land")
    assert line["late"] is True and line["seq"] == letter["seq"]
    again = _dlq(stack, "replay", letter["id"])
    assert again.returncode == 1 and "no such dead letter" in again.stdout
    time.sleep(1)
    record = client.session(session["id"], events=True)
    assert len([t for t in record["transcript"] if t["text"] == LOST]) == 1
    assert record["applied_seq"] == record["logged_seq"]
    assert len(simulator_call(stack, call_id)["controls"]) == controls_before  # nothing spoken
    assert not [entry for entry in _letters(stack) if entry["session_id"] == session["id"]]


def test_a_message_that_can_never_succeed_is_shown_and_purged(stack: Stack, services: Services) -> None:
    message_id = doomed_message(stack, services.redis_url)

    def dead() -> list[dict[str, Any]]:
        return [letter for letter in _letters(stack) if letter["id"] == message_id]

    [letter] = _wait(dead, "the malformed envelope to be dead-lettered", 20)
    assert letter["retries"] == 0 and letter["session_id"] == "sess_not_an_envelope"
    purged = _dlq(stack, "purge", message_id)
    assert purged.returncode == 0 and f"purged {message_id}" in purged.stdout
    assert not dead()
    assert _dlq(stack, "purge", message_id).returncode == 1
