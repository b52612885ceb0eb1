"""The provider-side state of one call: its session config and its conversation items.

Both are plain JSON dicts in wire shape, so what the simulator sends is what it holds. The
conversation also remembers how long each assistant audio item is, which truncation checks.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

from simulator.models import DEFAULT_REALTIME_MODEL, DEFAULT_TRANSCRIPTION_MODEL

# A session lives this long on the real service (PROTOCOL.md §1.4); it only feeds expires_at here.
SESSION_LIFETIME_S = 60 * 60
# A rough tokenizer: English text averages about four characters per token.
CHARS_PER_TOKEN = 4

PCM_24K = {"type": "audio/pcm", "rate": 24000}


def default_session(session_id: str) -> dict[str, Any]:
    """The effective config of a new call, as the service reports it in session.created.

    One deliberate difference from the service: input transcription is on by default, because a
    simulated caller exists to be heard. A host that sets it to null gets no transcription events.
    """
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": DEFAULT_REALTIME_MODEL,
        "output_modalities": ["audio"],
        "instructions": "",
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "truncation": "auto",
        "prompt": None,
        "expires_at": int(time.time()) + SESSION_LIFETIME_S,
        "include": None,
        "audio": {
            "input": {
                "format": dict(PCM_24K),
                "transcription": {"model": DEFAULT_TRANSCRIPTION_MODEL},
                "noise_reduction": None,
                "turn_detection": {
                    "type": "server_vad",
                    "threshold": 0.5,
                    "prefix_padding_ms": 300,
                    "silence_duration_ms": 200,
                    "idle_timeout_ms": None,
                    "create_response": True,
                    "interrupt_response": True,
                },
            },
            "output": {"format": dict(PCM_24K), "voice": "marin", "speed": 1.0},
        },
    }


def merge_session(current: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """`current` with the partial `update` applied: objects merge, anything else replaces.

    An object whose `type` changes (server_vad → semantic_vad) replaces the old one whole, since
    the two kinds share few fields; null clears (turn_detection: null means manual turns).
    """
    merged = copy.deepcopy(current)
    for key, value in update.items():
        old = merged.get(key)
        is_same_kind = (
            isinstance(old, dict)
            and isinstance(value, dict)
            and (value.get("type", old.get("type")) == old.get("type"))
        )
        merged[key] = merge_session(old, value) if is_same_kind else copy.deepcopy(value)  # type: ignore[arg-type]
    return merged


def estimate_tokens(chars: int) -> int:
    """Tokens for this many characters of text."""
    return math.ceil(chars / CHARS_PER_TOKEN)


def item_text(item: dict[str, Any]) -> str:
    """The words an item holds: message text or transcripts, call name and arguments, or output."""
    if item.get("type") == "function_call":
        return f"{item.get('name', '')}{item.get('arguments', '')}"
    if item.get("type") == "function_call_output":
        return str(item.get("output", ""))
    parts = item.get("content") or []
    return " ".join(str(p.get("text") or p.get("transcript") or "") for p in parts).strip()


class Refusal(Exception):
    """A client request the call cannot carry out, worded as the service words it."""

    def __init__(self, code: str | None, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param


class Conversation:
    """The default conversation's items in order, with each assistant audio item's length."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.audio_ms: dict[str, int] = {}
        # Items a client cut: what is left of them stays, even if their response streams on.
        self.truncated: set[str] = set()

    def last_id(self) -> str | None:
        """The id of the newest item, the `previous_item_id` of anything appended now."""
        return self.items[-1]["id"] if self.items else None

    def find(self, item_id: str) -> dict[str, Any] | None:
        """The item with this id, if the conversation holds it."""
        return next((item for item in self.items if item["id"] == item_id), None)

    def append(self, item: dict[str, Any]) -> str | None:
        """Add `item` at the end; answer the id of the item before it."""
        previous = self.last_id()
        self.items.append(item)
        return previous

    def insert(self, item: dict[str, Any], previous_item_id: str | None) -> str | None:
        """Add `item` after `previous_item_id` ("root" = first, None = last); answer its predecessor."""
        if previous_item_id is None:
            return self.append(item)
        if previous_item_id == "root":
            self.items.insert(0, item)
            return None
        position = self._position(previous_item_id)
        if position is None:
            raise Refusal(
                "item_create_invalid_previous_item_id",
                f"Error adding item: the previous item with id '{previous_item_id}' does not exist.",
                "previous_item_id",
            )
        self.items.insert(position + 1, item)
        return previous_item_id

    def delete(self, item_id: str) -> None:
        """Remove the item, or refuse when it is not here."""
        position = self._position(item_id)
        if position is None:
            raise Refusal(
                "item_delete_invalid_item_id",
                f"Error deleting item: the item with id '{item_id}' does not exist.",
                "item_id",
            )
        del self.items[position]
        self.audio_ms.pop(item_id, None)

    def truncate(self, item_id: str, content_index: int, audio_end_ms: int) -> None:
        """Cut an assistant audio item at `audio_end_ms`, dropping the transcript of the rest."""
        if audio_end_ms < 0:
            raise Refusal(
                "integer_below_min_value",
                "Invalid 'audio_end_ms': integer below minimum value. "
                f"Expected a value >= 0, but got {audio_end_ms} instead.",
                "audio_end_ms",
            )
        item = self.find(item_id)
        if item is None:
            raise Refusal(
                "item_truncate_invalid_item_id",
                f"Error truncating item: the item with id '{item_id}' does not exist.",
                "item_id",
            )
        parts = item.get("content") or []
        if item_id not in self.audio_ms or not 0 <= content_index < len(parts):
            raise Refusal("unsupported_content_type", "Only model output audio messages can be truncated.")
        audio_ms = self.audio_ms[item_id]
        if audio_end_ms > audio_ms:
            # The service has sent this with a null code (PROTOCOL.md §4.4).
            raise Refusal(None, f"Audio content of {audio_ms}ms is already shorter than {audio_end_ms}ms")
        part = parts[content_index]
        words = str(part.get("transcript") or "").split()
        heard = math.floor(len(words) * audio_end_ms / audio_ms) if audio_ms else 0
        part["transcript"] = " ".join(words[:heard])
        self.audio_ms[item_id] = audio_end_ms
        self.truncated.add(item_id)

    def chars(self) -> int:
        """How much text the conversation holds, which drives the input token count."""
        return sum(len(item_text(item)) for item in self.items)

    def _position(self, item_id: str) -> int | None:
        return next((i for i, item in enumerate(self.items) if item["id"] == item_id), None)
