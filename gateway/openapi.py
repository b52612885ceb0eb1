"""The gateway's API described as OpenAPI 3.1, served at `GET /openapi.json` (and read by `/docs`).

Request bodies are the JSON Schemas of the pydantic models the handlers validate with, so a
field added to a model is in the spec at once. The operations are listed here, one line each;
`tests/gateway/test_openapi.py` walks the app's Starlette routes and fails on a route this
table does not describe (and on an operation that no route serves), so the two cannot drift.
Schemathesis checks the answers against it on a live gateway (`tests/e2e/test_openapi.py`).

Answers are described by their main success shape and by the error shape every refusal has,
`{"error": {"code", "message"}}`, with the codes each status can carry for the operation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from pipeline.api import (
    SDP_OFFER,
    AgentReply,
    AgentSay,
    AttentionSpec,
    CollectSpec,
    ConnectRequest,
    EndRequest,
    PromptText,
    RouteSpec,
    SessionSpec,
    SupervisorCommand,
    ToolsChange,
    TypedText,
)
from pipeline.outbound.specs import CallSpec, CampaignSpec, ContactsPage, SuppressionSpec, TrunkSpec
from pipeline.pages import DEFAULT_LIMIT, MAXIMUM_LIMIT, MAXIMUM_LIMIT_OF
from pipeline.timestamps import RFC3339_UTC

VERSION = "0.2.0"
REF = "#/components/schemas/{model}"

Security = Literal["key", "open", "webhook", "live"]
# Tags group the operations on /docs as the README's API section does.
Tag = Literal["sessions", "verbs", "phone", "outbound", "admin", "service"]


@dataclass(frozen=True)
class Query:
    """One query parameter (every one is optional)."""

    name: str
    description: str
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})


@dataclass(frozen=True)
class Operation:
    """One method on one path: what it takes, its success answer and its error codes by status."""

    method: str
    path: str
    summary: str
    tag: Tag
    success: dict[int, str]
    body: type[BaseModel] | None = None
    errors: dict[int, tuple[str, ...]] = field(default_factory=dict)
    query: tuple[Query, ...] = ()
    security: Security = "key"
    # The success answer's schema (a component's name, or one by status); any object otherwise.
    answer: str | dict[int, str] | None = None
    # A verb that takes no body at all (`{}` or nothing).
    empty_body: bool = False
    # Where a 201 says the created resource is (its `Location` header).
    location: str | None = None


# ── the answers' shapes ────────────────────────────────────────────────────────────────

_OBJECT: dict[str, Any] = {"type": "object"}
# A point in time, as every answer writes one (pipeline.timestamps: RFC 3339 UTC, microseconds).
_TIME: dict[str, Any] = {
    "type": "string",
    "format": "date-time",
    "pattern": f"^{RFC3339_UTC.pattern}$",
    "examples": ["2026-12-04T23:37:51.123456Z"],
}
_ANSWERS: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object",
        "description": "Every refusal, a 500 included.",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "status": {
                        "type": "string",
                        "description": "the session's status (a refusal for its state)",
                    },
                    "end_reason": {
                        "type": ["string", "null"],
                        "description": "`session_ended`: how the session ended (docs/api.md, Endings)",
                    },
                },
            }
        },
    },
    "Health": {
        "type": "object",
        "required": ["status", "gateway"],
        "properties": {"status": {"const": "ok"}, "gateway": {"type": "string"}},
    },
    "Ready": {
        "type": "object",
        "required": ["status", "gateway"],
        "properties": {"status": {"const": "ready"}, "gateway": {"type": "string"}},
    },
    "LiveCredentials": {
        "type": "object",
        "description": "A live token for one session's stream (valid 10 minutes).",
        "required": ["token", "expires_at", "path"],
        "properties": {
            "token": {"type": "string"},
            "expires_at": _TIME,
            "path": {"type": "string"},
        },
    },
    "LiveToken": {
        "type": "object",
        "required": ["session_id", "token", "expires_at", "path"],
        "properties": {
            "session_id": {"type": "string"},
            "token": {"type": "string"},
            "expires_at": _TIME,
            "path": {"type": "string"},
        },
    },
    "Session": {
        "type": "object",
        "description": "A session's durable record (README: `GET /v1/sessions/{id}`).",
        "required": ["id", "status", "created_at"],
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string"},
            "end_reason": {"type": ["string", "null"], "description": 'docs/api.md, "Endings"'},
            "created_at": _TIME,
            "ended_at": {"anyOf": [_TIME, {"type": "null"}]},
        },
    },
    "SessionCreated": {
        "type": "object",
        "required": ["id", "status", "live"],
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string"},
            "live": {"$ref": "#/components/schemas/LiveCredentials"},
        },
    },
    "SessionPage": {
        "type": "object",
        "required": ["sessions", "counts", "calls", "next"],
        "properties": {
            "sessions": {"type": "array", "items": {"$ref": "#/components/schemas/Session"}},
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "calls": {"type": "object", "additionalProperties": {"type": "integer"}},
            "next": {"type": ["string", "null"], "description": "the cursor of the next page"},
        },
    },
    "CallLog": {
        "type": "object",
        "required": ["session_id", "entries", "ended"],
        "properties": {
            "session_id": {"type": "string"},
            "entries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["seq", "at", "kind", "data"],
                    "properties": {"seq": {"type": "integer"}, "at": _TIME, "kind": {"type": "string"}},
                },
            },
            "ended": {"type": "boolean"},
        },
    },
    "Queued": {
        "type": "object",
        "description": "A verb's answer: what the worker that applied it said, or that it is queued.",
        "required": ["status"],
        "properties": {"session_id": {"type": "string"}, "status": {"type": "string"}},
    },
    "Compaction": {
        "type": "object",
        "description": "A compaction cycle's outcome (`compacted: false` with the guard's reason).",
        "required": ["session_id", "compacted", "reason"],
        "properties": {
            "session_id": {"type": "string"},
            "compacted": {"type": "boolean"},
            "reason": {"type": ["string", "null"]},
            "items_before": {"type": "integer"},
            "items_deleted": {"type": "integer"},
            "items_after": {"type": "integer"},
            "summary_length": {"type": "integer"},
        },
    },
    "Me": {
        "type": "object",
        "required": ["name", "role", "may"],
        "properties": {
            "name": {"type": "string"},
            "role": {"enum": ["app", "supervisor", "viewer", "admin"]},
            "may": {"type": "object", "additionalProperties": {"type": "boolean"}},
        },
    },
    "Queue": {
        "type": "object",
        "required": ["waiting", "held", "struggling"],
        "properties": {
            "waiting": {"type": "array", "items": {"type": "object"}},
            "held": {"type": "array", "items": {"type": "object"}},
            "struggling": {"type": "array", "items": {"type": "object"}},
        },
    },
    "Connected": {
        "type": "object",
        "required": ["session_id", "call_id", "sdp"],
        "properties": {
            "session_id": {"type": "string"},
            "call_id": {"type": "string"},
            "sdp": {"type": "string"},
        },
    },
}

_NEXT = {"type": ["string", "null"], "description": "the cursor of the next page (null: the last page)"}


def _list_page(field_name: str, description: str, *more: str) -> dict[str, Any]:
    """A page of a list: its items under the list's own name, beside `next`."""
    return {
        "type": "object",
        "description": description,
        "required": [field_name, *more, "next"],
        "properties": {field_name: {"type": "array", "items": _OBJECT}, "next": _NEXT},
    }


