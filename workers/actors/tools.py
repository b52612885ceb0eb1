"""Tools: the registered tools a session is offered, and tool bodies run outside the row lock
(on tool_runs, or inline right after the commit that decided a quick one's call)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import dramatiq

from models import data_keys, tool_steps
from models.sessions import locked_session
from pipeline.call.catalog import SideEffect, ToolError, ToolOutcome
from pipeline.call.errors import ToolOutcomeConflict
from pipeline.call.limits import INLINE_TOOL_MS, MAXIMUM_TOOL_MS
from pipeline.live.delegation import DELEGATION_RUN_PREFIX
from pipeline.platform.names import READS_QUEUE, TOOL_RUNS_QUEUE
from pipeline.privacy.sealing import open_sealed
from pipeline.session.step import RunTool
from pipeline.session.wire import ToolFinished
from workers import delegations, runtime, tracing
from workers import metrics as worker_metrics
from workers.actors.shared import (
    NEVER_RETRIED,
    REQUEST_POLICY,
    after_commit,
    answer_read,
    cancel_key,
    deployment,
    publish,
    runs_inline_with,
    tools_offered,
)
from workers.tools.runner import run_tool as execute_tool

logger = logging.getLogger(__name__)

_runtime = runtime.current()


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="resolve_tools", **REQUEST_POLICY)
def resolve_tools(request_id: str, gateway_id: str, names: list[str]) -> None:
    """The registered tools of these names as a session is offered them (422 for an unknown
    one): what `PUT /v1/sessions/{id}/tools` numbers into the session's log."""
    answer_read(request_id, gateway_id, lambda: (200, tools_offered(tuple(names))))


@dramatiq.actor(
    queue_name=TOOL_RUNS_QUEUE,
    actor_name="run_tool",
    throws=NEVER_RETRIED,
    max_retries=3,
    min_backoff=100,
    max_backoff=1_000,
    time_limit=MAXIMUM_TOOL_MS + 30_000,
)
def run_tool(
    session_id: str, call_id: str, name: str, arguments: str, traceparent: str | None = None
) -> None:
    """Run one tool body (bounded in time, cooperatively cancellable) and bring its outcome
    back as an input applied under the row lock. A step that already finished (a redelivered
    message, or the backup of an inline run that went through) is not run again."""
    if tool_steps.is_finished(session_id, call_id):
        return
    with locked_session(session_id, namespace=deployment()) as session:
        step = tool_steps.find_step(session, call_id)
    if step is None or step.is_terminal:
        return
    _run_and_finish(
        session_id,
        call_id,
        name,
        arguments,
        timeout_ms=_runtime.settings.tool_timeout_ms,
        waited=True,
        traceparent=traceparent,
    )


def _run_inline(session_id: str, run: RunTool) -> None:
    """A quick tool's body, run right after the transaction that decided its call committed,
    on the same worker: one queue hop and one transaction fewer than on tool_runs. Its backup
    message was sent first: if this worker dies with the body running, tool_runs runs it."""
    try:
        # It starts the moment its call was decided: no cancellation can have come first.
        _run_and_finish(
            session_id, run.call_id, run.name, run.arguments, timeout_ms=INLINE_TOOL_MS, waited=False
        )
    except Exception:  # its backup answers the call (and Dramatiq must not re-run the event)
        logger.exception("inline run of %s for %s failed; its backup will run it", run.name, session_id)


runs_inline_with(_run_inline)


def _run_and_finish(
    session_id: str,
    call_id: str,
    name: str,
    arguments: str,
    *,
    timeout_ms: int,
    waited: bool,
    traceparent: str | None = None,
) -> None:
    """Run the body outside the lock, then record its one outcome and apply it under the lock
    (`waited`: the run waited in a queue, so it may have been cancelled before it starts). A
    Live delegation's handler (never inline: it is no registered tool) runs the same way."""
    # The span covers the outcome's recording too: the controls it publishes (the output, the
    # answer's response.create) are its children.
    with tracing.tool_run(
        session_id, call_id, name.removeprefix(DELEGATION_RUN_PREFIX), traceparent
    ) as traced:
        outcome = _outcome_of(session_id, call_id, name, arguments, timeout_ms=timeout_ms, waited=waited)
        traced.append(outcome)
        event = ToolFinished(call_id=call_id, outcome=outcome.model_dump(mode="json"))
        with locked_session(session_id, namespace=deployment()) as session:
            try:
                tool_steps.finish_step(session, call_id, outcome)
            except ToolOutcomeConflict:
                return  # finished meanwhile with another outcome (interrupted): that one stands
            applied = session.apply_host(event, time.time())
            publish(session, applied)
        after_commit(session_id, applied)


def _outcome_of(
    session_id: str, call_id: str, name: str, arguments: str, *, timeout_ms: int, waited: bool
) -> ToolOutcome:
    """Run a tool body (or a Live delegation's handler) outside the lock: its one outcome."""
    cancel_flag = cancel_key(session_id, call_id)
    declared = _runtime.registry.get(name)
    if name.startswith(DELEGATION_RUN_PREFIX):
        # A Live delegation: its handler runs here under the same limit and cancellation.
        name = name.removeprefix(DELEGATION_RUN_PREFIX)
        outcome = delegations.run_handler(
            _runtime.handlers,
            session_id,
            call_id,
            name,
            arguments,
            timeout_ms=timeout_ms,
            cancelled=lambda: bool(_runtime.broker.client.exists(cancel_flag)),
        )
    elif declared is None:
        outcome = ToolOutcome(
            status="unavailable",
            error=ToolError(code="tool_unavailable", message=f"no registered tool {name!r}"),
            elapsed_ms=0,
        )
    elif declared.spec.side_effect == SideEffect.EXTERNAL and not tool_steps.begin_body(session_id, call_id):
        # Reaches outside the deployment, and an earlier run began it before its worker died:
        # it may have happened. It never runs twice; the model is told the outcome is unknown.
        outcome = ToolOutcome(
            status="failed",
            error=ToolError(
                code="outcome_unknown",
                message=(
                    f"{name} was started once and its worker stopped before it answered: it may or may not "
                    "have happened, and it is not run again. Do not tell the caller it happened or not; "
                    "say it needs checking."
                ),
            ),
            elapsed_ms=0,
        )
    else:
        outcome = execute_tool(
            declared,
            arguments,
            timeout_ms=timeout_ms,
            cancelled=lambda: bool(_runtime.broker.client.exists(cancel_flag)),
            asked_before_start=waited,
            open_sealed_value=_opener(session_id),
        )
    worker_metrics.tool_ran(name, outcome)
    return outcome


def _opener(session_id: str) -> Callable[[str], str]:
    """Opens the session's sealed values with its private key, read (and unwrapped) once, when
    the first is opened: a tool with no sensitive parameters costs no query."""
    private: list[bytes] = []

    def open_value(sealed: str) -> str:
        if not private:
            private.append(data_keys.session_private_key(session_id, _runtime.keys))
        return open_sealed(sealed, private_key=private[0], session_id=session_id)

    return open_value
