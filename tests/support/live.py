"""Driving the simulated provider's Live mode from the end-to-end tests: its call script, the log
of a Live session, and phone calls announced with `live.transport.incoming`."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from simulator.live_oracle import live_wire_errors
from switchboard.stack import Stack

# A fast Live call: a word every 40 ms, the model's own answers 50 ms after the caller's last.
QUICK_TIMING = {"fragment_ms": 40, "reply_after_ms": 50, "answer_wait_ms": 8_000}


def _sim(stack: Stack, method: str, path: str, body: Any = None) -> Any:
    base = stack.simulator_url.removesuffix("/v1")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def set_live_script(stack: Stack, script: dict[str, Any]) -> None:
    """The Live call script for sessions created from now on."""
    _sim(stack, "PUT", "/_sim/live/script", {"timing": QUICK_TIMING, **script})


def live_session(stack: Stack, session_id: str) -> dict[str, Any]:
    """The simulator's log of one Live session: every event it sent, every control it received."""
    return dict(_sim(stack, "GET", f"/_sim/live/sessions/{session_id}"))


def ring_live(stack: Stack, to: str, **options: Any) -> str:
    """A Live phone call to `to` rings (its signed `live.transport.incoming` goes to the stack's
    gateway); answers the Live session's id."""
    body = {"to": to, "webhook_url": stack.webhook_url, "secret": stack.webhook_secret, **options}
    return str(_sim(stack, "POST", "/_sim/live/sip/calls", body)["session_id"])


def drop_live_sideband(stack: Stack, session_id: str, code: int = 1011) -> None:
    """Every sideband of the session is dropped, as a network fault would; the session goes on."""
    _sim(stack, "POST", f"/_sim/live/sessions/{session_id}/drop?code={code}")


def controls_of(log: dict[str, Any]) -> list[dict[str, Any]]:
    """The controls a Live session received, each checked strictly against `openai.types.live`."""
    controls = [entry["control"] for entry in log["controls"]]
    for control in controls:
        assert live_wire_errors(control, direction="client") == [], control
    return controls
