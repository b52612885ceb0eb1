"""What every room's actors share: the queue policies, publishing under the row lock, what a
commit sends after it, answering the gateway, and a session's creation from its spec.

Every actor reads the same way: validate the message, lock the row, apply, publish the
controls under the lock just before commit (DESIGN invariant 3: a rollback re-applies the
same events and re-emits the same control ids, which the gateway sends once), then schedule
timers and report incidents (`after_commit`).

The commit path sends other rooms' actors by name on their queue (`ActorAddress`), as the
gateway does, so this module imports no room and no room imports another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import dramatiq
import sentry_sdk
from pydantic import ValidationError

from models import agents
from models.applied import Applied
from models.db import is_connection_lost, reopen
from models.sessions import LockedSession
from pipeline.admission import current_digest, session_catalog, session_created_from
from pipeline.agents.versions import call_spec, parsed_ref, version_spec
from pipeline.api.event_streams import Waiting
from pipeline.api.requests import SessionSpec
from pipeline.call.catalog import ToolSpec
from pipeline.call.errors import BadInput, LiveModelAtCapacity, NotFound, Refusal
from pipeline.call.limits import INLINE_TOOL_BACKUP_MS
from pipeline.platform.envelope import Reply
from pipeline.platform.names import ADMISSION_QUEUE, APP_WEBHOOKS_QUEUE, EVENT_STREAMS_QUEUE, TOOL_RUNS_QUEUE
from pipeline.session.state import AgentRef
from pipeline.session.step import RunTool
from pipeline.session.wire import SessionCreated
from workers import app_webhooks, runtime, tracing
from workers import metrics as worker_metrics
from workers.middleware import Sweeps

logger = logging.getLogger(__name__)

_runtime = runtime.current()
# The worker's periodic sweeps (timers, campaigns, retention), added in the room of each.
sweeps = Sweeps()
_runtime.broker.add_middleware(sweeps)

# Retry fast, and long enough to ride out a Redis restart (a few seconds): an event that reaches
# the dead-letter queue leaves a gap its session waits on. A call's message that finds
# PostgreSQL away does not spend these: it waits for the database (workers.outages).
EVENT_POLICY: dict[str, Any] = {"max_retries": 10, "min_backoff": 25, "max_backoff": 1_000}
REQUEST_POLICY: dict[str, Any] = {"max_retries": 1, "min_backoff": 50, "max_backoff": 200}
# Refusals and bad input can never succeed: straight to the dead letters, no retry.
NEVER_RETRIED = (Refusal, BadInput)

# A cancellation flag outlives any tool run (30 s at most) and then disappears by itself.
TOOL_CANCEL_TTL_S = 120


def deployment() -> str:
    """This worker's deployment: every session it reads or locks by id must be one of its own
    (deployments may share a database, and one's ids must never reach another's calls)."""
    return _runtime.settings.broker_namespace


# ── other rooms' actors, by name ────────────────────────────────────────────────────────


@dataclass(frozen=True)
class ActorAddress:
    """An actor of another room, reached by its name on its queue (`tests/workers/
    test_actor_addresses.py` holds each to the actor its room declares)."""

    actor_name: str
    queue_name: str

    def message(self, kwargs: dict[str, Any], **options: Any) -> dramatiq.Message[Any]:
        """A message to the actor, as its `message_with_options` would make it."""
        return dramatiq.Message(
            queue_name=self.queue_name, actor_name=self.actor_name, args=(), kwargs=kwargs, options=options
        )


# The actors sent by name from another room (their names and queues are the wire: unchanged).
NOTIFY_APP = ActorAddress("notify_app", APP_WEBHOOKS_QUEUE)
NOTIFY_CAMPAIGN = ActorAddress("notify_campaign", APP_WEBHOOKS_QUEUE)
STREAM_EVENTS = ActorAddress("stream_events", EVENT_STREAMS_QUEUE)
RUN_TOOL = ActorAddress("run_tool", TOOL_RUNS_QUEUE)
CAMPAIGN_TICK = ActorAddress("campaign_tick", ADMISSION_QUEUE)
SESSION_TIMER = ActorAddress("session_timer", ADMISSION_QUEUE)
ADDRESSES = (NOTIFY_APP, NOTIFY_CAMPAIGN, STREAM_EVENTS, RUN_TOOL, CAMPAIGN_TICK, SESSION_TIMER)


def app_notification(address: ActorAddress, kwargs: dict[str, Any]) -> dramatiq.Message[Any]:
    """A notification to an app, retried with the deployment's webhook backoff."""
    settings = _runtime.settings
    return address.message(
        kwargs,
        max_retries=settings.app_webhook_retries,
        min_backoff=settings.app_webhook_min_backoff_ms,
        max_backoff=settings.app_webhook_max_backoff_ms,
    )


