"""Schemas of the HTTP API's request bodies, shared by the gateway (which validates them)
and the admission actor (which stores them)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.limits import (
    MAXIMUM_INSTRUCTIONS_BYTES,
    MAXIMUM_TYPED_TEXT_BYTES,
    MAXIMUM_USAGE_BUDGET_TOKENS,
)

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


class SessionLimits(BaseModel):
    # Strict: JSON `true` is not the number 1, nor "12" the number 12.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    max_output_tokens: int | Literal["inf"] | None = Field(default=None)
    max_session_seconds: int | None = Field(default=None, ge=1, le=3_600)
    # Compact the call's context once a response reports this many input tokens.
    compaction_input_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    # End the session once its responses have used this many total tokens.
    usage_budget_tokens: int | None = Field(default=None, ge=1, le=MAXIMUM_USAGE_BUDGET_TOKENS)

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
    # Names of registered tools this session may call (SWITCHBOARD_TOOL_MODULES); none by default.
    tools: tuple[str, ...] = Field(default=(), max_length=64)

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not TOOL_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a tool name")
        if len(set(names)) != len(names):
            raise ValueError("a tool is named twice")
        return names

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


class TypedText(BaseModel):
    """`POST /v1/sessions/{id}/say`: text typed into a live call, trimmed and bounded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str

    @field_validator("text")
    @classmethod
    def _trimmed_and_bounded(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("text is empty")
        if len(value.encode()) > MAXIMUM_TYPED_TEXT_BYTES:
            raise ValueError(f"text exceeds {MAXIMUM_TYPED_TEXT_BYTES} bytes")
        return value


class AgentSay(TypedText):
    """`POST /v1/sessions/{id}/agent/say`: words the agent says (trimmed, bounded like typed text)."""


class AgentReply(BaseModel):
    """`POST /v1/sessions/{id}/agent/reply`: what steers the agent's reply (bounded like the
    session's own instructions)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instructions: str

    @field_validator("instructions")
    @classmethod
    def _present_and_bounded(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("instructions are empty")
        if len(value.encode()) > MAXIMUM_INSTRUCTIONS_BYTES:
            raise ValueError(f"instructions exceed {MAXIMUM_INSTRUCTIONS_BYTES} bytes")
        return value
