"""Builders of logged events in the shapes the provider and the gateway write them
(PROTOCOL.md §2.3), and a fold that applies a list of them to a fresh session."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from pipeline.dialects import parse_inbound
from pipeline.session.state import SessionState
from pipeline.session.step import Step
from pipeline.session.wire import InboundEvent
from pipeline.transitions import apply

INSTRUCTIONS = "You are Alex, a concise receptionist."
CALL_ID = "rtc_u1_9c6574da8b8a41a18da9308f4ad974ce"

_event_ids = itertools.count(1)


def _event_id() -> str:
    return f"event_{next(_event_ids):06d}"


# ── host events ──────────────────────────────────────────────────────────────────────────


def session_created(
    instructions: str = INSTRUCTIONS,
    *,
    tools: list[dict[str, Any]] | None = None,
    limits: dict[str, Any] | None = None,
    model: dict[str, Any] | None = None,
) -> dict[str, Any]:
    created = {
        "type": "switchboard.session_created",
        "instructions": instructions,
        "tools": tools or [],
        "catalog_digest": "sha256:test" if tools else "",
        "tool_versions": {tool["name"]: "1" for tool in tools or []},
        "tool_side_effects": {tool["name"]: "read_only" for tool in tools or []},
        "limits": limits if limits is not None else {"max_output_tokens": 512, "max_session_seconds": 900},
    }
    if model is not None:
        created["model"] = model
    return created


# The model choice of a session whose model calls tools in parallel, and that asked for it.
IN_PARALLEL = {"id": "gpt-realtime-2.1", "parallel_tool_calls": True}


def admission_begun() -> dict[str, Any]:
    return {"type": "switchboard.admission_begun"}


def call_attached(call_id: str = CALL_ID, medium: str = "webrtc") -> dict[str, Any]:
    return {"type": "switchboard.call_attached", "call_id": call_id, "medium": medium}


def sideband_connected(call_id: str = CALL_ID) -> dict[str, Any]:
    return {"type": "switchboard.sideband_connected", "call_id": call_id}


def sideband_closed(code: int | None = 1000, reason: str = "", *, by_host: bool = False) -> dict[str, Any]:
    return {
        "type": "switchboard.sideband_closed",
        "code": code,
        "reason": reason,
        "by_host": by_host,
    }


def end_requested(reason: str = "app_ended") -> dict[str, Any]:
    return {"type": "switchboard.end_requested", "reason": reason}


def admission_failed(code: str = "provider_unavailable", detail: str = "HTTP 503") -> dict[str, Any]:
    return {"type": "switchboard.admission_failed", "code": code, "detail": detail}


def timer_fired(name: str) -> dict[str, Any]:
    return {"type": "switchboard.timer_fired", "name": name}


# ── provider events ──────────────────────────────────────────────────────────────────────


def session_updated(instructions: str = INSTRUCTIONS) -> dict[str, Any]:
    return {
        "type": "session.updated",
        "event_id": _event_id(),
        "session": {
            "type": "realtime",
            "object": "realtime.session",
            "id": "sess_C9G5QPteg4UIbotdKLoYQ",
            "model": "gpt-realtime",
            "output_modalities": ["audio"],
            "instructions": instructions,
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": "inf",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": {"model": "gpt-4o-transcribe"},
                    "turn_detection": {
                        "type": "server_vad",
                        "threshold": 0.5,
                        "prefix_padding_ms": 300,
                        "silence_duration_ms": 200,
                        "create_response": False,
                        "interrupt_response": False,
                    },
                },
                "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"},
            },
        },
    }


def speech_started(item_id: str, audio_start_ms: int = 1000) -> dict[str, Any]:
    return {
        "type": "input_audio_buffer.speech_started",
        "event_id": _event_id(),
        "audio_start_ms": audio_start_ms,
        "item_id": item_id,
    }


def user_final(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": _event_id(),
        "item_id": item_id,
        "content_index": 0,
        "transcript": text,
        "usage": {
            "type": "tokens",
            "total_tokens": 48,
            "input_tokens": 38,
            "input_token_details": {"text_tokens": 10, "audio_tokens": 28},
            "output_tokens": 10,
        },
    }


def user_failed(item_id: str) -> dict[str, Any]:
    return {
        "type": "conversation.item.input_audio_transcription.failed",
        "event_id": _event_id(),
        "item_id": item_id,
        "content_index": 0,
        "error": {
            "type": "transcription_error",
            "code": "audio_unintelligible",
            "message": "The audio could not be transcribed.",
            "param": None,
        },
    }


def response_created(resp_id: str, *, metadata: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "type": "response.created",
        "event_id": _event_id(),
        "response": {
            "object": "realtime.response",
            "id": resp_id,
            "status": "in_progress",
            "status_details": None,
            "output": [],
            "conversation_id": "conv_C9G8mmBkLhQJwCon3hoJN",
            "output_modalities": ["audio"],
            "max_output_tokens": "inf",
            "audio": {"output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"}},
            "usage": None,
            "metadata": metadata,
        },
    }


def assistant_final(resp_id: str, item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "response.output_audio_transcript.done",
        "event_id": _event_id(),
        "response_id": resp_id,
        "item_id": item_id,
        "output_index": 0,
        "content_index": 0,
        "transcript": text,
    }


def assistant_text_final(resp_id: str, item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "response.output_text.done",
        "event_id": _event_id(),
        "response_id": resp_id,
        "item_id": item_id,
        "output_index": 0,
        "content_index": 0,
        "text": text,
    }


def function_call(
    call_id: str,
    response_id: str,
    item_id: str | None = None,
    name: str = "lookup_order",
    arguments: str = "{}",
) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.done",
        "event_id": _event_id(),
        "response_id": response_id,
        "item_id": item_id or f"item_{call_id}",
        "output_index": 0,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def response_done(
    resp_id: str,
    status: str = "completed",
    *,
    input_tokens: int = 127,
    output_tokens: int = 148,
    status_details: dict[str, Any] | None = None,
    metadata: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "type": "response.done",
        "event_id": _event_id(),
        "response": {
            "object": "realtime.response",
            "id": resp_id,
            "status": status,
            "status_details": status_details,
            "conversation_id": "conv_1",
            "output_modalities": ["audio"],
            "max_output_tokens": "inf",
            "metadata": metadata,
            "audio": {"output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"}},
            "output": [],
            "usage": {
                "total_tokens": input_tokens + output_tokens,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "input_token_details": {
                    "cached_tokens": 0,
                    "text_tokens": input_tokens,
                    "audio_tokens": 0,
                },
                "output_token_details": {"text_tokens": 0, "audio_tokens": output_tokens},
            },
        },
    }


def provider_error(code: str = "conversation_already_has_active_response") -> dict[str, Any]:
    return {
        "type": "error",
        "event_id": _event_id(),
        "error": {
            "type": "invalid_request_error",
            "code": code,
            "message": "Conversation already has an active response in progress: resp_X.",
            "param": None,
            "event_id": "ctl_7_0",
        },
    }


def maintenance(number: int) -> dict[str, str]:
    """The metadata a compaction's maintenance response carries (echoed by the provider)."""
    return {"switchboard": "compaction", "compaction": str(number)}


