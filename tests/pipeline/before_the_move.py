"""A session's state as the release before issue 45 stored and read it: every field at the top
(the Realtime wing's were moved under `realtime` since), and sessions it folded with what it
stored of each, for the tests of a rolling deploy across the move (`pipeline.platform.releases.MOVED`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from pipeline.platform.releases import across_releases
from pipeline.session.state import RealtimeCall, SessionState, ToolChain

# Every field of a session's state before issue 45 moved the Realtime wing's under `realtime`:
# all of them at the top.
FIELDS_BEFORE_THE_MOVE = frozenset(
    {
        *("admitted_by", "app_webhook", "attention", "attentions", "budget_warning_sent", "call_id"),
        *("catalog_digest", "chain", "collect_asked", "collecting", "collections", "compaction"),
        *("compaction_cooldown", "compactions", "directed", "end_reason", "event_stream"),
        *("generation", "greeted", "greeting", "hanging_up", "hangup_reason", "hangup_when", "held"),
        *("instructions", "known_items", "last_response_input_tokens", "limits", "live"),
        *("maintenance_responses", "medium", "opened_generation", "outbound", "phase", "phone"),
        *("privacy", "prompt_blocks", "provider", "queued_input_item_id", "reconnect_attempts"),
        *("responses_asked", "sideband_down", "silences_heard", "speech_started_count", "storage"),
        *("taken_by", "tool_sensitive", "tool_side_effects", "tool_versions", "tools"),
        *("transfer_call_id", "transferring_to", "turn", "unasked_response", "usage"),
    }
)

# Fields of the state added since (each with a default that means "as before"): a worker of the
# release before drops them, naming them, and reads the rest (pipeline.platform.releases).
ADDED_SINCE = frozenset({"model", "agent"})
# Fields added since inside the model of a field at the top (each with a default that means "as
# before"), by that field: the release before drops and names them too.
ADDED_INSIDE_SINCE: dict[str, frozenset[str]] = {"chain": frozenset({"parallel"})}


def _as_before(model: type[BaseModel], added: frozenset[str]) -> type[BaseModel]:
    """`model` as the release before has it: without the fields added since."""
    return create_model(  # type: ignore[call-overload,no-any-return]
        f"{model.__name__}BeforeTheMove",
        __config__=ConfigDict(frozen=True, extra="forbid"),
        **{
            name: (field.annotation, field) for name, field in model.model_fields.items() if name not in added
        },
    )


ChainBeforeTheMove = _as_before(ToolChain, ADDED_INSIDE_SINCE["chain"])

# The state as a worker of the release before the move reads it: every field at the top, each
# of the type and default it has now, and nothing else (an unknown field is refused).
StateBeforeTheMove: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "StateBeforeTheMove",
    __config__=ConfigDict(frozen=True, extra="forbid"),
    **{
        name: (field.annotation, field)
        for model in (SessionState, RealtimeCall)
        for name, field in model.model_fields.items()
        if name != "realtime" and name not in ADDED_SINCE and name not in ADDED_INSIDE_SINCE
    },
    chain=(ChainBeforeTheMove, ChainBeforeTheMove()),
)


def read_by_the_release_before(stored: str | dict[str, Any]) -> BaseModel:
    """`stored` as a worker of the release before the move reads it: the fields added since
    dropped (and named), nothing else."""
    before, dropped = across_releases(StateBeforeTheMove, stored)
    read = json.loads(stored) if isinstance(stored, str) else stored
    inside = {
        f"{name}.{added}"
        for name, names in ADDED_INSIDE_SINCE.items()
        for added in names
        if added in (read.get(name) or {})
    }
    assert set(dropped) == (ADDED_SINCE & set(read)) | inside
    return before


def without_the_added(stored: dict[str, Any]) -> dict[str, Any]:
    """What this release stores, less the fields added since the release before."""
    kept = {name: value for name, value in stored.items() if name not in ADDED_SINCE}
    for name, added in ADDED_INSIDE_SINCE.items():
        if isinstance(kept.get(name), dict):
            kept[name] = {key: value for key, value in kept[name].items() if key not in added}
    return kept


# Sessions folded by the release before the move (20491b2) and the state it stored of each.
STORED_BEFORE_THE_MOVE: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "stored_before_the_move.json").read_text()
)
