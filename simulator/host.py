"""A minimal host that drives a simulated call the way Switchboard does, and records it.

It attaches to the sideband, configures the session (host-driven responses), asks for a response
after each final user transcript, and answers each function call with a canned output before
asking again. Tests use it as the other end of a call; `python -m simulator.host` writes a
recording of a scripted call for playback mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from simulator.models import DEFAULT_TRANSCRIPTION_MODEL
from simulator.recording import record_call
from simulator.script import load_script
from simulator.server import Simulator

INSTRUCTIONS = "You are the order desk of a small shop. Answer briefly and politely."
LOOKUP_ORDER_TOOL = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order's shipping status by its number.",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
}
# What every function call returns here; the simulator's model does not read it.
CANNED_TOOL_OUTPUT = {"status": "shipped", "eta": "Friday"}
# Switchboard's per-response output budget.
MAXIMUM_OUTPUT_TOKENS = 1024


def session_update(instructions: str = INSTRUCTIONS) -> dict[str, Any]:
    """The session.update a host sends first: its instructions and tools, host-driven turns."""
    return {
        "type": "session.update",
        "session": {
            "type": "realtime",
            "instructions": instructions,
            "tools": [LOOKUP_ORDER_TOOL],
            "tool_choice": "auto",
            "audio": {
                "input": {
                    "transcription": {"model": DEFAULT_TRANSCRIPTION_MODEL},
                    "turn_detection": {
                        "type": "server_vad",
                        "create_response": False,
                        "interrupt_response": True,
                    },
                },
                "output": {"voice": "marin"},
            },
        },
    }


def response_create(instructions: str = INSTRUCTIONS) -> dict[str, Any]:
    """The response.create a host sends to answer the caller."""
    return {
        "type": "response.create",
        "response": {
            "instructions": instructions,
            "max_output_tokens": MAXIMUM_OUTPUT_TOKENS,
            "tool_choice": "auto",
        },
    }


def completed_function_calls(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The function calls a completed response.done asks the host to run."""
    response = event.get("response") or {}
    if response.get("status") != "completed":
        return []
    return [item for item in response.get("output") or [] if item.get("type") == "function_call"]


async def host_call(
    ws_url: str, call_id: str, *, api_key: str = "sk-sim", instructions: str = INSTRUCTIONS
) -> list[dict[str, Any]]:
    """Drive the call until the provider closes the sideband; answer every event received."""
    received: list[dict[str, Any]] = []
    headers = {"Authorization": f"Bearer {api_key}"}
    async with connect(f"{ws_url}/realtime?call_id={call_id}", additional_headers=headers) as ws:
        await ws.send(json.dumps(session_update(instructions)))
        async for message in ws:
            event = json.loads(message)
            received.append(event)
            if event["type"] == "conversation.item.input_audio_transcription.completed":
                await ws.send(json.dumps(response_create(instructions)))
            elif event["type"] == "response.done" and completed_function_calls(event):
                for call in completed_function_calls(event):
                    output = {
                        "type": "function_call_output",
                        "call_id": call["call_id"],
                        "output": json.dumps(CANNED_TOOL_OUTPUT),
                    }
                    await ws.send(json.dumps({"type": "conversation.item.create", "item": output}))
                await ws.send(json.dumps(response_create(instructions)))
    return received


async def record_scripted_call(script: str | Path, *, description: str = "") -> list[str]:
    """Run one call of `script` against `host_call` and answer its recording lines."""
    call_script = load_script(script)
    simulator = Simulator(call_script)
    await simulator.start()
    try:
        call_id = simulator.create_call()
        await host_call(simulator.ws_url, call_id)
        log = simulator.calls[call_id]
        if log.errors:
            raise RuntimeError(f"the recorded call broke the wire oracle: {log.errors}")
        # This host is not Switchboard: its controls would hold a replay to what it sent.
        return record_call(
            log.as_json(),
            name=call_script.name,
            instructions=INSTRUCTIONS,
            description=description,
            with_controls=False,
        )
    finally:
        await simulator.stop()


def main() -> None:
    """Write the recording of one scripted call: `python -m simulator.host --script … --out …`."""
    parser = argparse.ArgumentParser(prog="python -m simulator.host", description=main.__doc__)
    parser.add_argument("--script", default="three_turn")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--description", default="")
    arguments = parser.parse_args()
    lines = asyncio.run(record_scripted_call(arguments.script, description=arguments.description))
    arguments.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} lines to {arguments.out}")


if __name__ == "__main__":
    main()
