"""The app's commands on a live call, end to end: the agent says given words, replies as it is
told, and the caller's typed text is answered — each answered by the worker in the call's order."""

from __future__ import annotations

from pipeline.realtime.turns import SAY_EXACTLY
from simulator.oracle import wire_errors
from switchboard.client import Client
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import set_script, simulator_call


def test_the_agent_says_and_replies_when_told_and_is_refused_while_answering(
    stack: Stack, client: Client
) -> None:
    """agent/say and agent/reply on a listening call are 202 and become tool-free and steered
    responses that the provider answers (their words in the call log); a second command while
    the first is answered is 409 agent_busy; bad bodies are 422; after the end, 409."""
    set_script(
        stack,
        {
            "name": "directed",
            "timing": {"response_wait_ms": 20_000},
            "caller": [{"hangup": True, "after_ms": 60_000}],
            "model": [{"say": "Your order ships on Friday."}, {"say": "Would you like a callback?"}],
        },
    )
    session = client.create_session("You are the order desk.")
    call_id = client.connect(session["id"])["call_id"]
    assert wait_until(lambda: client.session(session["id"])["status"] == "listening", 20)

    said = client.agent_say(session["id"], "Your order ships on Friday.")
    assert said["status"] == "speaking"
    status, busy = client.request(
        "POST", f"/v1/sessions/{session['id']}/agent/reply", {"instructions": "Offer a callback."}
    )
    if status == 409:
        assert busy["error"]["code"] == "agent_busy"
    assert wait_until(lambda: client.session(session["id"])["status"] == "listening", 20)
    if status == 409:
        assert client.agent_reply(session["id"], "Offer a callback.")["status"] == "replying"
    assert wait_until(
        lambda: (
            len([t for t in client.session(session["id"])["transcript"] if t["role"] == "assistant"]) == 2
        ),
        20,
    )
    for path, body in (("agent/say", {"text": "  "}), ("agent/reply", {}), ("agent/say", {"words": "x"})):
        got, answer = client.request("POST", f"/v1/sessions/{session['id']}/{path}", body)
        assert (got, answer["error"]["code"]) == (422, "malformed_request"), (path, body)

    client.end(session["id"])
    client.wait_for_status(session["id"], timeout_s=30)
    got, answer = client.request("POST", f"/v1/sessions/{session['id']}/agent/say", {"text": "Hello?"})
    assert (got, answer["error"]["code"]) == (409, "session_ended")

    log = simulator_call(stack, call_id)
    assert log["errors"] == []
    creates = [e["control"] for e in log["controls"] if e["control"]["type"] == "response.create"]
    for control in creates:
        assert wire_errors(control, direction="client") == [], control
    assert creates[0]["response"]["instructions"] == SAY_EXACTLY.format(text="Your order ships on Friday.")
    assert creates[0]["response"]["tool_choice"] == "none"
    assert creates[1]["response"]["instructions"].endswith("\n\nOffer a callback.")
    story = client.request("GET", f"/v1/sessions/{session['id']}/log")[1]["entries"]
    assert [e["data"]["text"] for e in story if e["kind"] == "turn.agent"] == [
        "Your order ships on Friday.",
        "Would you like a callback?",
    ]
    assert story[-1]["data"]["ended_by"] == "app"
