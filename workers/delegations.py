"""Running a Live delegation's handler on tool_runs: the same runner as a tool body (its time
limit, its cooperative cancellation, every failure a typed outcome), given the task, the
transcript so far and the session's state. The actor (`workers.actors.tools.run_tool`) records the
outcome as for a tool."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from models.delegations import delegation_context
from pipeline.call.catalog import SideEffect, ToolError, ToolOutcome, ToolSpec
from workers.tools.registry import DelegationRefused, DelegationRequest, HandlerRegistry, Tool, ToolContext
from workers.tools.runner import run_tool

# The result key a refusal travels under from the handler's thread to the outcome (a handler's
# own result is a string, so it can never hold it).
_REFUSED = "switchboard.refused"
# What the runner checks the task against: it is Switchboard's own, built by the pipeline.
_TASK_SCHEMA: dict[str, Any] = {"type": "object", "required": ["task"]}


def run_handler(
    handlers: HandlerRegistry,
    session_id: str,
    delegation_id: str,
    name: str,
    arguments: str,
    *,
    timeout_ms: int,
    cancelled: Callable[[], bool],
) -> ToolOutcome:
    """The outcome of one delegation: the handler's answer, its refusal, or why there is none."""
    handler = handlers.get(name)
    if handler is None:
        return ToolOutcome(
            status="unavailable",
            error=ToolError(code="delegation_handler_unavailable", message=f"no delegation handler {name!r}"),
            elapsed_ms=0,
        )
    state, transcript = delegation_context(session_id)
    task = json.loads(arguments)

    def body(_arguments: dict[str, Any], context: ToolContext) -> Any:
        request = DelegationRequest(
            session_id=session_id,
            delegation_id=delegation_id,
            task=str(task.get("task", "")),
            covered=bool(task.get("covered", False)),
            transcript=transcript,
            state=state,
        )
        try:
            return handler.fn(request, context)
        except DelegationRefused as refusal:
            return {_REFUSED: str(refusal) or "no reason was given"}

    spec = ToolSpec(
        name=handler.name,
        version=handler.version,
        description=handler.description,
        parameters=_TASK_SCHEMA,
        side_effect=SideEffect.EXTERNAL,
    )
    outcome = run_tool(Tool(spec=spec, fn=body), arguments, timeout_ms=timeout_ms, cancelled=cancelled)
    result = outcome.result
    if outcome.status == "succeeded" and isinstance(result, dict) and _REFUSED in result:
        return ToolOutcome(
            status="refused",
            error=ToolError(code="delegation_refused", message=str(result[_REFUSED])[:2_000]),
            elapsed_ms=outcome.elapsed_ms,
        )
    return outcome
