"""A reasoning model's response shapes end to end (PROTOCOL.md §4.5): on gpt-realtime-2.1 one
response speaks a preamble before its function call, the next speaks two messages. Switchboard
keeps every spoken message in order, answers the call once, and the call goes on."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from simulator.oracle import wire_errors
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script, simulator_call

MODEL = "gpt-realtime-2.1"
ASK = "Where is my order 4417?"
THANKS = "Thanks, that is all."
# A reasoning model's two shapes: a preamble before a function call, then two messages.
SCRIPT = SCRIPTS / "preambles.json"


@pytest.fixture(scope="module")
def reasoning_stack(services: Services, namespace: str) -> Iterator[Stack]:
    """A stack whose Realtime calls run on a reasoning model."""
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-reasoning",
        extra_env={"SWITCHBOARD_PROVIDER_MODEL": MODEL},
    ) as running:
        running.start(workers=1)
        yield running


def test_preambles_are_kept_in_order_and_the_tool_is_answered_once(reasoning_stack: Stack) -> None:
    """The preamble before the call, then both messages of the next response, land in the durable
    transcript in the order spoken; lookup_order runs and is answered exactly once, one
    response.create follows it, and the caller's next turn is answered."""
    client = Client(reasoning_stack.api_url, reasoning_stack.api_token)
    set_script(reasoning_stack, SCRIPT)
    session = client.create_session("You are the order desk.", tools=["lookup_order"])
    call_id = client.connect(session["id"])["call_id"]
    client.wait_for_status(session["id"], timeout_s=60)
    record = client.session(session["id"], events=True)
    log = simulator_call(reasoning_stack, call_id)

    assert log["errors"] == []
    events = [entry["event"] for entry in log["events"]]
    assert {e["session"]["model"] for e in events if e["type"] == "session.updated"} == {MODEL}
    calling = next(e for e in events if e["type"] == "response.done")["response"]["output"]
    assert [item["type"] for item in calling] == ["message", "function_call"]

    controls = [entry["control"] for entry in log["controls"]]
    for control in controls:
        assert wire_errors(control, direction="client") == [], control
    assert [c["type"] for c in controls] == [
        "session.update",
        "response.create",
        "conversation.item.create",
        "response.create",
        "response.create",
    ]
    output = controls[2]["item"]
    assert output["call_id"] == calling[1]["call_id"]
    assert json.loads(output["output"])["status"] == "succeeded"
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("lookup_order", "succeeded")]

    assert [(item["role"], item["text"]) for item in record["transcript"]] == [
        ("user", ASK),
        ("assistant", "Let me check that order."),
        ("assistant", "Good news."),
        ("assistant", "It ships Friday."),
        ("user", THANKS),
        ("assistant", "You're welcome, goodbye."),
    ]
    assert record["status"] == "ended"