_ANSWERS.update(
    {
        "RoutePage": _list_page("routes", "A page of routes, and refused calls counted by why.", "refused"),
        "CampaignPage": _list_page("campaigns", "A page of campaigns."),
        "ContactPage": _list_page("contacts", "A page of a campaign's contacts."),
        "TrunkPage": _list_page("trunks", "A page of trunks."),
        "SuppressionPage": _list_page("suppressions", "A page of suppressed numbers."),
        "DeadLetterPage": _list_page("dead_letters", "A page of dead letters."),
    }
)
_ANSWERS["SessionPage"]["properties"]["next"] = _NEXT

# ── the operations ─────────────────────────────────────────────────────────────────────

S = "/v1/sessions/{session_id}"
# A verb's refusals besides the shared ones: an unknown session, one that is over, a worker
# that did not answer in time.
_VERB_ERRORS: dict[int, tuple[str, ...]] = {
    404: ("session_not_found", "not_found"),
    409: ("session_ended", "not_supported_on_live"),
}
# The verbs that need the call in progress (`pipeline.refusals.not_in_call`), and of those, the
# ones that go into the conversation (refused when the sideband was opened again meanwhile).
_NEEDS_THE_CALL = frozenset(
    {
        "/caller/text",
        "/agent/say",
        "/agent/reply",
        "/hold",
        "/unhold",
        "/attention",
        "/collect",
        "/supervisor",
        "/interrupt",
    }
)
_INTO_THE_CONVERSATION = frozenset({"/caller/text", "/interrupt"})


