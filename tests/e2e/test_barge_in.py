"""Barge-in through every process: the caller talks over the answer; the host cuts the
assistant item where they stopped hearing it, cancels the response, and answers them."""

from __future__ import annotations

from simulator.oracle import wire_errors
from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script, simulator_call


def test_the_caller_talks_over_the_answer(stack: Stack, client: Client) -> None:
    set_script(stack, SCRIPTS / "barge_in.json")
    session = client.create_session("You are the front desk.")
    call_id = client.connect(session["id"])["call_id"]
    record = client.wait_for_status(session["id"], timeout_s=60)
    log = simulator_call(stack, call_id)
    assert log["errors"] == []
    controls = [entry["control"] for entry in log["controls"]]
    for control in controls:
        assert wire_errors(control, direction="client") == [], control

    assert [c["type"] for c in controls] == [
        "session.update",
        "response.create",
        "conversation.item.truncate",
        "response.cancel",
        "response.create",
    ]
    events = [entry["event"] for entry in log["events"]]
    first = next(e["response"]["id"] for e in events if e["type"] == "response.created")
    first_item = next(e["item_id"] for e in events if e["type"] == "response.output_audio_transcript.delta")
    truncate, cancel = controls[2], controls[3]
    assert (truncate["item_id"], truncate["content_index"]) == (first_item, 0)
    assert cancel["response_id"] == first
    # The cut is where the caller was: after the answer began, well before it would have ended.
    speech = [e for e in log["events"] if e["event"]["type"] == "input_audio_buffer.speech_started"][-1]
    first_delta = next(
        e for e in log["events"] if e["event"]["type"] == "response.output_audio_transcript.delta"
    )
    heard_ms = (speech["t"] - first_delta["t"]) * 1000
    assert heard_ms > 0 and abs(truncate["audio_end_ms"] - heard_ms) <= 100

    # The provider confirmed the cut and the cancel; it never refused a control.
    assert [e for e in events if e["type"] == "error"] == []
    assert [e["item_id"] for e in events if e["type"] == "conversation.item.truncated"] == [first_item]
    done = [e["response"] for e in events if e["type"] == "response.done"]
    assert (done[0]["id"], done[0]["status"]) == (first, "cancelled")

    assert record["status"] == "ended" and record["incidents"] == []
    said = [t["text"] for t in record["transcript"] if t["role"] == "user"]
    assert said == ["What are your opening hours?", "Sorry, one more thing"]
    answered = [t["text"] for t in record["transcript"] if t["role"] == "assistant"]
    assert answered[-1] == "Sure, what else can I help with?"
