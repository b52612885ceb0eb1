"""Every session's export replays to its controls.

A property over sessions of every kind the project makes: each shipped recording replayed (the
Realtime and Live ones, with the host's controls and without, the captured streams another
program hosted), and calls placed here in which the app said something, the app ended the call,
and the model called a tool. Each session is exported (`switchboard sessions export`) and the
export replayed closed loop as fast as possible: it must finish (a gate it waits on in vain fails
it) and send exactly the controls the session sent. Ids aside: which input sends a tool's output,
and the seqs of a Live call's transcript pieces, are races a replay does not repeat."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from simulator.recording import read_recording
from switchboard.client import Client
from switchboard.replay import emitted_controls
from switchboard.services import Services
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import set_script
from tests.e2e.replays import RECORDINGS, export, replay, side_by_side, without_ids

CAPTURED = RECORDINGS / "captured"
SHIPPED = {
    "spoken_call": RECORDINGS / "spoken_call.jsonl",
    "three_turn": RECORDINGS / "three_turn.jsonl",
    "order_lookup": RECORDINGS / "order_lookup.jsonl",
    "client_response_tool": RECORDINGS / "client_response_tool.jsonl",
    "live_order_lookup": RECORDINGS / "live_order_lookup.jsonl",
    "tool_call_round": CAPTURED / "tool_call_round.jsonl",
    "sideband_text_turn": CAPTURED / "sideband_text_turn.jsonl",
    "live_bound_history": CAPTURED / "live_bound_history.jsonl",
}
# The captured tool call's session offers `get_weather` (tests/tools/weather_tools.py).
TOOLS = {"SWITCHBOARD_TOOL_MODULES": "workers.tools.reference,tests.tools.weather_tools"}
# Replays at once: each is a stack of its own, and the PostgreSQL they share is other runs' too.
AT_ONCE = 4

INSTRUCTIONS = "You are the order desk of a kitchenware shop."
TIMING = {"delta_interval_ms": 10, "chars_per_delta": 12, "speech_ms": 200}
# The app acts in the pause after the agent's first answer, before the caller's second line.
PAUSE_MS = 2_500
TWO_LINES = [
    {"say": "Hi, is my order 4417 on its way?", "after_ms": 150},
    {"say": "Thanks, bye.", "after_ms": PAUSE_MS},
    {"hangup": True, "after_ms": 300},
]


def _said_once(client: Client, session_id: str) -> bool:
    record = client.session(session_id)
    return record["status"] == "listening" and any(
        line["role"] == "assistant" for line in record["transcript"]
    )


def _placed_call(client: Client, stack: Stack, script: dict[str, Any], app: str, **spec: Any) -> str:
    """A call on the stack's simulator with `script`; after the agent's first answer the app
    says something (`say`), ends the call (`end`), or does nothing. Answers the session id."""
    set_script(stack, script)
    session = client.create_session(INSTRUCTIONS, **spec)
    client.connect(session["id"])
    if app != "nothing":
        assert wait_until(lambda: _said_once(client, session["id"]), 30)
    if app == "say":
        client.agent_say(session["id"], "Your order ships on Friday.")
    elif app == "end":
        client.end(session["id"])
    assert client.wait_for_status(session["id"], timeout_s=90)["status"] == "ended"
    return str(session["id"])


def _synthesized(client: Client, stack: Stack) -> dict[str, str]:
    """Calls placed here, by name: their session ids."""
    answers = [{"say": "Let me look."}, {"say": "It ships Friday."}, {"say": "Goodbye."}]
    with_a_tool = {
        "name": "tool",
        "timing": TIMING,
        "caller": [{"say": "Where is my order 4417?", "after_ms": 150}, *TWO_LINES[1:]],
        "model": [
            {"function_call": {"name": "lookup_order", "arguments": {"order_id": "4417"}}},
            {"say": "It ships Friday."},
            {"say": "Goodbye."},
        ],
    }
    return {
        "app_say": _placed_call(
            client, stack, {"name": "say", "timing": TIMING, "caller": TWO_LINES, "model": answers}, "say"
        ),
        "app_end": _placed_call(
            client, stack, {"name": "end", "timing": TIMING, "caller": TWO_LINES, "model": answers}, "end"
        ),
        "tool": _placed_call(client, stack, with_a_tool, "nothing", tools=["lookup_order"]),
    }


@pytest.fixture(scope="module")
def exported_and_replayed(
    services: Services, stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[list[dict[str, Any]], Path, list[dict[str, Any]]]]:
    """For every session: the controls it sent, its export, and what replaying the export as
    fast as possible printed. The shipped recordings are replayed side by side (`AT_ONCE` at a
    time), the calls placed, then every export replayed side by side."""
    client = Client(stack.api_url, stack.api_token, stack.live_url)
    first = side_by_side(
        {name: partial(replay, services, path, "0", env=TOOLS) for name, path in SHIPPED.items()}, AT_ONCE
    )
    placed = _synthesized(client, stack)
    missing = sorted(set(SHIPPED) - set(first))
    assert not missing, f"replays that did not finish: {missing}"
    sent = {name: printed[:-1] for name, printed in first.items()}
    made = {name: printed[-1]["summary"]["session_id"] for name, printed in first.items()}
    for name, session_id in placed.items():
        sent[name] = emitted_controls(client.session(session_id, events=True))
        made[name] = session_id
    folder = tmp_path_factory.mktemp("exports")
    exports = {
        name: export(services, session_id, folder / f"{name}.jsonl") for name, session_id in made.items()
    }
    again = side_by_side(
        {name: partial(replay, services, path, "0", env=TOOLS) for name, path in exports.items()}, AT_ONCE
    )
    return {name: (sent[name], exports[name], again[name]) for name in exports if name in again}


@pytest.mark.parametrize("name", [*SHIPPED, "app_say", "app_end", "tool"])
def test_every_session_s_export_replays_to_its_controls(
    exported_and_replayed: dict[str, tuple[list[dict[str, Any]], Path, list[dict[str, Any]]]], name: str
) -> None:
    """The export of the session replays closed loop, as fast as possible, to the controls the
    session sent (a replay that waited in vain for one would have failed, exit 1)."""
    assert name in exported_and_replayed, f"the export of {name} did not replay"
    sent, exported, (*controls, last) = exported_and_replayed[name]
    assert sent, "the session sent no control"
    assert without_ids(controls) == without_ids(sent)
    recording = read_recording(exported)
    assert recording.header.host == "switchboard"
    assert without_ids([placed.line.control for placed in recording.controls]) == without_ids(sent)
    requests = [placed.line.request["type"] for placed in recording.requests]
    if name == "app_say":
        assert requests == ["switchboard.agent_say"]
        asked = [c["response"]["instructions"] for c in controls if c["type"] == "response.create"]
        assert any(instructions.endswith("Your order ships on Friday.") for instructions in asked)
    elif name == "app_end":
        assert requests == ["switchboard.end_requested"]
        assert (last["summary"]["status"], last["summary"]["end_reason"]) == ("ended", "app_ended")
    else:
        assert requests == []
