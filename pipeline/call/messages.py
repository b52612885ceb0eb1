"""The base models of what comes in and what goes out on any provider's sideband: an input reads
only the fields it uses (providers add fields over time), a control forbids unknown ones (a
provider rejects them), and the playback the gateway measured, which barge-in reads."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Inbound(BaseModel):
    """An input: the fields it uses, the rest ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class Playback(Inbound):
    """What the caller was hearing when they started to speak, measured by the gateway: the
    assistant audio item and how long it had played (since its first transcript delta)."""

    item_id: str
    response_id: str
    played_ms: int


class ControlModel(BaseModel):
    """A control: exactly its fields, with its deterministic id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Deterministic (session seq, index): the gateway sends each id once, and the provider
    # echoes it in any error that answers this control.
    event_id: str | None = None


def optional_str(value: Any) -> str | None:
    """A frame's field when it is a string, else None (a provider's frame is never trusted)."""
    return value if isinstance(value, str) else None
