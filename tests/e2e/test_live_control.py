"""Acting on a live call from the API and the CLI — interrupt, typed text, end — and the usage
budget ending a call, through every process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

from pipeline.call.limits import BUDGET_NOTICE, TYPED_MESSAGES_PER_MINUTE
from simulator.oracle import wire_errors
from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call

LONG_ANSWER = (
    "We are open from nine in the morning until six in the evening from Monday to Friday, from ten "
    "until four on Saturdays, and closed on Sundays, except in December when we open every day "
    "from ten until eight so that everyone can finish their holiday shopping in good time."
)


def _cli(stack: Stack, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", "sessions", *arguments, "--api", stack.api_url],
        env={**os.environ, "SWITCHBOARD_API_TOKEN": stack.api_token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _wait_for(predicate: Any, what: str, timeout_s: float = 20) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.03)
    raise AssertionError(f"timed out waiting for {what}")


def test_interrupt_from_the_cli_then_typed_text_from_the_api(stack: Stack, client: Client) -> None:
    set_script(
        stack,
        {
            "name": "live-control",
            # The answer streams for about 20 s, and the caller stays a minute: the interrupt has
            # to land while it streams, and a CLI's start on a loaded machine takes seconds (the
            # call is ended by the test, and the interrupt cuts the answer short).
            "timing": {
                "delta_interval_ms": 150,
                "chars_per_delta": 8,
                "speech_ms": 150,
                "response_wait_ms": 20000,
            },
            "caller": [{"say": "When are you open?", "after_ms": 50}, {"hangup": True, "after_ms": 60000}],
            "model": [{"say": " ".join([LONG_ANSWER] * 4)}, {"say": "Order 4417 ships on Friday."}],
        },
    )
    session = client.create_session("You are the front desk.")
    call_id = client.connect(session["id"])["call_id"]

    def streaming() -> bool:
        events = simulator_call(stack, call_id)["events"]
        return sum(e["event"]["type"] == "response.output_audio_transcript.delta" for e in events) >= 3

    _wait_for(streaming, "the answer to stream")
    interrupted = _cli(stack, "interrupt", session["id"])
    assert interrupted.returncode == 0, interrupted.stderr

    def cancelled() -> list[dict[str, Any]]:
        events = [e["event"] for e in simulator_call(stack, call_id)["events"]]
        return [e for e in events if e["type"] == "response.done" and e["response"]["status"] == "cancelled"]

    _wait_for(cancelled, "the answer to be cancelled")
    _wait_for(lambda: client.session(session["id"])["status"] == "listening", "the session to listen")
    typed = client.caller_text(session["id"], "  My order number is 4417.  ")
    assert typed["status"] == "queued"

    def answered() -> bool:
        record = client.session(session["id"])
        return any(t["text"] == "Order 4417 ships on Friday." for t in record["transcript"])

    _wait_for(answered, "the typed text to be answered")
    ended = _cli(stack, "end", session["id"], "--reason", "done_by_agent")
    assert ended.returncode == 0, ended.stderr
    record = client.wait_for_status(session["id"], timeout_s=30)
    assert (record["status"], record["end_reason"]) == ("ended", "done_by_agent")

    log = simulator_call(stack, call_id)
    assert log["errors"] == [] and log["status"] == "ended"
    controls = [entry["control"] for entry in log["controls"]]
    for control in controls:
        assert wire_errors(control, direction="client") == [], control
    kinds = [c["type"] for c in controls]
    assert kinds[:4] == ["session.update", "response.create", "conversation.item.truncate", "response.cancel"]
    message = next(c for c in controls if c["type"] == "conversation.item.create")
    assert message["item"]["role"] == "user"
    assert message["item"]["content"] == [{"type": "input_text", "text": "My order number is 4417."}]
    assert kinds[kinds.index("conversation.item.create") + 1] == "response.create"
    assert [t["text"] for t in record["transcript"] if t["role"] == "user"] == [
        "When are you open?",
        "My order number is 4417.",
    ]


def test_typed_text_is_checked_and_rate_limited(stack: Stack, client: Client) -> None:
    set_script(
        stack,
        {"name": "quiet", "caller": [{"hangup": True, "after_ms": 15000}], "model": [{"say": "Okay."}] * 20},
    )
    session = client.create_session("You are the front desk.")
    client.connect(session["id"])
    _wait_for(lambda: client.session(session["id"])["status"] == "listening", "the session to listen")
    for body in ({"text": "   "}, {"text": "x" * 4001}, {}, {"text": "hi", "extra": 1}):
        status, answer = client.request("POST", f"/v1/sessions/{session['id']}/caller/text", body)
        assert (status, answer["error"]["code"]) == (422, "malformed_request"), (body, answer)
    statuses = [
        client.request("POST", f"/v1/sessions/{session['id']}/caller/text", {"text": f"note {i}"})[0]
        for i in range(TYPED_MESSAGES_PER_MINUTE + 1)
    ]
    assert statuses == [202] * TYPED_MESSAGES_PER_MINUTE + [429]
    client.end(session["id"])
    client.wait_for_status(session["id"])
    status, answer = client.request("POST", f"/v1/sessions/{session['id']}/caller/text", {"text": "hello?"})
    error = answer["error"]
    assert (status, error["code"], error["end_reason"]) == (409, "session_ended", "app_ended")
    assert client.request("POST", f"/v1/sessions/{session['id']}/interrupt")[0] == 409


def test_the_usage_budget_warns_once_then_ends_the_call(stack: Stack, client: Client) -> None:
    lines = [f"This is question number {i} about my order, can you help me with it please?" for i in range(8)]
    set_script(
        stack,
        {
            "name": "budget",
            "timing": {
                "delta_interval_ms": 5,
                "chars_per_delta": 40,
                "speech_ms": 100,
                "response_wait_ms": 20000,
            },
            "caller": [{"say": line, "after_ms": 20} for line in lines] + [{"hangup": True, "after_ms": 100}],
            "model": [{"say": f"Yes, I can help you with question {i}."} for i in range(8)],
        },
    )
    session = client.create_session("You are the order desk.", limits={"usage_budget_tokens": 400})
    call_id = client.connect(session["id"])["call_id"]
    record = client.wait_for_status(session["id"], timeout_s=60)

    assert (record["status"], record["end_reason"]) == ("ended", "usage_budget_reached")
    assert record["usage"]["total_tokens"] >= 400
    log = simulator_call(stack, call_id)
    assert log["errors"] == [] and log["status"] == "ended"
    notices = [
        entry["control"]
        for entry in log["controls"]
        if entry["control"]["type"] == "conversation.item.create"
        and entry["control"]["item"]["content"][0]["text"] == BUDGET_NOTICE
    ]
    assert len(notices) == 1
    # The call ended before the caller ran out of things to say.
    heard = [t for t in record["transcript"] if t["role"] == "user"]
    assert 1 < len(heard) < len(lines)
