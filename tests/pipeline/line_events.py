"""Builders of the operator's requests as the gateway numbers them into a session's log."""

from __future__ import annotations

import itertools
from typing import Any

_requests = itertools.count(1)

SUPERVISOR = {"id": "sup_1", "name": "Dana"}
OTHER_SUPERVISOR = {"id": "sup_2", "name": "Lee"}


def _asked(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "request_id": f"req_{next(_requests)}", "gateway_id": "gw1"}


def hold(held: bool = True) -> dict[str, Any]:
    return _asked({"type": "switchboard.hold", "held": held})


def attention(reason: str = "billing dispute", wait_s: float = 30.0) -> dict[str, Any]:
    return _asked({"type": "switchboard.attention", "reason": reason, "wait_s": wait_s})


def supervisor(verb: dict[str, Any], by: dict[str, str] | None = None) -> dict[str, Any]:
    return _asked({"type": "switchboard.supervisor", "by": by or SUPERVISOR, "verb": verb})


def prompt_set(name: str, text: str) -> dict[str, Any]:
    return _asked({"type": "switchboard.prompt_set", "name": name, "text": text})


def tools_set(*tools: dict[str, Any]) -> dict[str, Any]:
    return _asked(
        {
            "type": "switchboard.tools_set",
            "tools": list(tools),
            "catalog_digest": "sha256:new" if tools else "",
            "tool_versions": {tool["name"]: "2" for tool in tools},
            "tool_side_effects": {tool["name"]: "read_only" for tool in tools},
        }
    )


def transfer_finished(to: str, ok: bool = True, error: str | None = None) -> dict[str, Any]:
    return {"type": "switchboard.transfer_finished", "to": to, "ok": ok, "error": error}
