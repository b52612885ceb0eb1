"""What a model costs: dollars per million tokens by modality, and per minute where a model is
billed by time."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Rates(BaseModel):
    """Dollars per million tokens of one modality."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    cached: float = Field(ge=0)
    output: float = Field(ge=0)


_FREE = Rates(input=0, cached=0, output=0)


class ModelPrices(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: Rates = _FREE
    audio: Rates = _FREE
    # Live: dollars per minute the session was active (by the provider's count, per second).
    active_minute: float = Field(default=0, ge=0)
