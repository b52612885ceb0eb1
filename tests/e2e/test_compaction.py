"""Context compaction end to end: a long call through the simulator, whose usage reports the
context growing, compacts at a quiet boundary and goes on; a caller who speaks meanwhile wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from simulator.oracle import wire_errors
from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call

SUMMARY = (
    "Working notes: caller is Dana Reyes, order 4417 (blue kettle, 39.90). Shipped 12 May, "
    "tracking ZX-991. Open: refund of 12.50 for the late delivery. Next: confirm the refund."
)
LINES = [
    "Hi, this is Dana Reyes calling about my order number 4417, the blue kettle from your spring sale.",
    "It was supposed to arrive on Monday but nothing came, and I paid for the faster delivery option.",
    "Can you tell me the tracking number and which carrier has the parcel at the moment, please?",
    "I would also like the extra shipping fee back, it was twelve euros and fifty cents in total.",
    "Will the refund go back to the same card ending in 0042, or do you send a voucher instead?",
    "And how many working days does that usually take before I can see it on my statement?",
    "One more thing, can you send a confirmation of all this to my email address on file?",
    "Great, thank you so much for your patience, that is everything I needed for today.",
]
TIMING = {"delta_interval_ms": 5, "chars_per_delta": 40, "speech_ms": 150, "response_wait_ms": 20000}


def _call(
    client: Client, stack: Stack, script: dict[str, Any], threshold: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    set_script(stack, script)
    session = client.create_session(
        "You are the order desk of a kitchenware shop.", limits={"compaction_input_tokens": threshold}
    )
    live: list[dict[str, Any]] = []
    follower = client.follow_live(session["id"], live.append)
    call_id = client.connect(session["id"])["call_id"]
    client.wait_for_status(session["id"], timeout_s=90)
    follower.join(10)
    record = client.session(session["id"], events=True)
    log = simulator_call(stack, call_id)
    assert log["errors"] == []
    for entry in log["controls"]:
        assert wire_errors(entry["control"], direction="client") == [], entry["control"]
    # Nobody hears a maintenance response: its text never reaches the live transcript.
    spoken = [m for m in live if m["type"].startswith("transcript.")]
    assert spoken and not [m for m in spoken if "Working notes" in m.get("text", m.get("delta", ""))]
    return record, log


def _spoken_usage(log: dict[str, Any]) -> list[int]:
    """The input tokens of each spoken (in-conversation) response, in order."""
    return [
        entry["event"]["response"]["usage"]["input_tokens"]
        for entry in log["events"]
        if entry["event"]["type"] == "response.done" and entry["event"]["response"]["conversation_id"]
    ]


def test_a_long_call_compacts_and_goes_on(stack: Stack, client: Client) -> None:
    """The context grows turn by turn; once a response reports the threshold, a maintenance
    response writes the summary, the oldest items are deleted, one summary item is added, the
    next response's context is smaller, and every later turn is answered."""
    threshold = 200
    script = {
        "name": "long-call",
        "timing": TIMING,
        "caller": [{"say": line, "after_ms": 20} for line in LINES] + [{"hangup": True, "after_ms": 100}],
        "model": [
            {"say": f"Of course, I have noted point {index} of your request."} for index in range(1, 9)
        ],
        "out_of_band": [{"text": SUMMARY}, {"text": SUMMARY + " Refund confirmed."}],
    }
    record, log = _call(client, stack, script, threshold)

    assert record["status"] == "ended"
    first = record["compactions"][0]
    assert first["status"] == "completed" and first["forced"] is False
    assert first["trigger_input_tokens"] >= threshold
    assert first["summary"] == SUMMARY
    assert first["items_deleted"] == first["items_before"] - 6 > 0

    controls = [entry["control"] for entry in log["controls"]]
    maintenance = [
        i
        for i, c in enumerate(controls)
        if c["type"] == "response.create" and c["response"].get("conversation") == "none"
    ]
    assert maintenance, "no maintenance response was asked for"
    start = maintenance[0]
    assert controls[start]["response"]["output_modalities"] == ["text"]
    assert controls[start]["response"]["tool_choice"] == "none"
    assert controls[start]["response"]["max_output_tokens"] == 2048
    deletes = [c for c in controls[start:] if c["type"] == "conversation.item.delete"]
    summary_items = [
        c
        for c in controls[start:]
        if c["type"] == "conversation.item.create" and c["item"].get("role") == "system"
    ]
    assert len(deletes) >= first["items_deleted"]
    assert (
        summary_items[0]["item"]["content"][0]["text"]
        == f"Earlier conversation compacted. Summary: {SUMMARY}"
    )
    # The provider confirmed every delete, and the oldest items are the ones that went.
    deleted = {
        e["event"]["item_id"] for e in log["events"] if e["event"]["type"] == "conversation.item.deleted"
    }
    assert {c["item_id"] for c in deletes} == deleted
    first_user_item = next(t["item_id"] for t in record["transcript"] if t["role"] == "user")
    assert first_user_item in deleted

    # The context grew until the trigger, and the response after the prune saw a smaller one.
    usage = _spoken_usage(log)
    trigger = usage.index(first["trigger_input_tokens"])
    assert usage[: trigger + 1] == sorted(usage[: trigger + 1])
    assert all(tokens < threshold for tokens in usage[:trigger])
    assert usage[trigger + 1] < usage[trigger]

    # The call went on: every line was heard and answered after the compaction too.
    said = [t["text"] for t in record["transcript"] if t["role"] == "user"]
    answered = [t["text"] for t in record["transcript"] if t["role"] == "assistant"]
    assert said == LINES
    assert len(answered) == len(LINES)
    assert SUMMARY not in answered