def _page(order: str, *, maximum: int = MAXIMUM_LIMIT, dated: bool = True) -> tuple[Query, ...]:
    """A list's paging parameters (`pipeline.pages`); `order` says what its pages follow."""
    limit = Query(
        "limit",
        f"at most this many (1 to {maximum:,}; {DEFAULT_LIMIT})",
        {"type": "integer", "minimum": 1, "maximum": maximum},
    )
    cursor = Query("cursor", f"the `next` of the page before (pages follow {order})")
    if not dated:
        return (limit, cursor)
    return (
        limit,
        cursor,
        Query("created_after", "created at or after this time: ISO 8601 (UTC when it names no zone)"),
        Query("created_before", "created before this time: ISO 8601 (UTC when it names no zone)"),
    )


def _verb(
    path: str,
    summary: str,
    body: type[BaseModel] | None,
    *errors: tuple[int, tuple[str, ...]],
    method: str = "POST",
    success: dict[int, str] | None = None,
    empty_body: bool = False,
    answer: str | dict[int, str] = "Queued",
) -> Operation:
    more = dict(_VERB_ERRORS)
    if path in _NEEDS_THE_CALL:
        errors = ((409, ("session_not_connected",)), *errors)
    if path in _INTO_THE_CONVERSATION:
        errors = ((409, ("call_reconnected",)), *errors)
    for status, codes in errors:
        more[status] = (*more.get(status, ()), *codes)
    return Operation(
        method,
        f"{S}{path}",
        summary,
        "verbs",
        success or {202: "asked for (or queued, if the worker takes longer than the wait)"},
        body=body,
        errors=more,
        answer=answer,
        empty_body=empty_body,
    )


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET", "/healthz", "The gateway is up", "service", {200: "up"}, security="open", answer="Health"
    ),
    Operation(
        "GET",
        "/readyz",
        "The gateway takes new calls (503 while it drains or cannot reach Redis)",
        "service",
        {200: "ready"},
        security="open",
        answer="Ready",
        errors={503: ("draining", "not_ready")},
    ),
    Operation("GET", "/openapi.json", "This document", "service", {200: "OpenAPI 3.1"}, security="open"),
    Operation("GET", "/docs", "This document as a page", "service", {200: "an HTML page"}, security="open"),
    Operation("GET", "/console", "The operator console", "service", {200: "an HTML page"}, security="open"),
    Operation(
        "GET",
        "/console/{asset}",
        "The console's and the docs page's scripts and styles",
        "service",
        {200: "a script or a style sheet"},
        errors={404: ("not_found",)},
        security="open",
    ),
    Operation(
        "GET",
        "/metrics",
        "The gateway's Prometheus metrics",
        "service",
        {200: "the Prometheus text format"},
        errors={404: ("metrics_off",)},
    ),
    Operation(
        "GET", "/v1/me", "Who the key is and what its role may do", "service", {200: "the key"}, answer="Me"
    ),
    # sessions
    Operation(
        "POST",
        "/v1/sessions",
        "Create a session",
        "sessions",
        {201: "the session record, with live credentials for its stream"},
        body=SessionSpec,
        errors={422: ("malformed_request", "unknown_tool", "events_url_unsupported")},
        answer="SessionCreated",
        location="/v1/sessions/{session_id}",
    ),
    Operation(
        "GET",
        "/v1/sessions",
        "Sessions, newest first, with the counts",
        "sessions",
        {200: "a page of sessions"},
        errors={422: ("malformed_request",)},
        query=(
            Query("status", "a status, or `live` (in a call) or `not_connected`"),
            Query("route", "a route's id"),
            Query("end_reason", "an end reason"),
            Query("q", "a search of the id, the numbers and the words said (≤ 200 characters)"),
            *_page("the creation time and the id, newest first"),
        ),
        answer="SessionPage",
    ),
    Operation(
        "GET",
        S,
        "A session's durable record",
        "sessions",
        {200: "the record"},
        errors={404: ("session_not_found", "not_found")},
        query=(Query("events", "`1` adds the event log", {"enum": ["0", "1"]}),),
        answer="Session",
    ),
    Operation(
        "DELETE",
        S,
        "Erase an ended session's content (admin)",
        "admin",
        {200: "what was removed"},
        errors={404: ("session_not_found", "not_found"), 409: ("session_live",)},
    ),
    Operation(
        "GET",
        f"{S}/log",
        "The call log: the call's story as ordered entries",
        "sessions",
        {200: "the entries after `after`"},
        errors={404: ("session_not_found", "not_found"), 422: ("malformed_request",)},
        query=(Query("after", "the entry number after which to start", {"type": "integer", "minimum": 0}),),
        answer="CallLog",
    ),
    Operation(
        "POST",
        f"{S}/connect",
        "Connect a WebRTC call: an SDP offer in, the provider's SDP answer out",
        "sessions",
        {201: "the SDP answer (JSON with `Accept: application/json`)"},
        body=ConnectRequest,
        location="/v1/sessions/{session_id}",
        errors={
            404: ("session_not_found", "not_found"),
            # Over (its end reason in `end_reason`), or connected already.
            409: ("session_ended", "admission_refused"),
            422: ("malformed_request",),
            502: ("provider_rejected_call", "provider_unavailable"),
        },
    ),
    Operation(
        "POST",
        f"{S}/live-token",
        "A fresh live token for the session's stream",
        "sessions",
        {201: "the token"},
        errors={404: ("session_not_found", "not_found"), 409: ("session_ended",)},
        answer="LiveToken",
        empty_body=True,
        # The stream the token opens; the token itself is only in the body.
        location="/v1/sessions/{session_id}/live",
    ),
    Operation(
        "GET",
        f"{S}/live",
        "The live stream (a WebSocket: transcript, controls and the call log as they happen)",
        "sessions",
        {101: "switching to the WebSocket protocol"},
        query=(Query("token", "the session's live token"),),
        security="live",
    ),
    _verb("/end", "End the call", EndRequest),
    _verb("/caller/text", "Typed text as the caller's message", TypedText, (429, ("rate_limited",))),
    _verb("/agent/say", "The agent says these words now", AgentSay, (409, ("agent_busy",))),
    _verb("/agent/reply", "The agent replies now, steered", AgentReply, (409, ("agent_busy",))),
    _verb(
        "/prompt/{name}",
        "Set one named block of the instructions",
        PromptText,
        (422, ("prompt_too_long", "too_many_blocks")),
        method="PUT",
        success={200: "changed or unchanged", 202: "queued"},
    ),
    _verb(
        "/tools",
        "Offer these registered tools from now on",
        ToolsChange,
        (409, ("tool_running",)),
        (422, ("unknown_tool",)),
        method="PUT",
        success={200: "changed", 202: "queued"},
    ),
    _verb(
        "/hold",
        "Hold the line",
        None,
        (409, ("collecting",)),
        success={200: "held", 202: "queued"},
        empty_body=True,
    ),
    _verb(
        "/unhold",
        "Give the line back",
        None,
        (409, ("collecting",)),
        success={200: "given back", 202: "queued"},
        empty_body=True,
    ),
    _verb(
        "/attention",
        "Hold the caller for a person",
        AttentionSpec,
        (409, ("already_waiting", "already_held", "collecting")),
    ),
    _verb(
        "/collect",
        "Have the caller key digits in for a tool",
        CollectSpec,
        (409, ("no_keypad", "already_collecting", "line_held", "already_held")),
        (422, ("unknown_tool", "tool_cannot_collect", "digits_in_arguments")),
    ),
    _verb(
        "/supervisor",
        "A supervisor's verb: say, whisper, take_over, release, end or transfer",
        SupervisorCommand,
        (409, ("already_held", "nobody_holds", "not_a_phone_call", "already_transferring")),
        success={200: "taken over or released", 202: "said, whispered, ended or transferring"},
    ),
    _verb("/interrupt", "Stop the response that is playing", None, empty_body=True),
    _verb(
        "/compact",
        "Force a compaction",
        None,
        success={200: "the compaction's outcome", 202: "still running"},
        empty_body=True,
        answer={200: "Compaction", 202: "Queued"},
    ),
    Operation("GET", "/v1/queue", "The desk's queue", "sessions", {200: "the queue"}, answer="Queue"),
    # phone
    Operation(
        "POST",
        "/v1/webhooks/openai",
        "The provider announces a phone call (signed)",
        "phone",
        {200: "recorded and answered"},
        errors={400: ("invalid_signature", "malformed_webhook", "webhooks_not_configured")},
        security="webhook",
    ),
    Operation(
        "GET",
        "/v1/routes",
        "Phone routes in number order, with refused webhooks counted",
        "phone",
        {200: "a page of routes"},
        query=_page("the number"),
        answer="RoutePage",
    ),
    Operation(
        "POST",
        "/v1/routes",
        "Add a route (or replace the one for its number)",
        "phone",
        {201: "the route"},
        body=RouteSpec,
        errors={422: ("malformed_request", "unknown_tool", "events_url_unsupported")},
        location="/v1/routes/{route_id}",
    ),
    Operation(
        "GET",
        "/v1/routes/{route_id}",
        "A route, with its calls counted",
        "phone",
        {200: "the route"},
        errors={404: ("route_not_found",)},
    ),
    Operation(
        "DELETE",
        "/v1/routes/{route_id}",
        "Remove a route",
        "phone",
        {200: "removed"},
        errors={404: ("route_not_found",)},
    ),
    Operation(
        "GET",
        "/v1/phone-calls/{call_id}",
        "What became of a phone call",
        "phone",
        {200: "its session, or why not"},
        errors={404: ("call_not_found",)},
    ),
    # outbound
    Operation(
        "POST",
        "/v1/calls",
        "Place one call",
        "outbound",
        {201: "the session and the call, dialing"},
        body=CallSpec,
        location="/v1/calls/{call_id}",
        errors={
            404: ("trunk_not_found",),
            409: ("not_supported_on_realtime", "suppressed", "no_room"),
            422: ("malformed_request",),
        },
    ),
    Operation(
        "GET",
        "/v1/calls/{call_id}",
        "An outbound call",
        "outbound",
        {200: "the call"},
        errors={404: ("call_not_found",)},
    ),
    Operation(
        "GET",
        "/v1/campaigns",
        "Campaigns, newest first",
        "outbound",
        {200: "a page of campaigns"},
        query=_page("the creation time and the id, newest first"),
        answer="CampaignPage",
    ),
    Operation(
        "POST",
        "/v1/campaigns",
        "Create a campaign",
        "outbound",
        {201: "the campaign and its counts"},
        body=CampaignSpec,
        errors={409: ("not_supported_on_realtime",), 422: ("malformed_request",)},
        location="/v1/campaigns/{campaign_id}",
    ),
    Operation(
        "GET",
        "/v1/campaigns/{campaign_id}",
        "A campaign",
        "outbound",
        {200: "the campaign"},
        errors={404: ("campaign_not_found", "not_found")},
    ),
    Operation(
        "GET",
        "/v1/campaigns/{campaign_id}/contacts",
        "A page of a campaign's contacts, in the campaign's order",
        "outbound",
        {200: "a page of contacts"},
        errors={404: ("campaign_not_found", "not_found"), 422: ("malformed_request",)},
        # A contact keeps no time it was added: no created_after / created_before.
        query=_page("the contact's position", maximum=MAXIMUM_LIMIT_OF["contacts"], dated=False),
        answer="ContactPage",
    ),
    Operation(
        "POST",
        "/v1/campaigns/{campaign_id}/contacts",
        "More contacts for a campaign (JSON, or CSV as `text/csv`)",
        "outbound",
        {200: "what was taken and what was refused"},
        body=ContactsPage,
        errors={
            404: ("campaign_not_found", "not_found"),
            409: ("campaign_over",),
            422: ("malformed_request",),
        },
        query=(Query("first_line", "a CSV's first data line (2)"),),
    ),
    Operation(
        "POST",
        "/v1/campaigns/{campaign_id}/{verb}",
        "Pause, resume or cancel a campaign",
        "outbound",
        {200: "the campaign"},
        errors={404: ("campaign_not_found", "not_found"), 409: ("campaign_over",)},
        empty_body=True,
    ),
    Operation(
        "GET",
        "/v1/trunks",
        "SIP trunks in name order (never their passwords)",
        "outbound",
        {200: "a page of trunks"},
        query=_page("the name"),
        answer="TrunkPage",
    ),
    Operation(
        "POST",
        "/v1/trunks",
        "Add a SIP trunk (or replace the one of its name)",
        "outbound",
        {200: "replaced", 201: "added"},
        body=TrunkSpec,
        errors={422: ("malformed_request",)},
        location="/v1/trunks/{name}",
    ),
    Operation(
        "GET",
        "/v1/trunks/{name}",
        "A SIP trunk (never its password)",
        "outbound",
        {200: "the trunk"},
        errors={404: ("trunk_not_found", "not_found")},
    ),
    Operation(
        "DELETE",
        "/v1/trunks/{name}",
        "Remove a SIP trunk",
        "outbound",
        {200: "removed"},
        errors={404: ("trunk_not_found", "not_found")},
    ),
    Operation(
        "GET",
        "/v1/suppressions",
        "Numbers never dialled, in number order",
        "outbound",
        {200: "a page of numbers"},
        errors={422: ("malformed_request",)},
        query=_page("the number", maximum=MAXIMUM_LIMIT_OF["suppressions"]),
        answer="SuppressionPage",
    ),
    Operation(
        "POST",
        "/v1/suppressions",
        "Never dial this number again",
        "outbound",
        {200: "it was already", 201: "added"},
        body=SuppressionSpec,
        errors={422: ("malformed_request", "malformed_number")},
        location="/v1/suppressions/{number}",
    ),
    Operation(
        "GET",
        "/v1/suppressions/{number}",
        "A number never dialled (in any spelling): why, by whom, since when",
        "outbound",
        {200: "the suppression"},
        errors={404: ("suppression_not_found",), 422: ("malformed_number",)},
    ),
    Operation(
        "DELETE",
        "/v1/suppressions/{number}",
        "Dial this number again (admin; in any spelling)",
        "outbound",
        {200: "removed"},
        errors={404: ("suppression_not_found",), 422: ("malformed_number",)},
    ),
    # admin
    Operation(
        "DELETE",
        "/v1/callers/{number}",
        "Erase every ended session of a caller's number, and the number from its calls turned away",
        "admin",
        {200: "what was erased"},
        errors={422: ("malformed_number",)},
    ),
    Operation(
        "GET",
        "/v1/dead-letters",
        # They are kept in Redis, not with a creation time: their time is when each was
        # dead-lettered, which created_after / created_before filter on.
        "Dead letters, oldest first (their time is when each was dead-lettered)",
        "admin",
        {200: "a page of dead letters"},
        query=_page("the time each was dead-lettered and the id, oldest first"),
        answer="DeadLetterPage",
    ),
    Operation(
        "GET",
        "/v1/dead-letters/{letter_id}",
        "A dead letter, with what a replay would do",
        "admin",
        {200: "the letter"},
        errors={404: ("dead_letter_not_found",)},
    ),
    Operation(
        "DELETE",
        "/v1/dead-letters/{letter_id}",
        "Purge a dead letter",
        "admin",
        {200: "purged"},
        errors={404: ("dead_letter_not_found",)},
    ),
    Operation(
        "POST",
        "/v1/dead-letters/{letter_id}/replay",
        "Send a dead letter again",
        "admin",
        {200: "sent again"},
        errors={404: ("dead_letter_not_found",)},
        empty_body=True,
    ),
)

