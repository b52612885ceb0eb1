"""What a call's trace is made of, without OpenTelemetry: its ids, the W3C `traceparent` that
carries a span across a queue, and the GenAI semantic conventions' names and attributes.

A call is one trace whatever process speaks about it. Its trace id and the span id of its call
span are derived from the session id, so a gateway, a worker and a tool runner that have never
met put their spans in the same trace, under the same root, with nothing stored anywhere: the
first sideband's gateway writes the call span itself with those ids (the call span is that
sideband's life), and a span that has no nearer parent (a timer, a tool run, a reconnected
sideband) is a child of it. A span that has a nearer parent names it in the `traceparent` its
message carries: the gateway's span of a provider event is the parent of the worker's span that
applies it, and the worker span that publishes a batch of controls (or sends a tool run) is
named in that message in turn.

The names follow the OpenTelemetry GenAI semantic conventions (development status, v1.37+:
`gen_ai.provider.name` replaced `gen_ai.system`; both are written while tools catch up).
Transcript text is never an attribute unless the deployment opts in
(`SWITCHBOARD_TRACE_CONTENT`); what the gateway then writes is the event as the privacy
boundary left it, redacted with the session's policy.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

# ── the conventions' names ──────────────────────────────────────────────────────────────

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # the name before semconv v1.37, still what many backends read
CONVERSATION = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"

INVOKE_AGENT = "invoke_agent"
CHAT = "chat"
EXECUTE_TOOL = "execute_tool"

# Every provider Switchboard speaks to is OpenAI's (Realtime or Live), or the simulator of it.
PROVIDER_NAME = "openai"
AGENT = "switchboard"

# Switchboard's own attributes (not the conventions').
SEQ = "switchboard.seq"
EVENT_TYPE = "switchboard.event.type"
GENERATION = "switchboard.generation"
VERB = "switchboard.verb"
DISPOSITION = "switchboard.disposition"

# The OpenTelemetry context keys a process sets while it starts a call's span, read by the id
# generator the entry point installs (`switchboard.tracing`): the only way to give a root span
# ids of our choosing through the API.
CALL_TRACE_ID_KEY = "switchboard.call_trace_id"
CALL_SPAN_ID_KEY = "switchboard.call_span_id"


# ── ids and the traceparent ─────────────────────────────────────────────────────────────

_HEX32 = re.compile(r"[0-9a-f]{32}")
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


@dataclass(frozen=True, slots=True)
class SpanIds:
    """Where a span sits: its trace and its own id (W3C trace context, sampled or not)."""

    trace_id: int
    span_id: int
    sampled: bool = True

    def traceparent(self) -> str:
        flags = "01" if self.sampled else "00"
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{flags}"


def call_span(session_id: str) -> SpanIds:
    """The call span of a session: the same ids in every process, from its id alone. A session
    id of 32 hex digits is its trace id as it is (so a trace is found by the session id)."""
    digest = hashlib.sha256(session_id.encode()).digest()
    trace_id = int(session_id, 16) if _HEX32.fullmatch(session_id) else int.from_bytes(digest[:16], "big")
    # Neither id may be zero (W3C: all-zero is invalid).
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return SpanIds(trace_id or 1, span_id)


def parsed_traceparent(value: str | None) -> SpanIds | None:
    """A `traceparent` read back (version 00), or None for a missing or malformed one."""
    if not value:
        return None
    found = _TRACEPARENT.fullmatch(value)
    if found is None:
        return None
    trace_id, span_id = int(found[1], 16), int(found[2], 16)
    if trace_id == 0 or span_id == 0:
        return None
    return SpanIds(trace_id, span_id, sampled=bool(int(found[3], 16) & 1))


# ── attributes ──────────────────────────────────────────────────────────────────────────


def call_attributes(session_id: str) -> dict[str, Any]:
    """What every span of a call says: which conversation, which provider."""
    return {CONVERSATION: session_id, PROVIDER: PROVIDER_NAME, SYSTEM: PROVIDER_NAME}


def response_attributes(done: dict[str, Any]) -> dict[str, Any]:
    """A provider response's id, outcome and token usage, from its `response.done`."""
    response = done.get("response")
    if not isinstance(response, dict):
        return {}
    attributes: dict[str, Any] = {}
    if isinstance(response.get("id"), str):
        attributes[RESPONSE_ID] = response["id"]
    if isinstance(response.get("status"), str):
        attributes[FINISH_REASONS] = (response["status"],)
    usage = response.get("usage")
    if isinstance(usage, dict):
        for key, name in (("input_tokens", INPUT_TOKENS), ("output_tokens", OUTPUT_TOKENS)):
            if isinstance(usage.get(key), int):
                attributes[name] = usage[key]
    return attributes


def calls_a_function(done: dict[str, Any]) -> bool:
    """Whether a `response.done` asks for a function call (its turn goes on after the tool)."""
    response = done.get("response")
    output = response.get("output") if isinstance(response, dict) else None
    return isinstance(output, list) and any(
        isinstance(item, dict) and item.get("type") == "function_call" for item in output
    )


def messages(role: str, texts: list[str]) -> str:
    """The conventions' `gen_ai.input.messages` / `gen_ai.output.messages` JSON for one role's
    lines (only written when content tracing is on; the texts are the redacted ones)."""
    parts = [{"type": "text", "content": text} for text in texts]
    return json.dumps([{"role": role, "parts": parts}], ensure_ascii=False)
