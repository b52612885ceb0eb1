"""What the latency bench (bench.latency) and its peer (bench.peer) share: the simulator's
control API at a base URL (the call script, a call's log and status), and a function call's
turnaround read from a call's log."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def tool_turnaround_ms(call: dict[str, Any], record: dict[str, Any]) -> list[float]:
    """Arguments done → the response.create after the call's output, minus the tool's own run
    time: what Switchboard adds to a function call."""
    run_ms = {step["call_id"]: step["elapsed_ms"] or 0.0 for step in record["tool_steps"]}
    asked = {
        e["event"]["call_id"]: e["t"]
        for e in call["events"]
        if e["event"]["type"] == "response.function_call_arguments.done"
    }
    turnarounds = []
    answered_call: str | None = None
    for entry in call["controls"]:
        control = entry["control"]
        if (
            control["type"] == "conversation.item.create"
            and control["item"].get("type") == "function_call_output"
        ):
            answered_call = control["item"]["call_id"]
        elif control["type"] == "response.create" and answered_call in asked:
            assert answered_call is not None
            turnarounds.append((entry["t"] - asked[answered_call]) * 1000 - run_ms.get(answered_call, 0.0))
            answered_call = None
    return turnarounds


def put_script_at(base: str, script: dict[str, Any]) -> None:
    """Set the simulator's call script (the simulator's control API at `base`)."""
    request = urllib.request.Request(f"{base}/_sim/script", data=json.dumps(script).encode(), method="PUT")
    urllib.request.urlopen(request, timeout=10).close()


def call_log_at(base: str, call_id: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/_sim/calls/{call_id}", timeout=30) as response:
        return dict(json.loads(response.read()))


def call_status_at(base: str, call_id: str) -> str:
    with urllib.request.urlopen(f"{base}/_sim/calls/{call_id}/status", timeout=30) as response:
        return str(json.loads(response.read())["status"])