def stream_sweep(
    session_id: str, waiting: Waiting | None = None, *, last_traceback: str | None = None
) -> dramatiq.Message[Any]:
    """A sweep of the session's stream: a commit's, or the session's sweep waiting for its broker."""
    settings = _runtime.settings
    kwargs: dict[str, Any] = {"session_id": session_id}
    if waiting is not None:
        kwargs["waiting"] = waiting.as_json()
    options: dict[str, Any] = {}
    if last_traceback:
        options["traceback"] = last_traceback
    return STREAM_EVENTS.message(
        kwargs,
        max_retries=settings.event_stream_retries,
        min_backoff=settings.event_stream_min_backoff_ms,
        max_backoff=settings.event_stream_max_backoff_ms,
        **options,
    )


def cancel_key(session_id: str, call_id: str) -> str:
    """The Redis flag that asks a running tool body to stop."""
    return f"{_runtime.settings.broker_namespace}:tool-cancel:{session_id}:{call_id}"


# A quick tool's body runs on this worker right after the commit that decided its call. The
# tools room says how, when it is imported (`runs_inline_with`), so this path imports no room;
# a worker without it leaves each such body to its backup message on tool_runs.
_inline_runs: list[Callable[[str, RunTool], None]] = []


def runs_inline_with(run: Callable[[str, RunTool], None]) -> None:
    """Run quick tools' bodies after each commit with `run` (the tools room's, registered once)."""
    _inline_runs[:] = [run]


# ── the commit path ─────────────────────────────────────────────────────────────────────


def publish(session: LockedSession, applied: Applied) -> None:
    """Publish what the session's gateway is told, and the replies its askers wait on, under
    the row lock before the commit."""
    _runtime.publisher.publish(
        session.owning_gateway,
        session.id,
        session.state.generation,
        applied.to_gateway,
        session.applied_seq,
        traceparent=tracing.current_traceparent(),
    )
    for gateway_id, reply in applied.replies:
        # The gateway that took the API request waits for it; it need not own the session.
        _runtime.publisher.publish(gateway_id, session.id, session.state.generation, [reply])


def after_commit(session_id: str, applied: Applied) -> None:
    """Send what a commit asks for (notifications, stream sweeps, tool runs, timers, campaign
    ticks), flag cancelled tools, report failures, then run its quick tools' bodies."""
    settings = _runtime.settings
    model = settings.served_by(applied.provider, applied.model)
    worker_metrics.recorded(applied, settings.prices_for(model), model, applied.agent)
    # What the transaction asks to be sent, sent together: one round trip, not one each (a tool
    # call's run, or its inline backup, and its deadline timer were two before the body ran).
    sends: list[tuple[dramatiq.Message[Any], int | None]] = []
    for told in applied.notifications:
        message = app_notification(
            NOTIFY_APP,
            {
                "session_id": session_id,
                "delivery_id": app_webhooks.webhook_id(session_id, told.kind, told.key),
                "kind": told.kind,
                "data": told.data,
            },
        )
        sends.append((message, None))
    if applied.streams_events:
        # A sweep per commit that applied something: each publishes whatever the cursor has not
        # (so a lost or failed one is made good by the next), or leaves it to the session's
        # publisher, or to its sweep waiting for a broker that is down.
        sends.append((stream_sweep(session_id), None))
    for cancel in applied.tool_cancels:
        _runtime.broker.client.set(
            cancel_key(session_id, cancel.call_id), cancel.reason, ex=TOOL_CANCEL_TTL_S
        )
    inline: list[RunTool] = []
    traceparent = tracing.current_traceparent()
    for run in applied.tool_runs:
        kwargs = {
            "session_id": session_id,
            "call_id": run.call_id,
            "name": run.name,
            "arguments": run.arguments,
        }
        if traceparent is not None:
            kwargs["traceparent"] = traceparent
        message = RUN_TOOL.message(kwargs)
        declared = _runtime.registry.get(run.name)
        if declared is not None and declared.runs_inline:
            sends.append((message, INLINE_TOOL_BACKUP_MS))
            inline.append(run)
        else:
            sends.append((message, None))
    for campaign_id in dict.fromkeys(applied.campaigns):
        # A call of the campaign ended: its dialer looks again now (a retry, the next contact).
        sends.append((CAMPAIGN_TICK.message({"campaign_id": campaign_id}), None))
    for timer in applied.timers:
        if timer.swept_only:
            continue
        message = SESSION_TIMER.message({"session_id": session_id, "name": timer.name})
        sends.append((message, timer.delay_ms))
    send_all(sends)
    for incident in applied.incidents:
        if incident.severity == "error":
            with sentry_sdk.new_scope() as scope:
                scope.set_tag("session_id", session_id)
                scope.set_tag("incident", incident.code)
                scope.set_context("incident", incident.context)
                sentry_sdk.capture_message(f"session failed: {incident.code}: {incident.summary}", "error")
    for run in inline:
        for run_inline in _inline_runs:
            run_inline(session_id, run)


