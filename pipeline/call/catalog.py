"""Tool declarations and outcomes: what the model may call, and what a call came to.

A `ToolSpec` is the provider-facing half of a tool (its Python body lives in
`workers.tools`); a `ToolCatalog` is the set a session is admitted with, and its `digest`
pins that set so a session whose catalog changed before it connected can be failed. A
`ToolOutcome` is the validated result of one run, whatever ended it.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# The provider's rule for function names (the same as the Chat Completions API's).
TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"


def canonical_json(value: Any) -> str:
    """`value` as canonical JSON: sorted keys, no whitespace, UTF-8 text left unescaped.

    Two JSON texts that differ only in key order or whitespace have the same canonical form.
    NaN and the infinities are written as Python's json writes them rather than refused, so a
    digest of whatever `json.loads` accepted never raises inside a transition.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest_of(value: Any) -> str:
    """`"sha256:<hex>"` of the canonical JSON of `value`."""
    return "sha256:" + hashlib.sha256(canonical_json(value).encode()).hexdigest()


class SideEffect(StrEnum):
    """What running a tool does to the world outside the call.

    READ_ONLY  reads and computes; safe to run again
    WRITES     changes Switchboard's or the application's own data
    EXTERNAL   reaches a system outside this deployment (a payment, a message, a ticket)
    """

    READ_ONLY = "read_only"
    WRITES = "writes"
    EXTERNAL = "external"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolSpec(_Frozen):
    """One tool as declared: its provider-facing definition plus version and side effect."""

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    version: str = Field(min_length=1)
    description: str
    # A JSON schema whose top level is an object: function arguments are always an object.
    parameters: dict[str, Any]
    side_effect: SideEffect
    # Top-level string parameters that hold a value the tool needs in the clear (a payment
    # tool's card_number): sealed by the gateway, opened only in the runner's memory.
    sensitive: tuple[str, ...] = ()

    @field_validator("parameters")
    @classmethod
    def _is_object_schema(cls, parameters: dict[str, Any]) -> dict[str, Any]:
        if parameters.get("type") != "object":
            raise ValueError(f'parameters must be a JSON schema with "type": "object", got {parameters!r}')
        return parameters

    @model_validator(mode="after")
    def _sensitive_are_plain_strings(self) -> ToolSpec:
        properties = self.parameters.get("properties") or {}
        for name in self.sensitive:
            schema = properties.get(name)
            # A sealed value is text; an enum's refusal would quote the value it refused.
            if not isinstance(schema, dict) or schema.get("type") != "string" or "enum" in schema:
                raise ValueError(
                    f"sensitive parameter {name!r} must be a top-level string property without enum"
                )
        return self

    def provider_tool(self) -> dict[str, Any]:
        """The function tool as `session.update` carries it in `session.tools`."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }


class ToolCatalog(_Frozen):
    """The tools a session may call, each name once."""

    tools: tuple[ToolSpec, ...] = ()

    @field_validator("tools")
    @classmethod
    def _names_are_unique(cls, tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        seen: set[str] = set()
        for spec in tools:
            if spec.name in seen:
                raise ValueError(f"tool {spec.name!r} is declared twice")
            seen.add(spec.name)
        return tools

    def get(self, name: str) -> ToolSpec | None:
        """The tool called `name`, or None when the catalog has none."""
        return next((spec for spec in self.tools if spec.name == name), None)

    def provider_tools(self) -> list[dict[str, Any]]:
        """Every tool as `session.update` carries it."""
        return [spec.provider_tool() for spec in self.tools]

    @cached_property
    def digest(self) -> str:
        """`"sha256:<hex>"` of the specs sorted by name: the same set in any order has one digest."""
        ordered = sorted(self.tools, key=lambda spec: spec.name)
        # A tool with no sensitive parameters digests as it did before they existed.
        return digest_of(
            [
                spec.model_dump(mode="json", exclude=None if spec.sensitive else {"sensitive"})
                for spec in ordered
            ]
        )


class ToolError(_Frozen):
    """Why a tool run did not succeed, in a code for programs and a message for the model."""

    code: str
    message: str


ToolStatus = Literal["succeeded", "failed", "refused", "cancelled", "unavailable", "interrupted", "timed_out"]


class ToolOutcome(_Frozen):
    """What one tool call came to: a result when it succeeded, an error otherwise."""

    status: ToolStatus
    result: Any = None
    error: ToolError | None = None
    elapsed_ms: float = Field(ge=0)

    @model_validator(mode="after")
    def _error_matches_status(self) -> ToolOutcome:
        if self.status == "succeeded" and self.error is not None:
            raise ValueError(f"a succeeded outcome carries no error, got {self.error.code!r}")
        if self.status != "succeeded" and self.error is None:
            raise ValueError(f"a {self.status} outcome must say why (an error is required)")
        return self

    @property
    def is_succeeded(self) -> bool:
        return self.status == "succeeded"
