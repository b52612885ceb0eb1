"""kill -9 of the worker in the middle of a call loses no event and sends no control twice."""

from __future__ import annotations

from typing import Any

import psycopg2

from models.db import parse_database_url
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import simulator_call

DURABLE_PROVIDER_TYPES = {
    "session.updated",
    "input_audio_buffer.speech_started",
    "conversation.item.input_audio_transcription.completed",
    "response.created",
    "response.output_audio_transcript.done",
    "response.done",
}

# Five spoken turns; the caller waits long enough for a response that a redelivery after the
# dead worker's heartbeat times out still answers it.
SCRIPT: dict[str, Any] = {
    "name": "patient-caller",
    "timing": {"delta_interval_ms": 10, "chars_per_delta": 12, "speech_ms": 200, "response_wait_ms": 30000},
    "caller": [{"say": f"This is line {n} of the caller.", "after_ms": 150} for n in range(5)]
    + [{"hangup": True, "after_ms": 200}],
    "model": [{"say": f"And this is answer {n}."} for n in range(5)],
}


def test_a_worker_killed_mid_call_loses_no_event_and_sends_no_control_twice(
    services: Services, namespace: str
) -> None:
    """The only worker is killed -9 while it holds a caller's transcript; a new worker gets that
    unacknowledged message back and the call completes with every turn answered once."""
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-kill") as stack:
        stack.start(workers=1)
        from tests.e2e.conftest import set_script

        set_script(stack, SCRIPT)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        session = client.create_session("Answer briefly.")
        call_id = client.connect(session["id"])["call_id"]

        def first_response_asked() -> bool:
            return any(
                c["control"]["type"] == "response.create" for c in simulator_call(stack, call_id)["controls"]
            )

        def second_transcript_sent() -> bool:
            sent = [e["event"]["type"] for e in simulator_call(stack, call_id)["events"]]
            return sent.count("conversation.item.input_audio_transcription.completed") >= 2

        # Hold the session's row lock so the worker is caught mid-message (fetched, unacked,
        # blocked on the lock) when it is killed: its message can only come back through the
        # broker's dead-worker recovery.
        holder = psycopg2.connect(**parse_database_url(services.database_url))
        with holder.cursor() as cursor:
            assert wait_until(first_response_asked, 30, interval_s=0.005)
            cursor.execute("SELECT id FROM sessions WHERE id = %s FOR UPDATE", (session["id"],))
            assert wait_until(second_transcript_sent, 30, interval_s=0.005)
            assert wait_until(lambda: _waits_on_lock(services, session["id"]), 5)
            stack.workers[0].kill()
        holder.rollback()
        holder.close()
        stack.add_worker()
        record = client.wait_for_status(session["id"], timeout_s=120)

        assert record["status"] == "ended", record
        call = simulator_call(stack, call_id)
        controls = [entry["control"] for entry in call["controls"]]
        ids = [control["event_id"] for control in controls]
        assert len(ids) == len(set(ids)), "a control was sent twice"
        assert [control["type"] for control in controls] == ["session.update"] + ["response.create"] * 5

        full = client.session(session["id"], events=True)
        assert full["applied_seq"] == full["logged_seq"]
        seqs = sorted(event["seq"] for event in full["log"] if "seq" in event)
        assert seqs == list(range(1, full["applied_seq"] + 1))
        assert set(full["events"]) == {"applied"}
        sent = [
            e["event"]["event_id"] for e in call["events"] if e["event"]["type"] in DURABLE_PROVIDER_TYPES
        ]
        logged = [event["payload"].get("event_id") for event in full["log"] if "seq" in event]
        assert sorted(sent) == sorted(e for e in logged if e is not None), "a provider event was lost"
        assert len(full["transcript"]) == 10
        print(f"\nlongest transcript→response.create stall after kill -9: {_longest_stall_ms(call):.0f} ms")


def _waits_on_lock(services: Services, session_id: str) -> bool:
    """True once another backend is waiting for the row lock we hold."""
    with psycopg2.connect(**parse_database_url(services.database_url)) as probe, probe.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        (waiting,) = cursor.fetchone()
    probe.close()
    return bool(waiting)


def _longest_stall_ms(call: dict[str, Any]) -> float:
    finals = [e["t"] for e in call["events"] if e["event"]["type"].endswith("transcription.completed")]
    creates = [c["t"] for c in call["controls"] if c["control"]["type"] == "response.create"]
    return max((create - final) * 1000 for final, create in zip(finals, creates, strict=True))