# What starts a call, refused 503 `draining` by a gateway that is stopping (another takes it).
_NEW_CALLS = frozenset(
    {
        ("POST", "/v1/sessions"),
        ("POST", f"{S}/connect"),
        ("POST", "/v1/calls"),
        ("POST", "/v1/webhooks/openai"),
    }
)
# Refusals any keyed operation may answer, whatever its route.
_KEYED_ERRORS: dict[int, tuple[str, ...]] = {
    401: ("unauthorized",),
    403: ("forbidden",),
    # database_unavailable: a read (or the key's look-up) that found PostgreSQL away.
    503: ("reply_timeout", "overloaded", "database_unavailable"),
}
# And any operation that takes a body (the idempotency codes on every POST).
_BODY_ERRORS: dict[int, tuple[str, ...]] = {
    400: ("bad_request",),
    408: ("request_timeout",),
    413: ("body_too_large",),
    422: ("malformed_request",),
}
# And any operation whose body has a media type (gateway.api.json_bodies).
_TYPED_BODY_ERRORS: dict[int, tuple[str, ...]] = {415: ("unsupported_media_type",)}
_POST_ERRORS: dict[int, tuple[str, ...]] = {
    409: ("request_in_progress",),
    422: ("malformed_idempotency_key", "idempotency_key_reused"),
}
_SECURITY: dict[Security, list[dict[str, list[str]]]] = {
    "key": [{"apiKey": []}],
    "open": [],
    "webhook": [{"webhookSignature": []}],
    "live": [{"apiKey": []}, {"liveToken": []}],
}