def send_all(sends: list[tuple[dramatiq.Message[Any], int | None]]) -> None:
    """Enqueue messages (each with its delay) in one round trip where the broker can (the
    wake broker), else one at a time."""
    if not sends:
        return
    enqueue_all = getattr(_runtime.broker, "enqueue_all", None)
    if enqueue_all is not None:
        enqueue_all(sends)
        return
    for message, delay in sends:
        _runtime.broker.enqueue(message, delay=delay)


# ── answering the gateway ───────────────────────────────────────────────────────────────


def answer_read(request_id: str, gateway_id: str, work: Callable[[], tuple[int, dict[str, Any]]]) -> None:
    """A read of the API (the reads queue): answered as `answer_request` does, but when the database is
    away it is answered 503 `database_unavailable` at once and not retried. Its asker may ask
    again; a retry after the gateway stopped waiting would answer nobody, and its dead letter
    would only be noise for whoever looks after the real ones."""
    try:
        answer_request(request_id, gateway_id, work)
    except Exception as error:
        if not is_connection_lost(error):
            raise
        reopen()
        logger.warning("a read found the database away; answered 503: %s", str(error).strip().splitlines()[0])
        body = {
            "error": {"code": "database_unavailable", "message": "the database does not answer; ask again"}
        }
        reply = Reply(id=f"reply_{request_id}", request_id=request_id, status=503, body=body)
        _runtime.publisher.publish(gateway_id, "", 0, [reply])


def answer_request(request_id: str, gateway_id: str, work: Callable[[], tuple[int, dict[str, Any]]]) -> None:
    """Run an API request's work and reply to the gateway waiting on it, with a typed error
    for refusals and bad input (faults propagate, so Dramatiq retries them)."""
    try:
        status, body = work()
    except NotFound as exc:
        status, body = 404, exc.body()
    except LiveModelAtCapacity as exc:
        # The deployment is full, not the request wrong: asked again later, it may be admitted.
        status, body = 503, exc.body()
    except Refusal as exc:
        status, body = 409, exc.body()
    except (BadInput, ValidationError) as exc:
        code = exc.code if isinstance(exc, BadInput) else "malformed_request"
        status, body = 422, {"error": {"code": code, "message": str(exc)}}
    reply = Reply(id=f"reply_{request_id}", request_id=request_id, status=status, body=body)
    _runtime.publisher.publish(gateway_id, body.get("id") or body.get("session_id") or "", 0, [reply])


# ── a session's creation, against this worker's registries ──────────────────────────────


def session_created(checked: SessionSpec, *, vars_to_come: bool = False) -> SessionCreated:
    """A session's first input, from its spec (or the agent version it names, with the spec's
    own fields on top), against this worker's tools, delegation handlers and settings (see
    `pipeline.admission.session_created_from`); the agent version is recorded with it."""
    spec, agent = spec_to_run(checked, vars_to_come=vars_to_come)
    created = session_created_from(
        spec,
        tools=registered_tools(),
        handlers=registered_handlers(),
        settings=_runtime.settings,
        today=datetime.now(UTC).date(),
    )
    return created if agent is None else created.model_copy(update={"agent": agent})


def spec_to_run(asked: SessionSpec, *, vars_to_come: bool = False) -> tuple[SessionSpec, AgentRef | None]:
    """The spec a new call runs: the one asked, or the named agent's version (published, or
    pinned) under what was asked; its vars filled in (unless they are `vars_to_come`: a
    campaign's spec, checked when it is made, before its contacts bring theirs)."""
    if asked.agent is None:
        return (
            asked
            if not asked.vars
            else call_spec(version_spec(asked.model_copy(update={"vars": None})), asked)
        ), None
    name, pinned = parsed_ref(asked.agent)
    number, stored = agents.resolved(deployment(), name, pinned)
    return call_spec(stored, asked, fill=not vars_to_come), AgentRef(name=name, version=number)


def tools_offered(names: tuple[str, ...]) -> dict[str, Any]:
    """The registered tools a session asked for, fixed with their digest (see
    `pipeline.admission.session_catalog`)."""
    return session_catalog(names, registered_tools())


def digest_now(tool_versions: dict[str, str]) -> str:
    """The digest the session's tools have in this worker's registry ("" if one is gone)."""
    return current_digest(tool_versions, registered_tools())


def registered_tools() -> dict[str, ToolSpec]:
    """This worker's registered tools' specs by name, in the order they were registered."""
    return {declared.name: declared.spec for declared in _runtime.registry.tools}


def registered_handlers() -> dict[str, str]:
    """This worker's registered delegation handlers' versions by name, in registration order."""
    return {handler.name: handler.version for handler in _runtime.handlers.handlers}
