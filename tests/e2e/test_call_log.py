"""The call log end to end: `GET /v1/sessions/{id}/log` and `switchboard sessions log --follow`
and the live stream tell a real call's story from its durable log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script
from tests.support.heard import assert_heard, heard_counted
from tests.support.times import assert_times_are_rfc3339

# How long the simulated model takes to its first audio: a realistic wait, in one test only.
FIRST_AUDIO_MS = 300


def test_a_spoken_call_s_log_reads_in_order_and_the_cli_follows_it_to_the_end(
    stack: Stack, client: Client, services: Services
) -> None:
    """A three-turn call's log is call.started, three user/agent turn pairs and call.ended
    (caller_hung_up, by the caller) once and last; the record says who ended it; `?after=N` is
    the tail; the CLI follower, started while the call runs, prints the same entries and stops
    at call.ended; a live listener gets the same entries as `log.entry` messages before the
    stream closes; an unknown session is 404 and a bad `after` 422. With the model taking
    FIRST_AUDIO_MS before each answer's first audio, every agent turn says what the caller heard
    (heard_ms, Switchboard's hop within it, the provider's share at least that delay), the record
    sums it up, and the gateway's histogram counted each turn once."""
    script = json.loads((SCRIPTS / "spoken_call.json").read_text())
    set_script(stack, {**script, "timing": {**script["timing"], "first_audio_ms": FIRST_AUDIO_MS}})
    counted_before = heard_counted(client, "realtime")
    session = client.create_session("You are the order desk. Answer briefly.")
    follower = subprocess.Popen(
        [sys.executable, "-m", "switchboard", "sessions", "log", session["id"], "--follow"],
        env={
            **os.environ,
            "SWITCHBOARD_DATABASE_URL": services.database_url,
            "SWITCHBOARD_REDIS_URL": services.redis_url,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    heard: list[dict[str, Any]] = []
    listener = client.follow_live(session["id"], heard.append)
    client.connect(session["id"])
    record = client.wait_for_status(session["id"], timeout_s=60)
    assert (record["end_reason"], record["ended_by"]) == ("caller_hung_up", "caller")

    status, body = client.request("GET", f"/v1/sessions/{session['id']}/log")
    assert status == 200 and body["ended"] is True
    entries = body["entries"]
    assert [e["kind"] for e in entries] == [
        "call.started",
        *["turn.user", "turn.agent"] * 3,
        "call.ended",
    ]
    assert [e["seq"] for e in entries] == list(range(1, 9))
    assert entries[1]["data"]["text"] == "Hi, I'd like to check on an order."
    assert all(e["data"]["latency_ms"] is not None for e in entries if e["kind"] == "turn.agent")
    assert entries[-1]["data"]["reason"] == "caller_hung_up" and entries[-1]["data"]["ended_by"] == "caller"
    record = client.session(session["id"])
    waits = assert_heard(entries, record, FIRST_AUDIO_MS)
    assert len(waits) == 3
    assert all(e["data"]["heard"]["switchboard_ms"] == e["data"]["latency_ms"] for e in entries[2:7:2])
    assert heard_counted(client, "realtime") == counted_before + 3

    status, tail = client.request("GET", f"/v1/sessions/{session['id']}/log?after=6")
    assert status == 200 and tail["entries"] == entries[6:]

    listener.join(30)
    streamed = [{k: v for k, v in m.items() if k != "type"} for m in heard if m["type"] == "log.entry"]
    assert streamed == entries
    assert heard[-1]["type"] == "session.closed"

    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert [json.loads(line) for line in out.splitlines()] == entries

    # One name for the ending, and one format for every point in time, in the record, its
    # event log, the call log and the end-of-call report's fields.
    assert entries[-1]["data"]["reason"] == record["end_reason"]
    with_log = client.session(session["id"], events=True)
    assert_times_are_rfc3339({"record": with_log, "call_log": body})
    assert [event for event in with_log["log"] if "seq" in event and event["seq"] is None] == []

    status, missing = client.request("GET", "/v1/sessions/sess_nobody/log")
    assert (status, missing["error"]["code"]) == (404, "session_not_found")
    status, bad = client.request("GET", f"/v1/sessions/{session['id']}/log?after=x")
    assert (status, bad["error"]["code"]) == (422, "malformed_request")
