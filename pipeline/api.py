"""Schemas of the HTTP API's request bodies, shared by the gateway (which validates them)
and the admission actor (which stores them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.limits import MAXIMUM_INSTRUCTIONS_BYTES


class FunctionTool(BaseModel):
    """One function tool of the session's catalog, in the provider's shape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["function"] = "function"
    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class SessionLimits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_output_tokens: int | Literal["inf"] | None = Field(default=None)
    max_session_seconds: int | None = Field(default=None, ge=1, le=3_600)

    @field_validator("max_output_tokens")
    @classmethod
    def _provider_range(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and not 1 <= value <= 4_096:
            raise ValueError("max_output_tokens must be 1..4096 or 'inf'")
        return value


class SessionSpec(BaseModel):
    """`POST /v1/sessions`: what a session is created with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instructions: str = Field(min_length=1)
    tools: tuple[FunctionTool, ...] = ()
    limits: SessionLimits = SessionLimits()

    @field_validator("instructions")
    @classmethod
    def _bounded(cls, value: str) -> str:
        if len(value.encode()) > MAXIMUM_INSTRUCTIONS_BYTES:
            raise ValueError(f"instructions exceed {MAXIMUM_INSTRUCTIONS_BYTES} bytes")
        return value


class ConnectRequest(BaseModel):
    """`POST /v1/sessions/{id}/connect` with a JSON body (a raw SDP body works too)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sdp: str = Field(min_length=1, max_length=200_000)


class EndRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(default="ended_by_api", min_length=1, max_length=128)
