"""A spoken call end to end: simulator → gateway → queues → worker → PostgreSQL → gateway →
simulator, every process real."""

from __future__ import annotations

from typing import Any

from simulator.oracle import wire_errors
from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script, simulator_call

INSTRUCTIONS = "You are the order desk. Answer briefly."


def _place_call(client: Client) -> tuple[dict[str, Any], str]:
    session = client.create_session(INSTRUCTIONS, limits={"max_output_tokens": 512})
    answer = client.connect(session["id"])
    record = client.wait_for_status(session["id"], timeout_s=60)
    return record, answer["call_id"]


def test_a_three_turn_spoken_call_sends_the_exact_controls_and_lands_every_transcript(
    stack: Stack, client: Client
) -> None:
    """Three caller turns produce one session.update and three response.create carrying the
    captured context, in order, and six durable transcript items."""
    set_script(stack, SCRIPTS / "spoken_call.json")
    record, call_id = _place_call(client)

    assert record["status"] == "ended"
    assert record["end_reason"] == "caller_hung_up"
    call = simulator_call(stack, call_id)
    controls = [entry["control"] for entry in call["controls"]]
    response = {"instructions": INSTRUCTIONS, "max_output_tokens": 512, "tool_choice": "auto"}
    assert [(c["type"], c.get("response")) for c in controls] == [
        ("session.update", None),
        ("response.create", response),
        ("response.create", response),
        ("response.create", response),
    ]
    assert controls[0]["session"]["audio"]["input"]["turn_detection"]["create_response"] is False
    assert len({c["event_id"] for c in controls}) == len(controls)
    assert call["errors"] == []

    full = client.session(record["id"], events=True)
    assert [(item["role"], item["text"]) for item in full["transcript"]] == [
        ("user", "Hi, I'd like to check on an order."),
        ("assistant", "Of course. What's the order number?"),
        ("user", "It's order 4417, placed last Tuesday."),
        ("assistant", "Thanks. Order 4417 shipped yesterday and should arrive on Friday."),
        ("user", "Great, that's all I needed. Thanks!"),
        ("assistant", "You're welcome. Have a great day!"),
    ]
    assert full["usage"]["responses"] == 3
    assert full["incidents"] == []
    assert set(full["events"]) == {"applied"}
    emitted = [
        item["control"] for event in full["log"] for item in event["controls"] if item["kind"] == "control"
    ]
    assert emitted == controls


def test_every_control_and_every_simulator_event_passes_the_wire_oracle(stack: Stack, client: Client) -> None:
    """The controls Switchboard sent and the events the simulator sent validate strictly
    against the openai package's Realtime types."""
    set_script(stack, SCRIPTS / "spoken_call.json")
    _, call_id = _place_call(client)
    call = simulator_call(stack, call_id)
    assert call["controls"]
    for entry in call["controls"]:
        assert wire_errors(entry["control"], direction="client") == [], entry["control"]
    for entry in call["events"]:
        assert wire_errors(entry["event"], direction="server") == [], entry["event"]
