"""The requests an app or a person makes of a session — the app's say, reply, prompt and tool
changes, hold, attention, keypad collection, typed text, interrupt, compaction and end, and a
supervisor's verbs — as the session's log holds them, and how each is made again through the API.

`sessions export` writes them into a recording (`request` lines) so that `switchboard replay`
makes them again at their place: a call whose app said something, or ended it, replays to the
controls it sent. What the gateway added to a request (who waits for the answer, what was playing
when it came) is the gateway's and is measured afresh, so a recording does not carry it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from pipeline.session.wire import (
    AgentReplyRequested,
    AgentSayRequested,
    AttentionRequested,
    CollectRequested,
    CompactionRequested,
    EndRequested,
    HoldRequested,
    InterruptRequested,
    PromptSetRequested,
    SupervisorRequested,
    TextInjected,
    ToolsSetRequested,
)

# What the gateway adds to a request as it numbers it: who waits for the answer, and what was
# playing when it came (a replaying gateway measures its own).
_GATEWAY_FIELDS = frozenset({"request_id", "gateway_id", "playback"})


def _kind(model: Any) -> str:
    return str(model.model_fields["type"].default)


def _fields(request: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: request[name] for name in names if request.get(name) is not None}


# Each request's route under `/v1/sessions/{id}`, its method and its body, from the logged request.
_AS_API: dict[str, Callable[[dict[str, Any]], tuple[str, str, dict[str, Any] | None]]] = {
    _kind(EndRequested): lambda r: ("POST", "/end", _fields(r, "reason")),
    _kind(AgentSayRequested): lambda r: ("POST", "/agent/say", _fields(r, "text")),
    _kind(AgentReplyRequested): lambda r: ("POST", "/agent/reply", _fields(r, "instructions")),
    _kind(PromptSetRequested): lambda r: (
        "PUT",
        f"/prompt/{quote(str(r['name']), safe='')}",
        _fields(r, "text"),
    ),
    # Offered by name: the replaying deployment resolves them against its own registered tools.
    _kind(ToolsSetRequested): lambda r: ("PUT", "/tools", {"tools": [tool["name"] for tool in r["tools"]]}),
    _kind(HoldRequested): lambda r: ("POST", "/hold" if r["held"] else "/unhold", None),
    _kind(AttentionRequested): lambda r: ("POST", "/attention", _fields(r, "reason", "wait_s")),
    _kind(CollectRequested): lambda r: (
        "POST",
        "/collect",
        _fields(r, "tool", "prompt", "parameter", "arguments", "digits", "timeout_s"),
    ),
    _kind(SupervisorRequested): lambda r: ("POST", "/supervisor", _fields(r, "by", "verb")),
    _kind(TextInjected): lambda r: ("POST", "/caller/text", _fields(r, "text")),
    _kind(InterruptRequested): lambda r: ("POST", "/interrupt", None),
    _kind(CompactionRequested): lambda r: ("POST", "/compact", None),
}

# The logged types of the requests a recording carries.
REQUEST_TYPES = frozenset(_AS_API)


def is_request(payload: dict[str, Any]) -> bool:
    """Whether a logged input is a request an app or a person made of the session."""
    return payload.get("type") in REQUEST_TYPES


def as_recorded(payload: dict[str, Any]) -> dict[str, Any]:
    """A logged request as a recording carries it: without what the gateway added."""
    return {key: value for key, value in payload.items() if key not in _GATEWAY_FIELDS}


def api_call(session_id: str, request: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    """The method, path and body that make a recorded request again for `session_id`
    (KeyError for a type that is not a request, `REQUEST_TYPES`)."""
    method, route, body = _AS_API[str(request.get("type"))](request)
    return method, f"/v1/sessions/{session_id}{route}", body
