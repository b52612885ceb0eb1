"""Words on a Live session's timeline: who said them, where (ms since the session started), and
the provider's event id. Shared by the Live seam (`pipeline.live`), its durable events
(`pipeline.live.events`) and the session state, which keeps the caller's recent words."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Speaker(StrEnum):
    """Who a transcript fragment is of: the CALLER (input) or the AGENT (the Live model)."""

    CALLER = "caller"
    AGENT = "agent"


class TranscriptFragment(BaseModel):
    """One transcript delta as it is kept: who, the provider's event id, where on the session
    timeline (ms since the session started), and the words."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    speaker: Speaker
    event_id: str
    start_ms: int = Field(ge=0)
    end_ms: int = Field(ge=0)
    text: str