def error_codes(operation: Operation) -> dict[int, tuple[str, ...]]:
    """Every error code the operation may answer, by status."""
    merged: dict[int, list[str]] = {}
    layers = [operation.errors]
    if operation.security in ("key", "live"):
        layers.append(_KEYED_ERRORS)
    if operation.method in ("POST", "PUT"):
        layers.append(_BODY_ERRORS)
    if body_types(operation):
        layers.append(_TYPED_BODY_ERRORS)
    if operation.method == "POST" and operation.security == "key":
        layers.append(_POST_ERRORS)
    if (operation.method, operation.path) in _NEW_CALLS:
        layers.append({503: ("draining",)})
    if _path_names(operation.path):
        # A parameter holding a "/" (%2F) leaves the path no route matches: Starlette's 404.
        layers.append({404: ("not_found",)})
    if _path_names(operation.path) or operation.query:
        # A parameter holding U+0000 (gateway.api.storable_addresses).
        layers.append({422: ("malformed_request",)})
    for layer in layers:
        for status, codes in layer.items():
            merged.setdefault(status, [])
            merged[status] += [code for code in codes if code not in merged[status]]
    return {status: tuple(merged[status]) for status in sorted(merged)}


def _parameters(operation: Operation) -> list[dict[str, Any]]:
    parameters: list[dict[str, Any]] = []
    for name in _path_names(operation.path):
        schema: dict[str, Any] = {"type": "string"}
        if name == "verb":
            schema = {"enum": ["pause", "resume", "cancel"]}
        elif name == "asset":
            schema = {"enum": ["console.js", "console.css", "docs.js", "docs.css"]}
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
    parameters += [
        {"name": q.name, "in": "query", "required": False, "description": q.description, "schema": q.schema}
        for q in operation.query
    ]
    if operation.method == "POST" and operation.security == "key":
        parameters.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": "1 to 255 printable ASCII characters: a retry answers the first answer",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e]+$"},
            }
        )
    return parameters


