"""The Live API in the latency benchmark: a Live call's delegations, idle, on the simulator's
one clock — the delegation leaving the simulator → Switchboard's `thinking` note arriving (one
event → control hop, as a Realtime transcript → `response.create`) and → the delegation's one
terminal commentary arriving (the whole delegation: the task built from the durable transcript,
the handler run on tool_runs, its outcome back under the row lock).

The covering fragment is sent just before its delegation here, so the settle window never waits:
what is measured is Switchboard, not the provider's transcription lag."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from switchboard.client import Client
from switchboard.stack import Stack

LIVE_IDLE_DELEGATIONS = 30
# A word every 20 ms; the caller asks again 200 ms after the model said the last answer.
LIVE_TIMING = {"fragment_ms": 20, "reply_after_ms": 20, "answer_wait_ms": 5_000}
LIVE_CALL_TIMEOUT_S = 180.0
# The handler that answers at once: the figure is the path, not a handler's work.
HANDLER = "echo_task"


def live_script(delegations: int) -> dict[str, Any]:
    """One caller who asks for something `delegations` times, each ask a delegation."""
    asks = [
        {"say": f"please check order {4400 + n}", "after_ms": 200, "delegate": True}
        for n in range(delegations)
    ]
    return {
        "name": "bench-live-idle",
        "timing": LIVE_TIMING,
        "switches": {"covering_fragment_lag_ms": -10, "reflect_audio": False},
        "caller": [*asks, {"hangup": True, "after_ms": 200}],
        "model": [],
    }


def delegation_latencies_ms(log: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Per delegation of one Live session's simulator log: delegation sent → its thinking note
    received, and → its terminal commentary received (ms)."""
    sent = {
        entry["event"]["delegation"]["id"]: entry["t"]
        for entry in log["events"]
        if entry["event"].get("type") == "session.delegation.created"
    }
    thinking: list[float] = []
    commentary: list[float] = []
    for entry in log["controls"]:
        control = entry["control"] or {}
        delegated_at = sent.get(str(control.get("delegation_id")))
        if delegated_at is None:
            continue
        if control.get("type") == "session.thinking.append":
            thinking.append((entry["t"] - delegated_at) * 1000)
        elif control.get("type") == "session.commentary.append":
            commentary.append((entry["t"] - delegated_at) * 1000)
    return thinking, commentary


def measure_live_idle(
    stack: Stack, delegations: int = LIVE_IDLE_DELEGATIONS
) -> tuple[list[float], list[float]]:
    """One Live call of `delegations` delegations and nothing else running."""
    base = stack.simulator_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{base}/_sim/live/script", data=json.dumps(live_script(delegations)).encode(), method="PUT"
    )
    urllib.request.urlopen(request, timeout=10).close()
    client = Client(stack.api_url, stack.api_token)
    session = client.create_session(
        "You are a benchmark agent.", provider="live", live={"delegation": HANDLER}
    )
    live_id = client.connect(session["id"])["call_id"]
    deadline = time.monotonic() + LIVE_CALL_TIMEOUT_S
    while _get(base, f"/_sim/live/sessions/{live_id}/status")["status"] != "ended":
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Live call {live_id} did not end in {LIVE_CALL_TIMEOUT_S} s")
        time.sleep(0.25)
    client.wait_for_status(session["id"], timeout_s=10)
    return delegation_latencies_ms(_get(base, f"/_sim/live/sessions/{live_id}"))


def _get(base: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}{path}", timeout=30) as response:
        return dict(json.loads(response.read()))
