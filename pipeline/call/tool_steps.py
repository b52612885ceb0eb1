"""Durable tool steps as values: a step's identity, its lifecycle, its one terminal outcome.

    requested → running → succeeded | failed | refused | cancelled | unavailable
                          | interrupted | timed_out

A step is requested once per function call (its provider call id). Asking again with the same
identity finds the same step; asking with a different identity for the same call id is a
`ProviderCallIdConflict`. A terminal step keeps its outcome: the same outcome again changes
nothing, a different one is a `ToolOutcomeConflict`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pipeline.call.catalog import ToolOutcome, ToolStatus, digest_of

StepStatus = Literal["requested", "running"] | ToolStatus
ACTIVE_STATUSES = frozenset({"requested", "running"})
TERMINAL_STATUSES = frozenset(
    {"succeeded", "failed", "refused", "cancelled", "unavailable", "interrupted", "timed_out"}
)


class ToolStepIdentity(BaseModel):
    """Everything that names one function call: equal identities are the same request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    provider_call_id: str
    provider_item_id: str | None
    provider_response_id: str | None
    turn_input_item_id: str | None
    tool_name: str
    tool_version: str
    catalog_digest: str
    side_effect: str
    raw_arguments: str

    @property
    def argument_digest(self) -> str:
        """The arguments' canonical digest; arguments that are not JSON are digested as text,
        so an invalid request still has one stable identity."""
        try:
            decoded: Any = json.loads(self.raw_arguments)
        except ValueError:
            decoded = {"invalid_json": self.raw_arguments}
        return digest_of(decoded)

    @property
    def invocation_key(self) -> str:
        """The key a tool run is idempotent on: this call of this tool in this catalog."""
        return digest_of(
            {
                "session_id": self.session_id,
                "provider_call_id": self.provider_call_id,
                "tool_name": self.tool_name,
                "tool_version": self.tool_version,
                "catalog_digest": self.catalog_digest,
            }
        )


class ToolStep(BaseModel):
    """One durable tool step as stored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    identity: ToolStepIdentity
    sequence: int
    status: StepStatus
    result: Any = None
    error: dict[str, Any] | None = None
    outcome_digest: str | None = None
    elapsed_ms: float | None = None
    requested_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


def outcome_digest(outcome: ToolOutcome) -> str:
    """The digest that decides whether two outcomes are the same (timing excluded)."""
    return digest_of(outcome.model_dump(mode="json", exclude={"elapsed_ms"}))