def _path_names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{") and part.endswith("}")]


def _request_body(operation: Operation) -> dict[str, Any] | None:
    if operation.body is None:
        if operation.empty_body:
            # Nothing, or an empty object.
            schema = {"type": "object", "maxProperties": 0}
            return {"required": False, "content": {"application/json": {"schema": schema}}}
        return None
    content: dict[str, Any] = {
        "application/json": {"schema": {"$ref": REF.format(model=operation.body.__name__)}}
    }
    if operation.body is ConnectRequest:
        content["application/sdp"] = {"schema": {"type": "string", "pattern": SDP_OFFER}}
    if operation.body is ContactsPage:
        content["text/csv"] = {"schema": {"type": "string"}}
    return {"required": operation.body is not EndRequest, "content": content}


def body_types(operation: Operation) -> tuple[str, ...]:
    """The media types the operation's body may have (none: it takes no body)."""
    described = _request_body(operation)
    return tuple(described["content"]) if described is not None else ()


@cache
def _templates() -> tuple[tuple[re.Pattern[str], Operation], ...]:
    templates = []
    for operation in OPERATIONS:
        pattern = re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(operation.path))
        templates.append((re.compile(pattern), operation))
    return tuple(templates)


def accepted_bodies(method: str, path: str) -> tuple[str, ...] | None:
    """The media types a request's body may have on this method and path: those of the
    operations that match it (a literal path and a template may both); None when no operation
    describes a body there (a path no route serves, or the provider's webhook, whose body is
    what the provider signs)."""
    found = [
        kind
        for pattern, operation in _templates()
        if operation.method == method and pattern.fullmatch(path)
        for kind in body_types(operation)
    ]
    return tuple(dict.fromkeys(found)) or None


