"""Durable tool steps in PostgreSQL, changed only under their session's row lock.

The rules are the seeds': a function call is requested once (same identity → the same step;
another identity for the same call id → `ProviderCallIdConflict`), starts once, and takes one
terminal outcome that no different outcome can overwrite.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from models.db import SessionTransaction, database
from pipeline.call.catalog import ToolError, ToolOutcome
from pipeline.call.errors import ProviderCallIdConflict, ToolOutcomeConflict, ToolStepTerminal
from pipeline.call.tool_steps import ToolStep, ToolStepIdentity, outcome_digest
from pipeline.session.state import SessionState
from pipeline.session.step import InterruptToolStep, RefuseToolStep, RequestToolStep

_COLUMNS = (
    "session_id, provider_call_id, provider_item_id, provider_response_id, turn_input_item_id,"
    " tool_name, tool_version, catalog_digest, side_effect, raw_arguments, argument_digest,"
    " invocation_key, sequence, status, result, error, outcome_digest, elapsed_ms,"
    " requested_at, started_at, completed_at"
)

SELECT_STEP = f"SELECT {_COLUMNS} FROM tool_steps WHERE session_id = %s AND provider_call_id = %s"

# One round trip: the new step as stored, or nothing when the call id has a step already.
INSERT_STEP = f"""
INSERT INTO tool_steps (session_id, provider_call_id, provider_item_id, provider_response_id,
    turn_input_item_id, tool_name, tool_version, catalog_digest, side_effect, raw_arguments,
    argument_digest, invocation_key, sequence, status, started_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
    (SELECT coalesce(max(sequence), 0) + 1 FROM tool_steps WHERE session_id = %s), %s,
    CASE WHEN %s THEN now() END)
ON CONFLICT (session_id, provider_call_id) DO NOTHING
RETURNING {_COLUMNS}
"""

START_STEP = f"""
UPDATE tool_steps SET status = 'running', started_at = now()
 WHERE session_id = %s AND provider_call_id = %s AND status = 'requested'
RETURNING {_COLUMNS}
"""

FINISH_STEP = f"""
UPDATE tool_steps SET status = %s, result = %s::jsonb, error = %s::jsonb, outcome_digest = %s,
    elapsed_ms = %s, completed_at = now()
 WHERE session_id = %s AND provider_call_id = %s AND status IN ('requested', 'running')
RETURNING {_COLUMNS}
"""

ACTIVE_STEPS = f"""
SELECT {_COLUMNS} FROM tool_steps
 WHERE session_id = %s AND status IN ('requested', 'running') ORDER BY sequence
"""

ALL_STEPS = f"SELECT {_COLUMNS} FROM tool_steps WHERE session_id = %s ORDER BY sequence"

_IDENTITY_FIELDS = (
    "provider_item_id",
    "provider_response_id",
    "turn_input_item_id",
    "tool_name",
    "tool_version",
    "catalog_digest",
    "side_effect",
    "raw_arguments",
)


STEP_FINISHED = """
SELECT 1 FROM tool_steps
 WHERE session_id = %s AND provider_call_id = %s AND status NOT IN ('requested', 'running')