def compaction_requested(request_id: str = "req_1", gateway_id: str = "gw1") -> dict[str, Any]:
    return {"type": "switchboard.compaction_requested", "request_id": request_id, "gateway_id": gateway_id}


def compaction_unsaved(number: int, reason: str = "InternalError: refused") -> dict[str, Any]:
    return {"type": "switchboard.compaction_unsaved", "compaction": number, "reason": reason}


def item_deleted(item_id: str) -> dict[str, Any]:
    return {"type": "conversation.item.deleted", "event_id": _event_id(), "item_id": item_id}


def unknown(event_type: str = "foo.bar") -> dict[str, Any]:
    return {"type": event_type, "event_id": _event_id(), "payload": {"x": 1}}


# ── admission prefixes ───────────────────────────────────────────────────────────────────


def admitted(call_id: str = CALL_ID, **created: Any) -> list[dict[str, Any]]:
    """Every event from creation to a connected sideband (the phase is then CONNECTED)."""
    return [
        session_created(**created),
        admission_begun(),
        call_attached(call_id),
        sideband_connected(call_id),
    ]


def listening(call_id: str = CALL_ID, **created: Any) -> list[dict[str, Any]]:
    """Every event from creation until the session listens."""
    return [*admitted(call_id, **created), session_updated()]


# ── folding ──────────────────────────────────────────────────────────────────────────────


def step_of(state: SessionState, raw: dict[str, Any], generation: int | None = None) -> Step:
    """Parse one raw event and apply it (in the state's own generation unless told)."""
    event: InboundEvent = parse_inbound(raw)
    return apply(state, event, state.generation if generation is None else generation)


def fold(
    raws: Iterable[dict[str, Any]], state: SessionState | None = None
) -> tuple[SessionState, list[Step]]:
    """Apply every event in order from `state` (a fresh session by default)."""
    current = SessionState() if state is None else state
    steps: list[Step] = []
    for raw in raws:
        step = step_of(current, raw)
        steps.append(step)
        current = step.state
    return current, steps


def state_after(raws: Iterable[dict[str, Any]]) -> SessionState:
    return fold(raws)[0]


def controls_of(steps: Iterable[Step]) -> list[Any]:
    return [control for step in steps for control in step.controls]


def effects_of(steps: Iterable[Step], kind: type[Any] | None = None) -> list[Any]:
    return [e for step in steps for e in step.effects if kind is None or isinstance(e, kind)]
