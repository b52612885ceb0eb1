"""A lost sideband through every process: the gateway re-opens it on the same call and the call
goes on; a provider that refuses the re-attach fails the session cleanly, with a hangup."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from typing import Any

from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call

TIMING = {"delta_interval_ms": 5, "chars_per_delta": 40, "speech_ms": 100, "response_wait_ms": 20000}


def _drop(stack: Stack, call_id: str, *, refuse: bool = False, end: bool = False) -> None:
    base = stack.simulator_url.removesuffix("/v1")
    query = "code=1011" + ("&refuse=1" if refuse else "") + ("&end=1" if end else "")
    request = urllib.request.Request(f"{base}/_sim/calls/{call_id}/drop?{query}", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read())["dropped"] == call_id


def _listening_after(client: Client, session_id: str, answers: int) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        record = client.session(session_id)
        if (
            record["status"] == "listening"
            and sum(t["role"] == "assistant" for t in record["transcript"]) >= answers
        ):
            return record
        time.sleep(0.03)
    raise AssertionError("the call never reached its pause")


def test_a_dropped_sideband_is_reopened_and_the_call_goes_on(stack: Stack, client: Client) -> None:
    set_script(
        stack,
        {
            "name": "reconnect",
            "timing": TIMING,
            "caller": [
                {"say": "Hello, is this the order desk?", "after_ms": 20},
                {"say": "Where is order 4417?", "after_ms": 3000},
                {"hangup": True, "after_ms": 200},
            ],
            "model": [{"say": "Yes, this is the order desk."}, {"say": "It ships on Friday."}],
        },
    )
    session = client.create_session("You are the order desk.")
    call_id = client.connect(session["id"])["call_id"]
    _listening_after(client, session["id"], 1)

    dropped_at = time.time()
    _drop(stack, call_id)
    record = client.wait_for_status(session["id"], timeout_s=30)

    assert (record["status"], record["end_reason"]) == ("ended", "caller_hung_up")
    assert [t["text"] for t in record["transcript"] if t["role"] == "assistant"] == [
        "Yes, this is the order desk.",
        "It ships on Friday.",
    ]
    assert record["generation"] == 2
    [lost] = [i for i in record["incidents"] if i["code"] == "sideband_lost"]
    assert lost["severity"] == "warning"
    log = client.session(session["id"], events=True)["log"]
    connected = [e for e in log if e["kind"] == "switchboard.sideband_connected"]
    assert [e["generation"] for e in connected] == [1, 2]
    sim = simulator_call(stack, call_id)
    assert sim["errors"] == []
    # The controls after the drop went over the new sideband and the provider took them.
    assert [c["control"]["type"] for c in sim["controls"]][-1] == "response.create"
    reconnected = next(
        e for e in log if e["kind"] == "switchboard.sideband_connected" and e["generation"] == 2
    )
    assert reconnected["applied_order"] is not None
    print(f"reconnect: drop → sideband open again in {(_connected_at(log) - dropped_at) * 1000:.0f} ms")


def _connected_at(log: list[dict[str, Any]]) -> float:
    """When the second sideband was numbered by the gateway (its envelope's received_at)."""
    for event in log:
        if event["kind"] == "switchboard.sideband_connected" and event["generation"] == 2:
            return datetime.fromisoformat(event["received_at"]).timestamp()
    raise AssertionError("no second sideband")


def test_a_provider_that_refuses_the_reattach_fails_the_session_cleanly(stack: Stack, client: Client) -> None:
    set_script(
        stack,
        {
            "name": "refused-reattach",
            "timing": TIMING,
            "caller": [{"say": "Hello?", "after_ms": 20}, {"hangup": True, "after_ms": 20000}],
            "model": [{"say": "Hello, order desk."}],
        },
    )
    session = client.create_session("You are the order desk.")
    call_id = client.connect(session["id"])["call_id"]
    _listening_after(client, session["id"], 1)

    _drop(stack, call_id, refuse=True)
    record = client.wait_for_status(session["id"], timeout_s=30)

    assert (record["status"], record["end_reason"]) == ("failed", "sideband_reconnect_exhausted")
    codes = [i["code"] for i in record["incidents"]]
    assert codes.count("sideband_lost") == 3 and codes[-1] == "sideband_reconnect_exhausted"
    # "Why did that session fail?", answered from the record, and by the CLI.
    why = record["why"]
    assert why["code"] == "sideband_reconnect_exhausted" and "2 attempts" in why["summary"]
    assert why["warnings_before"] == ["sideband_lost"] * 3
    shown = subprocess.run(
        [sys.executable, "-m", "switchboard", "sessions", "show", session["id"]],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(shown.stdout)["why"] == why
    assert "failed: sideband_reconnect_exhausted: the sideband could not be re-opened" in shown.stderr
    deadline = time.monotonic() + 10
    while simulator_call(stack, call_id)["status"] != "ended" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert simulator_call(stack, call_id)["status"] == "ended"  # hung up


def test_a_caller_who_hangs_up_while_the_sideband_is_down_ends_the_call(stack: Stack, client: Client) -> None:
    """The sideband is lost just as the caller hangs up (a handover, a network fault): the
    re-attach finds no such call at the provider (404), and the call is over — ended, not failed
    after two refused attempts (a rolling deploy's handover met it)."""
    set_script(
        stack,
        {
            "name": "hung-up-unheard",
            "timing": TIMING,
            "caller": [{"say": "Hello?", "after_ms": 20}, {"hangup": True, "after_ms": 20000}],
            "model": [{"say": "Hello, order desk."}],
        },
    )
    session = client.create_session("You are the order desk.")
    call_id = client.connect(session["id"])["call_id"]
    _listening_after(client, session["id"], 1)

    _drop(stack, call_id, end=True)
    record = client.wait_for_status(session["id"], timeout_s=30)

    assert (record["status"], record["end_reason"]) == ("ended", "caller_hung_up"), record["why"]
    assert [i["code"] for i in record["incidents"]] == ["sideband_lost"]