"""


def is_finished(session_id: str, provider_call_id: str) -> bool:
    """Whether the step has its terminal outcome (read without the session's lock: once
    finished, a step stays finished)."""
    return database.execute_sql(STEP_FINISHED, (session_id, provider_call_id)).fetchone() is not None


def find_step(session: SessionTransaction, provider_call_id: str) -> ToolStep | None:
    row = session.execute(SELECT_STEP, (session.id, provider_call_id)).fetchone()
    return None if row is None else _step(row)


def request_step(
    session: SessionTransaction, identity: ToolStepIdentity, *, running: bool = False
) -> tuple[ToolStep, Literal["created", "existing"]]:
    """The step for this function call: created now (running already, if `running`), or the
    existing one with the same identity. Another identity under the same call id is refused.
    A new step costs one round trip."""
    row = session.execute(
        INSERT_STEP,
        (
            identity.session_id,
            identity.provider_call_id,
            identity.provider_item_id,
            identity.provider_response_id,
            identity.turn_input_item_id,
            identity.tool_name,
            identity.tool_version,
            identity.catalog_digest,
            identity.side_effect,
            identity.raw_arguments,
            identity.argument_digest,
            identity.invocation_key,
            identity.session_id,
            "running" if running else "requested",
            running,
        ),
    ).fetchone()
    if row is not None:
        return _step(row), "created"
    existing = find_step(session, identity.provider_call_id)
    assert existing is not None
    if existing.identity != identity:
        differing = [
            name for name in _IDENTITY_FIELDS if getattr(existing.identity, name) != getattr(identity, name)
        ]
        raise ProviderCallIdConflict(
            f"call {identity.provider_call_id!r} was requested with other {', '.join(differing)}"
        )
    return existing, "existing"


def start_step(
    session: SessionTransaction, provider_call_id: str
) -> tuple[ToolStep, Literal["started", "already_running"]]:
    """Move a requested step to running; a running one is reported as such; a finished one
    cannot start again."""
    row = session.execute(START_STEP, (session.id, provider_call_id)).fetchone()
    if row is not None:
        return _step(row), "started"
    step = find_step(session, provider_call_id)
    if step is None:
        raise ToolStepTerminal(f"no tool step for call {provider_call_id!r}")
    if step.status == "running":
        return step, "already_running"
    raise ToolStepTerminal(f"tool step {provider_call_id!r} is {step.status}; it cannot start again")


def finish_step(session: SessionTransaction, provider_call_id: str, outcome: ToolOutcome) -> ToolStep:
    """Record the step's terminal outcome once (one round trip). The same outcome again returns
    the step as it is; a different outcome for a finished step is refused."""
    digest = outcome_digest(outcome)
    error = outcome.error.model_dump(mode="json") if outcome.error else None
    row = session.execute(
        FINISH_STEP,
        (
            outcome.status,
            json.dumps(outcome.result),
            json.dumps(error),
            digest,
            outcome.elapsed_ms,
            session.id,
            provider_call_id,
        ),
    ).fetchone()
    if row is not None:
        return _step(row)
    step = find_step(session, provider_call_id)
    if step is None:
        raise ToolStepTerminal(f"no tool step for call {provider_call_id!r}")
    if step.outcome_digest != digest:
        raise ToolOutcomeConflict(
            f"tool step {provider_call_id!r} is already {step.status};"
            f" a {outcome.status} outcome cannot replace it"
        )
    return step


def begin_body(session_id: str, provider_call_id: str) -> bool:
    """Note, committed before the body runs, that the step's body starts now; False when an
    earlier run noted it already (it may have reached the world before its worker died). Two
    runs at once: one is first."""
    with database.atomic():
        row = database.execute_sql(
            "UPDATE tool_steps SET body_started_at = now()"
            " WHERE session_id = %s AND provider_call_id = %s AND body_started_at IS NULL RETURNING 1",
            (session_id, provider_call_id),
        ).fetchone()
    return row is not None


def interrupt_active_steps(session: SessionTransaction, code: str, message: str) -> list[ToolStep]:
    """Finish every requested or running step as interrupted, naming the real reason (a crash,
    the session ending): each then gets exactly one output."""
    active = [_step(row) for row in session.execute(ACTIVE_STEPS, (session.id,)).fetchall()]
    outcome = ToolOutcome(status="interrupted", error=ToolError(code=code, message=message), elapsed_ms=0)
    return [finish_step(session, step.identity.provider_call_id, outcome) for step in active]


def record_decided(
    session: SessionTransaction, state: SessionState, effect: RequestToolStep | RefuseToolStep
) -> None:
    """The durable step of a function call the session decided on: running for a request,
    terminal for a refusal."""
    identity = ToolStepIdentity(
        session_id=session.id,
        provider_call_id=effect.call_id,
        provider_item_id=effect.item_id,
        provider_response_id=effect.response_id,
        turn_input_item_id=state.realtime.turn.context.input_item_id if state.realtime.turn else None,
        tool_name=effect.name,
        tool_version=effect.version or state.tool_versions.get(effect.name, "unknown"),
        catalog_digest=state.catalog_digest or "none",
        side_effect=state.tool_side_effects.get(effect.name, "unknown"),
        raw_arguments=effect.arguments,
    )
    if isinstance(effect, RequestToolStep):
        if request_step(session, identity, running=True)[1] == "existing":
            start_step(session, effect.call_id)
    else:
        request_step(session, identity)
        error = ToolError(code=effect.code, message=effect.message)
        finish_step(session, effect.call_id, ToolOutcome(status=effect.status, error=error, elapsed_ms=0))


def interrupt_decided(session: SessionTransaction, effect: InterruptToolStep) -> None:
    """Finish a running step as interrupted; one that finished meanwhile keeps its outcome."""
    error = ToolError(code=effect.code, message=effect.message)
    try:
        finish_step(session, effect.call_id, ToolOutcome(status="interrupted", error=error, elapsed_ms=0))
    except (ToolOutcomeConflict, ToolStepTerminal):
        pass


def steps_of(session: SessionTransaction) -> list[ToolStep]:
    return [_step(row) for row in session.execute(ALL_STEPS, (session.id,)).fetchall()]


def _step(row: tuple[Any, ...]) -> ToolStep:
    (
        session_id,
        call_id,
        item_id,
        response_id,
        turn_item,
        name,
        version,
        catalog,
        side_effect,
        raw_arguments,
        _argument_digest,
        _invocation_key,
        sequence,
        status,
        result,
        error,
        digest,
        elapsed_ms,
        requested_at,
        started_at,
        completed_at,
    ) = row
    identity = ToolStepIdentity(
        session_id=session_id,
        provider_call_id=call_id,
        provider_item_id=item_id,
        provider_response_id=response_id,
        turn_input_item_id=turn_item,
        tool_name=name,
        tool_version=version,
        catalog_digest=catalog,
        side_effect=side_effect,
        raw_arguments=raw_arguments,
    )
    return ToolStep(
        identity=identity,
        sequence=sequence,
        status=status,
        result=result,
        error=error,
        outcome_digest=digest,
        elapsed_ms=elapsed_ms,
        requested_at=requested_at,
        started_at=started_at,
        completed_at=completed_at,
    )
