"""The actors: thin shells that lock a session, let `pipeline` decide, and emit the result.

Every actor reads the same way: validate the message, lock the row, apply, publish the
controls under the lock just before commit (DESIGN invariant 3: a rollback re-applies the
same events and re-emits the same control ids, which the gateway sends once), then schedule
timers and report incidents.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import dramatiq
import sentry_sdk
from pydantic import ValidationError

from models.records import session_record
from models.sessions import Applied, LockedSession, locked_session, new_session
from pipeline.api import SessionSpec
from pipeline.envelope import EventEnvelope, Reply
from pipeline.errors import BadInput, MalformedEnvelope, Refusal, SessionNotFound
from pipeline.names import ADMISSION_QUEUE, TOOL_QUEUE, TRANSCRIPT_QUEUE
from workers import runtime

_runtime = runtime.current()

# Retry fast, and long enough to ride out a PostgreSQL or Redis restart (a few seconds): an
# event that reaches the dead-letter queue leaves a gap its session waits on.
_EVENT_POLICY: dict[str, Any] = {"max_retries": 10, "min_backoff": 25, "max_backoff": 1_000}
_REQUEST_POLICY: dict[str, Any] = {"max_retries": 1, "min_backoff": 50, "max_backoff": 200}
# Refusals and bad input can never succeed: straight to the dead letters, no retry.
_NEVER_RETRIED = (Refusal, BadInput)


# ── numbered events ─────────────────────────────────────────────────────────────────────


def deliver(envelope_message: dict[str, Any]) -> Applied:
    """Log one numbered event and apply what is now contiguous, under the row lock."""
    try:
        envelope = EventEnvelope.model_validate(envelope_message)
    except ValidationError as exc:
        raise MalformedEnvelope(f"not an event envelope: {exc.errors()[0]['msg']}") from exc
    with locked_session(envelope.session_id) as session:
        applied = session.deliver(envelope)
        _publish(session, applied)
    _after_commit(envelope.session_id, applied)
    return applied


@dramatiq.actor(
    queue_name=ADMISSION_QUEUE, actor_name="admission_event", throws=_NEVER_RETRIED, **_EVENT_POLICY
)
def admission_event(envelope: dict[str, Any]) -> None:
    deliver(envelope)


@dramatiq.actor(
    queue_name=TRANSCRIPT_QUEUE, actor_name="transcript_event", throws=_NEVER_RETRIED, **_EVENT_POLICY
)
def transcript_event(envelope: dict[str, Any]) -> None:
    deliver(envelope)


@dramatiq.actor(queue_name=TOOL_QUEUE, actor_name="tool_event", throws=_NEVER_RETRIED, **_EVENT_POLICY)
def tool_event(envelope: dict[str, Any]) -> None:
    deliver(envelope)


# ── host inputs: creation, admission, timers ────────────────────────────────────────────


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="create_session", **_REQUEST_POLICY)
def create_session(
    request_id: str, gateway_id: str, session_id: str, spec: dict[str, Any], now: float
) -> None:
    """Create the session row, its first logged input, and its admission timer."""

    def create() -> tuple[int, dict[str, Any]]:
        checked = SessionSpec.model_validate(spec)
        event = {
            "type": "switchboard.session_created",
            "instructions": checked.instructions,
            "tools": [tool.model_dump(mode="json") for tool in checked.tools],
            "limits": _limits(checked),
        }
        with new_session(session_id, gateway_id) as session:
            applied = session.apply_host(event, now)
        _after_commit(session_id, applied)
        return 201, session_record(session_id)

    _answer(request_id, gateway_id, create)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="begin_admission", **_REQUEST_POLICY)
def begin_admission(request_id: str, gateway_id: str, session_id: str, now: float) -> None:
    """Move a created session to admitting and hand the gateway what the call needs."""

    def begin() -> tuple[int, dict[str, Any]]:
        with locked_session(session_id) as session:
            applied = session.apply_host({"type": "switchboard.admission_begun"}, now)
            _publish(session, applied)
            state = session.state
        _after_commit(session_id, applied)
        return 200, {
            "session_id": session_id,
            "instructions": state.instructions,
            "tools": [dict(tool) for tool in state.tools],
        }

    _answer(request_id, gateway_id, begin)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="attach_call", **_REQUEST_POLICY)
def attach_call(request_id: str, gateway_id: str, session_id: str, call_id: str, now: float) -> None:
    """Record the provider call id; the owning gateway is told to open the sideband."""

    def attach() -> tuple[int, dict[str, Any]]:
        event = {"type": "switchboard.call_attached", "call_id": call_id}
        with locked_session(session_id) as session:
            applied = session.apply_host(event, now)
            _publish(session, applied)
            state = session.state
        _after_commit(session_id, applied)
        if state.is_terminal:
            # The session ended while the call was being created (the admission timeout):
            # the fresh call is hung up by the directive just published.
            message = f"session is {state.phase} ({state.end_reason}); the new call was hung up"
            return 409, {"error": {"code": "session_ended", "message": message}}
        return 200, {"session_id": session_id, "status": str(state.phase), "call_id": call_id}

    _answer(request_id, gateway_id, attach)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="admission_failed", **_REQUEST_POLICY)
def admission_failed(
    request_id: str, gateway_id: str, session_id: str, code: str, detail: str, now: float
) -> None:
    """The provider refused or failed the call: the session fails with that reason."""

    def record() -> tuple[int, dict[str, Any]]:
        event = {"type": "switchboard.admission_failed", "code": code, "detail": detail}
        with locked_session(session_id) as session:
            applied = session.apply_host(event, now)
            _publish(session, applied)
        _after_commit(session_id, applied)
        return 200, {"session_id": session_id, "status": "failed", "reason": code}

    _answer(request_id, gateway_id, record)


@dramatiq.actor(
    queue_name=ADMISSION_QUEUE, actor_name="session_timer", throws=_NEVER_RETRIED, **_EVENT_POLICY
)
def session_timer(session_id: str, name: str) -> None:
    """A delayed message: the timer is checked against the state it finds, under the lock."""
    with locked_session(session_id) as session:
        applied = session.apply_host({"type": "switchboard.timer_fired", "name": name}, time.time())
        _publish(session, applied)
    _after_commit(session_id, applied)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="describe_session", **_REQUEST_POLICY)
def describe_session(request_id: str, gateway_id: str, session_id: str, with_events: bool = False) -> None:
    _answer(request_id, gateway_id, lambda: (200, session_record(session_id, with_events=with_events)))


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="record_incident", **_REQUEST_POLICY)
def record_incident(session_id: str | None, code: str, summary: str, context: dict[str, Any]) -> None:
    """A gateway-side incident (a malformed or oversized frame): durable, and in Sentry."""
    from models.db import IncidentRow, SessionRow

    known = session_id is not None and SessionRow.get_or_none(SessionRow.id == session_id) is not None
    IncidentRow.create(
        session=session_id if known else None,
        code=code,
        severity="warning",
        summary=summary,
        context={**context, "session_id": session_id},
    )


# ── shared ──────────────────────────────────────────────────────────────────────────────


def _publish(session: LockedSession, applied: Applied) -> None:
    _runtime.publisher.publish(session.owning_gateway, session.id, session.state.generation, applied.outbound)


def _after_commit(session_id: str, applied: Applied) -> None:
    for timer in applied.timers:
        session_timer.send_with_options(
            kwargs={"session_id": session_id, "name": timer.name}, delay=timer.delay_ms
        )
    for incident in applied.incidents:
        if incident.severity == "error":
            with sentry_sdk.new_scope() as scope:
                scope.set_tag("session_id", session_id)
                scope.set_tag("incident", incident.code)
                scope.set_context("incident", incident.context)
                sentry_sdk.capture_message(f"session failed: {incident.code}: {incident.summary}", "error")


def _answer(request_id: str, gateway_id: str, work: Callable[[], tuple[int, dict[str, Any]]]) -> None:
    """Run an API request's work and reply to the gateway waiting on it, with a typed error
    for refusals and bad input (faults propagate, so Dramatiq retries them)."""
    try:
        status, body = work()
    except SessionNotFound as exc:
        status, body = 404, {"error": {"code": exc.code, "message": str(exc)}}
    except Refusal as exc:
        status, body = 409, {"error": {"code": exc.code, "message": str(exc)}}
    except (BadInput, ValidationError) as exc:
        code = exc.code if isinstance(exc, BadInput) else "malformed_request"
        status, body = 422, {"error": {"code": code, "message": str(exc)}}
    reply = Reply(id=f"reply_{request_id}", request_id=request_id, status=status, body=body)
    _runtime.publisher.publish(gateway_id, body.get("id") or body.get("session_id") or "", 0, [reply])


def _limits(spec: SessionSpec) -> dict[str, Any]:
    settings = _runtime.settings
    return {
        "max_output_tokens": spec.limits.max_output_tokens or settings.max_output_tokens,
        "max_session_seconds": spec.limits.max_session_seconds or settings.max_session_seconds,
    }