def _success_content(operation: Operation, status: int) -> dict[str, Any] | None:
    if status == 101:
        return None
    if operation.path in ("/docs", "/console"):
        return {"text/html": {"schema": {"type": "string"}}}
    if operation.path == "/console/{asset}":
        return {"text/javascript": {"schema": {"type": "string"}}, "text/css": {"schema": {"type": "string"}}}
    if operation.path == "/metrics":
        return {"text/plain": {"schema": {"type": "string"}}}
    if operation.path.endswith("/connect"):
        return {
            "application/sdp": {"schema": {"type": "string"}},
            "application/json": {"schema": {"$ref": REF.format(model="Connected")}},
        }
    name = operation.answer.get(status) if isinstance(operation.answer, dict) else operation.answer
    schema = {"$ref": REF.format(model=name)} if name else _OBJECT
    return {"application/json": {"schema": schema}}


def _responses(operation: Operation) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, description in operation.success.items():
        answer: dict[str, Any] = {"description": description}
        content = _success_content(operation, status)
        if content is not None:
            answer["content"] = content
        if status == 201 and operation.location is not None:
            answer["headers"] = {
                "Location": {
                    "description": f"where the created resource is: `{operation.location}`",
                    "required": True,
                    "schema": {"type": "string"},
                }
            }
        responses[str(status)] = answer
    error = {"$ref": REF.format(model="Error")}
    for status, codes in error_codes(operation).items():
        listed = ", ".join(f"`{code}`" for code in codes)
        # The codes are an enum, so an answer with a code the table does not list fails
        # Schemathesis' schema check: the listed codes cannot drift from the answered ones.
        coded = {"properties": {"error": {"properties": {"code": {"enum": list(codes)}}}}}
        responses[str(status)] = {
            "description": f"error codes: {listed}",
            "content": {"application/json": {"schema": {"allOf": [error, coded]}}},
        }
    # Any other status is a refusal in the same shape (405 for a method no route takes, 500
    # `internal_error`).
    responses["default"] = {"description": "an error", "content": {"application/json": {"schema": error}}}
    return responses


