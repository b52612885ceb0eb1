"""The strict wire oracle (PROTOCOL.md §5)."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.oracle import wire_errors

GOOD_SERVER_EVENTS: list[dict[str, Any]] = [
    {
        "type": "input_audio_buffer.speech_started",
        "event_id": "event_1",
        "audio_start_ms": 1000,
        "item_id": "item_1",
    },
    {
        "type": "response.output_audio_transcript.delta",
        "event_id": "event_2",
        "response_id": "resp_1",
        "item_id": "item_1",
        "output_index": 0,
        "content_index": 0,
        "delta": "Hel",
    },
    {
        "type": "conversation.item.added",
        "event_id": "event_3",
        "previous_item_id": None,
        "item": {
            "id": "item_1",
            "object": "realtime.item",
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        },
    },
    {
        "type": "error",
        "event_id": "event_4",
        "error": {
            "type": "invalid_request_error",
            "code": "invalid_event",
            "message": "The 'type' field is missing.",
            "param": None,
            "event_id": "c1",
        },
    },
    {"type": "output_audio_buffer.started", "event_id": "event_5", "response_id": "resp_1"},
    {
        "type": "session.updated",
        "event_id": "event_6",
        "session": {
            "type": "realtime",
            "object": "realtime.session",
            "id": "sess_1",
            "expires_at": 0,
            "instructions": "Be brief.",
        },
    },
]

GOOD_CLIENT_EVENTS: list[dict[str, Any]] = [
    {"type": "response.create", "event_id": "c3"},
    {"type": "response.cancel"},
    {
        "type": "conversation.item.create",
        "item": {"type": "function_call_output", "call_id": "call_1", "output": '{"ok":true}'},
    },
    {
        "type": "conversation.item.truncate",
        "item_id": "item_1",
        "content_index": 0,
        "audio_end_ms": 1500,
    },
    {
        "type": "response.create",
        "response": {
            "conversation": "none",
            "metadata": {"purpose": "summary"},
            "output_modalities": ["text"],
            "input": [
                {"type": "item_reference", "id": "item_1"},
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Summarize."}],
                },
            ],
        },
    },
]


@pytest.mark.parametrize("event", GOOD_SERVER_EVENTS, ids=lambda e: e["type"])
def test_accepts_good_server_events(event: dict[str, Any]) -> None:
    """A well-formed GA server event, allow-listed session fields included, has no errors."""
    assert wire_errors(event, direction="server") == []


@pytest.mark.parametrize("event", GOOD_CLIENT_EVENTS, ids=lambda e: e["type"])
def test_accepts_good_client_events(event: dict[str, Any]) -> None:
    """A well-formed client event, item references included, has no errors."""
    assert wire_errors(event, direction="client") == []


def test_rejects_beta_event_names() -> None:
    """A beta event name fails with one clear error about the tag."""
    event = {
        "type": "response.audio_transcript.delta",
        "event_id": "event_1",
        "response_id": "resp_1",
        "item_id": "item_1",
        "output_index": 0,
        "content_index": 0,
        "delta": "Hel",
    }
    errors = wire_errors(event, direction="server")
    assert len(errors) == 1
    assert "response.audio_transcript.delta" in errors[0]


def test_rejects_missing_fields() -> None:
    """A missing required field is named by its path."""
    event = {"type": "conversation.item.truncate", "item_id": "item_1", "audio_end_ms": 3}
    assert wire_errors(event, direction="client") == ["content_index: Field required"]


def test_rejects_unknown_fields() -> None:
    """Unknown keys, which the SDK models would let through, are reported with their path."""
    beta = {"type": "response.create", "response": {"modalities": ["text"]}}
    docs_only = {
        "type": "output_audio_buffer.stopped",
        "event_id": "e",
        "response_id": "r",
        "timestamp": "2:27:05 PM",
    }
    assert wire_errors(beta, direction="client") == ["unknown field $.response.modalities"]
    assert wire_errors(docs_only, direction="server") == ["unknown field $.timestamp"]


def test_only_three_session_fields_are_allowed_extra() -> None:
    """Beyond id, object and expires_at, an undeclared session field is reported."""
    event = {
        "type": "session.updated",
        "event_id": "e",
        "session": {"type": "realtime", "id": "s", "voice": "marin"},
    }
    assert wire_errors(event, direction="server") == ["unknown field $.session.voice"]


def test_finds_unknown_fields_beside_item_references() -> None:
    """A response.create with item references is still checked for unknown fields."""
    event = {
        "type": "response.create",
        "response": {"input": [{"type": "item_reference", "id": "i"}], "modalities": ["text"]},
    }
    assert wire_errors(event, direction="client") == ["unknown field $.response.modalities"]


def test_rejects_non_string_tool_output() -> None:
    """A function_call_output whose output is an object, not a string, fails."""
    event = {
        "type": "conversation.item.create",
        "item": {"type": "function_call_output", "call_id": "call_1", "output": {"ok": True}},
    }
    assert wire_errors(event, direction="client") != []
