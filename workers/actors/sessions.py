"""A session's own life: its creation, admission, the call attached, a failed admission, its
timers (and the sweeper that fires those whose message was lost), and the gateway's incidents."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Literal

import dramatiq

from models import incidents, live_caps, timers
from models.records import session_record
from models.sessions import locked_session, new_session
from pipeline.admission import LiveCaps, connect_cap, creation_configuration, creation_warnings
from pipeline.api.requests import SessionSpec
from pipeline.call.errors import SessionExists
from pipeline.platform.names import ADMISSION_QUEUE
from pipeline.realtime.configuration import offered_tools
from pipeline.session.refusals import over_for
from pipeline.session.step import RecordIncident
from pipeline.session.wire import AdmissionBegun, AdmissionFailed, CallAttached
from workers import runtime
from workers.actors.shared import (
    EVENT_POLICY,
    NEVER_RETRIED,
    REQUEST_POLICY,
    after_commit,
    answer_request,
    deployment,
    digest_now,
    publish,
    session_created,
    sweeps,
)
from workers.outages import waits_out_outages

_runtime = runtime.current()


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="create_session", **REQUEST_POLICY)
def create_session(
    request_id: str, gateway_id: str, session_id: str, spec: dict[str, Any], now: float
) -> None:
    """Create the session row, its first logged input, and its admission timer."""

    def create() -> tuple[int, dict[str, Any]]:
        event = session_created(SessionSpec.model_validate(spec))
        warnings = creation_warnings(event, _runtime.settings, datetime.now(UTC).date())
        try:
            with new_session(
                session_id, gateway_id, _runtime.settings.broker_namespace, keys=_runtime.keys
            ) as session:
                applied = session.apply_host(event, now)
        except SessionExists:
            # The gateway names each new session afresh, so the session is this request's own:
            # it was created by an earlier run of this message, which failed after the commit
            # (a PostgreSQL restart while the record was read). The answer is the same.
            return 201, {**session_record(session_id, namespace=deployment()), "warnings": warnings}
        after_commit(session_id, applied)
        return 201, {**session_record(session_id, namespace=deployment()), "warnings": warnings}

    answer_request(request_id, gateway_id, create)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="begin_admission", **REQUEST_POLICY)
def begin_admission(request_id: str, gateway_id: str, session_id: str, now: float) -> None:
    """Move a created session to admitting and hand the gateway what the call needs; refused
    503 `live_model_at_capacity` (the session stays created, to connect later) when its Live
    model has its cap of sessions in a call."""

    def begin() -> tuple[int, dict[str, Any]]:
        with locked_session(session_id, namespace=deployment()) as session:
            if session.state.tool_versions and digest_now(session.state.tool_versions) != (
                session.state.catalog_digest
            ):
                # The tools changed (a deploy) between creation and connect: the session's
                # durable tool identities would lie, so it fails instead of connecting.
                failed = AdmissionFailed(
                    code="tool_catalog_changed",
                    detail="the registered tools changed after the session was created",
                )
                applied = session.apply_host(failed, now)
                publish(session, applied)
                state = session.state
            else:
                cap = connect_cap(session.state, LiveCaps.of(_runtime.settings))
                model_full = live_caps.admission_refused(deployment(), cap, session.execute)
                if model_full is not None:
                    raise model_full
                applied = session.apply_host(AdmissionBegun(request_id=request_id), now)
                publish(session, applied)
                state = session.state
        after_commit(session_id, applied)
        ended = over_for(state)
        if ended is not None:
            # Failed just now (its tools changed): the code says the state, the reason why.
            return 409, ended.body()
        return 200, {
            "session_id": session_id,
            "instructions": state.instructions,
            "tools": offered_tools(state),
            "provider": str(state.provider),
            # What a Live session is created with (the gateway adds the model).
            "session": creation_configuration(state),
            # The session's model ("" for one created before models were chosen per session:
            # the gateway's default).
            "model": state.model.id,
        }

    answer_request(request_id, gateway_id, begin)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="attach_call", **REQUEST_POLICY)
def attach_call(
    request_id: str,
    gateway_id: str,
    session_id: str,
    call_id: str,
    now: float,
    medium: Literal["webrtc", "sip"] = "webrtc",
) -> None:
    """Record the provider call id (a WebRTC call created, or a call going out dialled: SIP);
    the owning gateway is told to open the sideband."""

    def attach() -> tuple[int, dict[str, Any]]:
        with locked_session(session_id, namespace=deployment()) as session:
            applied = session.apply_host(CallAttached(call_id=call_id, medium=medium), now)
            publish(session, applied)
            state = session.state
        after_commit(session_id, applied)
        ended = over_for(state)
        if ended is not None:
            # The session ended while the call was being created (the admission timeout):
            # the fresh call is hung up by the directive just published.
            return 409, ended.body()
        return 200, {"session_id": session_id, "status": str(state.phase), "call_id": call_id}

    answer_request(request_id, gateway_id, attach)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="admission_failed", **REQUEST_POLICY)
def admission_failed(
    request_id: str, gateway_id: str, session_id: str, code: str, detail: str, now: float
) -> None:
    """The provider refused or failed the call: the session fails with that reason."""

    def record() -> tuple[int, dict[str, Any]]:
        with locked_session(session_id, namespace=deployment()) as session:
            applied = session.apply_host(AdmissionFailed(code=code, detail=detail), now)
            publish(session, applied)
            state = session.state
        after_commit(session_id, applied)
        # A stale report (the call connected since) changes nothing: the answer says so.
        return 200, {"session_id": session_id, "status": str(state.phase), "reason": state.end_reason}

    answer_request(request_id, gateway_id, record)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="session_timer", throws=NEVER_RETRIED, **EVENT_POLICY)
@waits_out_outages(settles=True)
def session_timer(session_id: str, name: str) -> None:
    """A delayed message (or the sweeper's): the timer is checked against the state it finds,
    under the lock — unless it is no longer pending (cancelled, or fired by its other path), which
    a read without the lock tells: a timer's row is written before its message is sent, and a
    name is not scheduled again once it fired or was cancelled."""
    if not timers.is_pending(session_id, name):
        return
    with locked_session(session_id, namespace=deployment()) as session:
        applied = session.fire_timer(name, time.time())
        publish(session, applied)
    after_commit(session_id, applied)


# A timer's delayed message lives only in Redis; one overdue by this much was lost (a Redis
# restart), and the sweeper in every worker process fires it from its durable row.
TIMER_SWEEP_INTERVAL_S = 2.0
TIMER_GRACE_MS = 5_000
TIMER_LEASE_MS = 30_000


def sweep_timers() -> int:
    """Fire the timers whose delayed message is overdue; answers how many."""
    overdue = timers.claim_overdue(_runtime.settings.broker_namespace, TIMER_GRACE_MS, TIMER_LEASE_MS)
    for session_id, name in overdue:
        session_timer.send(session_id=session_id, name=name)
    return len(overdue)


sweeps.add(
    sweep_timers,
    TIMER_SWEEP_INTERVAL_S,
    name="timer-sweeper",
    report="fired %d timers whose delayed message was lost",
)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="record_incident", **REQUEST_POLICY)
def record_incident(session_id: str | None, code: str, summary: str, context: dict[str, Any]) -> None:
    """A gateway-side incident (a malformed or oversized frame): durable, whatever it quotes."""
    incidents.record(
        session_id, RecordIncident(code=code, summary=summary, severity="warning", context=context)
    )