def _operation(operation: Operation) -> dict[str, Any]:
    described: dict[str, Any] = {
        "operationId": _operation_id(operation),
        "summary": operation.summary,
        "tags": [operation.tag],
        "parameters": _parameters(operation),
        "responses": _responses(operation),
        "security": _SECURITY[operation.security],
        "x-error-codes": {str(status): list(codes) for status, codes in error_codes(operation).items()},
    }
    body = _request_body(operation)
    if body is not None:
        described["requestBody"] = body
    if operation.security == "live":
        described["x-websocket"] = True
    return described


def _operation_id(operation: Operation) -> str:
    words = [part.strip("{}") for part in operation.path.split("/") if part and part != "v1"]
    return "_".join([operation.method.lower(), *words]).replace("-", "_").replace(".", "_")


@cache
def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document for this gateway's API."""
    bodies = sorted({op.body for op in OPERATIONS if op.body is not None}, key=lambda m: m.__name__)
    _, definitions = models_json_schema([(model, "validation") for model in bodies], ref_template=REF)
    schemas = {**definitions.get("$defs", {}), **_ANSWERS}
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(operation)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Switchboard",
            "version": VERSION,
            "description": (
                "The control plane for realtime voice-agent calls. Every error is "
                '`{"error": {"code", "message"}}`; each answer lists the codes it may carry.'
            ),
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "an API key (`sbk_…`) or the deployment's API token",
                },
                "liveToken": {
                    "type": "apiKey",
                    "in": "query",
                    "name": "token",
                    "description": "a session's live token (`POST /v1/sessions/{id}/live-token`)",
                },
                "webhookSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "webhook-signature",
                    "description": (
                        "the provider's Standard Webhooks signature (with `webhook-id` and "
                        "`webhook-timestamp`), checked with the webhook secret"
                    ),
                },
            },
        },
    }
