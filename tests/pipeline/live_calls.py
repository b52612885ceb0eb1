"""Builders of a Live call's logged inputs, in the shapes the provider and the gateway write
them (LIVE_PROTOCOL.md §3.3; the durable transcript as `pipeline.live` writes it)."""

from __future__ import annotations

import itertools
from typing import Any

from pipeline.call.catalog import ToolOutcome
from pipeline.live.frames import live_transcript
from pipeline.session.timeline import Speaker, TranscriptFragment
from tests.pipeline import events as ev

LIVE_ID = "live_u7_9c6574da8b8a41a18da9308f4ad974ce"
# One word of the simulated timeline.
WORD_MS = 200

_ids = itertools.count(1)


def _id(prefix: str = "event") -> str:
    return f"{prefix}_L{next(_ids):06d}"


def created(
    handler: str | None = "order_desk", *, limits: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    """The creation of a Live session (its other `SessionCreated` fields as given)."""
    live = {"handler": handler, "handler_version": "1" if handler else "", "acknowledgement_delay_ms": 400}
    return {**ev.session_created(limits=limits), **fields, "provider": "live", "live": live}


def listening(handler: str | None = "order_desk", **changes: Any) -> list[dict[str, Any]]:
    """A Live session from its creation until it listens."""
    return [
        created(handler, **changes),
        ev.admission_begun(),
        ev.call_attached(LIVE_ID),
        ev.sideband_connected(LIVE_ID),
        {
            "type": "session.updated",
            "event_id": _id(),
            "session": {"id": LIVE_ID, "delegation": {"type": "client"}},
        },
    ]


def words(speaker: Speaker, text: str, start_ms: int) -> tuple[TranscriptFragment, ...]:
    """The fragments of `text`, a word each, from `start_ms` on the timeline."""
    return tuple(
        TranscriptFragment(
            speaker=speaker,
            event_id=_id(),
            start_ms=start_ms + index * WORD_MS,
            end_ms=start_ms + (index + 1) * WORD_MS,
            text=word if index == 0 else f" {word}",
        )
        for index, word in enumerate(text.split())
    )


def piece(fragments: tuple[TranscriptFragment, ...]) -> dict[str, Any]:
    """The durable transcript event of these fragments."""
    return live_transcript(fragments)


def said(text: str, start_ms: int, speaker: Speaker = Speaker.CALLER) -> dict[str, Any]:
    return piece(words(speaker, text, start_ms))


def delegated(delegation_id: str, offset_ms: int, target: str = "client") -> dict[str, Any]:
    return {
        "type": "session.delegation.created",
        "event_id": _id(),
        "offset_ms": offset_ms,
        "delegation": {"id": delegation_id, "type": "delegation", "target": target},
    }


def finished(
    delegation_id: str, status: str = "succeeded", result: Any = "Order 4417 ships Friday."
) -> dict[str, Any]:
    error = None if status == "succeeded" else {"code": f"code_{status}", "message": f"the task was {status}"}
    outcome = ToolOutcome.model_validate(
        {
            "status": status,
            "result": result if status == "succeeded" else None,
            "error": error,
            "elapsed_ms": 5.0,
        }
    )
    return {
        "type": "switchboard.tool_finished",
        "call_id": delegation_id,
        "outcome": outcome.model_dump(mode="json"),
    }


def usage(seconds: float, ratio: float = 0.01) -> dict[str, Any]:
    return {
        "type": "session.usage.updated",
        "event_id": _id(),
        "usage": {"seconds": seconds},
        "context_window": {"usage_ratio": ratio},
    }


def closed(reason: str = "remote_hangup", seconds: float = 30) -> dict[str, Any]:
    return {
        "type": "session.closed",
        "event_id": _id(),
        "reason": reason,
        "session": {"id": LIVE_ID, "expires_at": 1, "model": "gpt-live-1", "status": "active"},
        "usage": {"seconds": seconds},
    }


def hold(held: bool = True) -> dict[str, Any]:
    return {"type": "switchboard.hold", "held": held}