def test_a_compaction_interrupted_by_the_caller_is_abandoned(stack: Stack, client: Client) -> None:
    """The caller speaks while the summary is being written: the maintenance response is
    cancelled, nothing is deleted, and the caller's turn is answered."""
    long_notes = "Working notes: " + "order 4417 shipped, tracking ZX-991, refund open. " * 120
    script = {
        "name": "compaction-interrupted",
        "timing": {**TIMING, "chars_per_delta": 12, "delta_interval_ms": 10},
        "caller": [{"say": line, "after_ms": 20} for line in LINES[:4]]
        + [{"say": "Sorry, one more question.", "during_out_of_band": True, "after_ms": 0}]
        + [{"hangup": True, "after_ms": 100}],
        "model": [{"say": f"Noted, point {index}."} for index in range(1, 6)],
        "out_of_band": [{"text": long_notes}],
    }
    record, log = _call(client, stack, script, threshold=1)

    [compaction] = record["compactions"]
    assert (compaction["status"], compaction["reason"]) == ("abandoned", "superseded_by_input")
    assert compaction["summary"] is None
    controls = [entry["control"] for entry in log["controls"]]
    assert not [c for c in controls if c["type"] == "conversation.item.delete"]
    cancels = [c for c in controls if c["type"] == "response.cancel"]
    maintenance_ids = [
        e["event"]["response"]["id"]
        for e in log["events"]
        if e["event"]["type"] == "response.created" and e["event"]["response"]["conversation_id"] is None
    ]
    assert [c["response_id"] for c in cancels] == maintenance_ids
    cancelled = [
        e["event"]["response"]
        for e in log["events"]
        if e["event"]["type"] == "response.done" and e["event"]["response"]["id"] in maintenance_ids
    ]
    assert [r["status"] for r in cancelled] == ["cancelled"]
    answered = [t["text"] for t in record["transcript"] if t["role"] == "assistant"]
    assert answered[-1] == "Noted, point 5."
    assert record["status"] == "ended"


def test_a_compaction_forced_from_the_api_and_the_cli(stack: Stack, client: Client) -> None:
    """While the caller pauses, the API forces a compaction and gets its outcome; a second one
    from the CLI right after is refused by the cooldown, and says so."""
    pause_ms = 6000
    script = {
        "name": "forced-compaction",
        "timing": TIMING,
        "caller": [{"say": line, "after_ms": 20} for line in LINES[:5]]
        + [{"say": LINES[5], "after_ms": pause_ms}, {"hangup": True, "after_ms": 100}],
        "model": [{"say": f"Noted, point {index}."} for index in range(1, 7)],
        "out_of_band": [{"text": SUMMARY}],
    }
    set_script(stack, script)
    session = client.create_session("You are the order desk.", limits={"compaction_input_tokens": 100_000})
    call_id = client.connect(session["id"])["call_id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        record = client.session(session["id"])
        answered = [t for t in record["transcript"] if t["role"] == "assistant"]
        if len(answered) == 5 and record["status"] == "listening":
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the call never reached its pause: {record['status']}")

    status, result = client.compact(session["id"])

    assert status == 200
    assert result["compacted"] is True and result["reason"] is None
    assert (result["items_before"], result["items_deleted"], result["items_after"]) == (10, 4, 7)
    assert result["summary_length"] == len(SUMMARY)

    cli = subprocess.run(
        [sys.executable, "-m", "switchboard", "sessions", "compact", session["id"], "--api", stack.api_url],
        env={**os.environ, "SWITCHBOARD_API_TOKEN": stack.api_token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 1, cli.stderr
    refused = json.loads(cli.stdout)
    assert (refused["compacted"], refused["reason"]) == (False, "cooling_down")

    record = client.wait_for_status(session["id"], timeout_s=60)
    assert record["status"] == "ended"
    assert [(c["forced"], c["status"]) for c in record["compactions"]] == [(True, "completed")]
    assert [t["text"] for t in record["transcript"] if t["role"] == "user"] == LINES[:6]
    log = simulator_call(stack, call_id)
    assert log["errors"] == []
    assert len([c for c in log["controls"] if c["control"]["type"] == "conversation.item.delete"]) == 4


def test_a_compaction_of_an_unknown_or_ended_session_is_refused(stack: Stack, client: Client) -> None:
    """Unknown: 404. Not live: answered "not compacted" and why. Ended: 409. A body: 422."""
    status, body = client.request("POST", "/v1/sessions/sess_nope/compact")
    assert status == 404, body
    session = client.create_session("You are the order desk.")
    # Not connected yet: answered, with the reason.
    status, body = client.compact(session["id"])
    assert (status, body["compacted"], body["reason"]) == (200, False, "session_not_live")
    client.end(session["id"])
    client.wait_for_status(session["id"])
    status, body = client.request("POST", f"/v1/sessions/{session['id']}/compact")
    assert (status, body["error"]["code"]) == (409, "session_ended")
    status, body = client.request("POST", f"/v1/sessions/{session['id']}/compact", {"now": True})
    assert (status, body["error"]["code"]) == (422, "malformed_request")
