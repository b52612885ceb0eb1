"""The operator's half of a call, end to end through the gateway, the queues, a worker and the
simulated provider: a greeting, prompt blocks, hold and unhold, a caller waiting for a person
that nobody takes, a supervisor taking the line, speaking, whispering, releasing and ending
the call — each answered, each control valid on the wire, and the story in `/log` in order."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from pipeline.operator.line import NOBODY_TOOK_IT
from simulator.oracle import wire_errors
from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call
from tests.support.waiting import wait_for

DANA = {"id": "sup_dana", "name": "Dana"}
LEE = {"id": "sup_lee", "name": "Lee"}


def _cli(stack: Stack, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", "sessions", *arguments, "--api", stack.api_url],
        env={**os.environ, "SWITCHBOARD_API_TOKEN": stack.api_token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _kinds(client: Client, session_id: str) -> list[str]:
    return [entry["kind"] for entry in client.call_log(session_id)["entries"]]


def _listening(client: Client, session_id: str) -> bool:
    return client.session(session_id)["status"] == "listening"


def _refused(client: Client, method: str, path: str, body: Any = None) -> tuple[int, str]:
    status, answer = client.request(method, path, body)
    return status, answer["error"]["code"]


def test_the_operators_commands_and_a_supervisors_verbs_through_the_whole_stack(
    stack: Stack, client: Client
) -> None:
    set_script(
        stack,
        {
            "name": "operator",
            "timing": {"response_wait_ms": 60_000},
            "caller": [{"hangup": True, "after_ms": 120_000}],
            "model": [
                {"say": "Thanks for calling Acme."},
                {"say": "Sorry, nobody is free right now. Can I help instead?"},
                {"say": "Hi, this is Dana from billing."},
                {"say": "Thanks for waiting. Where were we?"},
            ],
        },
    )
    session = client.create_session(
        "You are the billing desk.",
        greeting={"say": "Thanks for calling Acme."},
        hangup={"when": "when the caller says goodbye"},
    )
    sid = session["id"]
    base = f"/v1/sessions/{sid}"
    call_id = client.connect(sid)["call_id"]
    wait_for(lambda: "turn.agent" in _kinds(client, sid) and _listening(client, sid), "the greeting")

    # Named prompt blocks: a change of bytes is sent, the same bytes are not.
    assert client.set_prompt(sid, "hours", "We open at nine.")["status"] == "changed"
    assert client.set_prompt(sid, "hours", "We open at nine.")["status"] == "unchanged"
    assert _refused(client, "PUT", f"{base}/prompt/bad%20name", {"text": "x"}) == (422, "malformed_request")
    assert _refused(client, "PUT", f"{base}/tools", {"tools": ["no_such_tool"]}) == (422, "unknown_tool")

    # Hold from the CLI: the caller's typed words are kept and not answered; the agent is quiet.
    held = _cli(stack, "hold", sid)
    assert held.returncode == 0, held.stderr
    assert client.caller_text(sid, "Hello? Is anyone there?")["status"] == "queued"
    assert _refused(client, "POST", f"{base}/agent/say", {"text": "Hi"}) == (409, "line_held")
    wait_for(lambda: "turn.user" in _kinds(client, sid), "the typed words in the log")
    assert client.hold(sid) == {"session_id": sid, "status": "held", "changed": False}
    assert client.unhold(sid)["status"] == "free"

    # A person is asked for and nobody comes within 1 s: the line is given back, the model says so.
    assert client.attention(sid, "wants a refund", 1)["status"] == "waiting"
    assert _refused(client, "POST", f"{base}/attention", {"reason": "again", "wait_s": 5}) == (
        409,
        "already_waiting",
    )
    wait_for(lambda: "attention.answered" in _kinds(client, sid), "nobody taking the line", 30)
    wait_for(
        lambda: _kinds(client, sid).count("turn.agent") == 2 and _listening(client, sid), "the model's word"
    )

    # A supervisor takes the line, speaks through say, whispers (no reply), releases it.
    assert client.supervise(sid, DANA, {"type": "take_over"})["status"] == "taken"
    taken_twice = client.request("POST", f"{base}/supervisor", {"by": LEE, "verb": {"type": "take_over"}})
    assert (taken_twice[0], taken_twice[1]["error"]["code"]) == (409, "already_held")
    assert client.supervise(sid, DANA, {"type": "say", "text": "Hi, this is Dana from billing."})[
        "status"
    ] in (
        "speaking",
        "after_response",
    )
    wait_for(lambda: _kinds(client, sid).count("turn.agent") == 3 and _listening(client, sid), "Dana's words")
    whispered = _cli(stack, "supervise", sid, "whisper", "The refund was approved.", "--by", DANA["id"])
    assert whispered.returncode == 0, whispered.stderr
    assert '"noted"' in whispered.stdout
    assert client.supervise(sid, DANA, {"type": "release"})["status"] == "released"
    released_twice = client.request("POST", f"{base}/supervisor", {"by": DANA, "verb": {"type": "release"}})
    assert (released_twice[0], released_twice[1]["error"]["code"]) == (409, "nobody_holds")
    wait_for(lambda: _kinds(client, sid).count("turn.agent") == 4 and _listening(client, sid), "the reply")
    transfer = {"by": DANA, "verb": {"type": "transfer", "to": "tel:+14155550123"}}
    assert _refused(client, "POST", f"{base}/supervisor", transfer) == (409, "not_a_phone_call")

    assert client.supervise(sid, DANA, {"type": "end", "reason": "resolved"})["status"] == "ending"
    client.wait_for_status(sid, timeout_s=30)
    assert _refused(client, "POST", f"{base}/hold") == (409, "session_ended")

    story = client.call_log(sid)["entries"]
    kinds = [entry["kind"] for entry in story]
    assert kinds == [
        "call.started",
        "turn.agent",
        "prompt.changed",
        "prompt.changed",
        "call.line",
        "turn.user",
        "call.line",
        "attention.requested",
        "call.line",
        "attention.answered",
        "call.line",
        "turn.agent",
        "supervisor.took_over",
        "supervisor.said",
        "turn.agent",
        "supervisor.whispered",
        "supervisor.released",
        "turn.agent",
        "supervisor.ended",
        "call.ended",
    ]
    by_kind = {entry["kind"]: entry["data"] for entry in story}
    assert "nine" not in str(by_kind["prompt.changed"]) and by_kind["prompt.changed"]["chars"] == 16
    assert by_kind["attention.answered"] == {
        "ok": False,
        "by": None,
        "error": NOBODY_TOOK_IT.format(wait_s=1),
    }
    assert by_kind["supervisor.took_over"] == {"by": DANA}
    assert by_kind["call.ended"]["reason"] == "supervisor_ended"
    assert by_kind["call.ended"]["ended_by"] == "supervisor"
    assert client.session(sid)["ended_by"] == "supervisor"

    log = simulator_call(stack, call_id)
    assert log["errors"] == []
    controls = [entry["control"] for entry in log["controls"]]
    for control in controls:
        assert wire_errors(control, direction="client") == [], control
    assert any(c["type"] == "input_audio_buffer.clear" for c in controls)
    creates = [c for c in controls if c["type"] == "response.create"]
    assert [c["response"].get("metadata") for c in creates].count({"switchboard": "supervisor_say"}) == 1


def test_the_tools_change_between_runs_and_the_model_hangs_up_after_its_goodbye(
    stack: Stack, client: Client
) -> None:
    """PUT /tools is refused while a tool runs (409 tool_running) and applied after it (the
    provider is sent the new tools, end_call still among them); the model's end_call ends the
    call once its response is done: agent_hung_up, by the agent."""
    set_script(
        stack,
        {
            "name": "tools-and-hangup",
            "timing": {"response_wait_ms": 20_000},
            "caller": [
                {"say": "Can you hold on a moment?", "after_ms": 200},
                {"say": "Thanks, that's all. Goodbye!", "after_ms": 1_500},
            ],
            "model": [
                {"function_call": {"name": "wait", "arguments": {"ms": 2_000}}},
                {"say": "Thanks for holding."},
                {"function_call": {"name": "end_call", "arguments": {}}},
            ],
        },
    )
    session = client.create_session(
        "You are the order desk.", tools=["wait", "echo"], hangup={"when": "when the caller is done"}
    )
    sid = session["id"]
    call_id = client.connect(sid)["call_id"]

    wait_for(lambda: "tool.call" in _kinds(client, sid), "the wait tool to run")
    assert _refused(client, "PUT", f"/v1/sessions/{sid}/tools", {"tools": ["echo"]}) == (409, "tool_running")
    wait_for(lambda: "tool.result" in _kinds(client, sid) and _listening(client, sid), "the tool's answer")
    changed = client.set_tools(sid, ["lookup_order"])
    assert changed["tools"] == ["lookup_order"]

    record = client.wait_for_status(sid, timeout_s=30)
    assert (record["end_reason"], record["ended_by"]) == ("agent_hung_up", "agent")
    story = client.call_log(sid)["entries"]
    kinds = [entry["kind"] for entry in story]
    assert kinds.count("tools.changed") == 1 and kinds[-1] == "call.ended"
    [hangup] = [e["data"] for e in story if e["kind"] == "tool.call" and e["data"]["name"] == "end_call"]
    assert story[-1]["data"] == {**story[-1]["data"], "reason": "agent_hung_up", "ended_by": "agent"}
    assert hangup["call_id"]

    log = simulator_call(stack, call_id)
    assert log["errors"] == [] and log["close_code"] == 1000
    updates = [c["control"] for c in log["controls"] if c["control"]["type"] == "session.update"]
    assert [t["name"] for t in updates[-1]["session"]["tools"]] == ["lookup_order", "end_call"]
    for entry in log["controls"]:
        assert wire_errors(entry["control"], direction="client") == [], entry
