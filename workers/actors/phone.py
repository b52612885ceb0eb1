"""Phone calls in: a ringing call accepted with a session of its route or turned away, its
answer recorded once, and the routes of numbers to sessions."""

from __future__ import annotations

import logging
from typing import Any

import dramatiq

from models import phone
from models.sessions import locked_session
from pipeline.admission import LiveCaps, session_configuration
from pipeline.api.pages import requested
from pipeline.api.requests import RouteSpec, SessionSpec
from pipeline.dialects import dialect_for
from pipeline.phone.sip import PhoneLine, kept_headers, line_of
from pipeline.platform.names import ADMISSION_QUEUE
from pipeline.session.wire import AdmissionBegun, AdmissionFailed, CallAttached, HostInput
from workers import runtime
from workers.actors.shared import (
    REQUEST_POLICY,
    after_commit,
    answer_request,
    deployment,
    publish,
    session_created,
)

logger = logging.getLogger(__name__)

_runtime = runtime.current()


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="ring", **REQUEST_POLICY)
def ring(
    request_id: str,
    gateway_id: str,
    webhook_id: str,
    call_id: str,
    sip_headers: list[dict[str, Any]],
    now: float,
    provider: str = "realtime",
) -> None:
    """A phone call was announced (by `realtime.call.incoming`, or on Live by
    `live.transport.incoming`, whose call id is the Live session's id): record the delivery,
    then decide (once per call id) to accept it with a session of the route for the number
    dialled, or to reject it and why."""

    def decide() -> tuple[int, dict[str, Any]]:
        settings = _runtime.settings
        phone.record_delivery(webhook_id, call_id, dialect_for(provider).incoming_call)
        line = line_of(kept_headers(sip_headers), settings.route_header)
        ringing = phone.Ringing(
            webhook_id,
            call_id,
            line,
            request_id,
            gateway_id,
            settings.broker_namespace,
            settings.max_phone_calls,
            provider,
            LiveCaps.of(settings),
        )
        decision = phone.ring(ringing, _phone_session, now, keys=_runtime.keys)
        for applied in decision.applied:
            after_commit(decision.session_id or "", applied)
        if decision.action == "reject":
            logger.info(
                "phone call %s to %r turned away: %s (SIP %s)",
                call_id,
                line.dialled,
                decision.reason,
                decision.status_code,
            )
        body: dict[str, Any] = {
            "action": decision.action,
            "session_id": decision.session_id,
            "status_code": decision.status_code,
            "reason": decision.reason,
            # Who holds the call's answer: the gateway says how it went under this claim.
            "claim": request_id,
            "again": decision.again,
        }
        if decision.state is not None:
            body["provider"] = str(decision.state.provider)
            body["session"] = session_configuration(decision.state)
            body["route_id"] = decision.state.phone.route_id if decision.state.phone else ""
        return 200, body

    answer_request(request_id, gateway_id, decide)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="phone_call_answered", **REQUEST_POLICY)
def phone_call_answered(
    request_id: str, gateway_id: str, call_id: str, claim: str, outcome: str, detail: str, now: float
) -> None:
    """The gateway that claimed a call answered it (`accepted`, `rejected`), was refused by the
    provider (`failed`) or could not reach it (`released`). An accepted call's sideband is then
    opened, a failed one's session fails; each once, however often this is re-run."""

    def record() -> tuple[int, dict[str, Any]]:
        session_id = phone.claimed_session(call_id, claim) if outcome in ("accepted", "failed") else None
        if session_id is None:
            phone.answered_without_session(call_id, claim, outcome)
            return 200, {"call_id": call_id, "outcome": outcome}
        event: HostInput = (
            CallAttached(call_id=call_id, medium="sip")
            if outcome == "accepted"
            else AdmissionFailed(code="provider_rejected_call", detail=detail)
        )
        with locked_session(session_id, namespace=deployment()) as session:
            if not phone.mark_answered(session, call_id, claim, outcome):
                return 200, {"call_id": call_id, "outcome": outcome}  # answered already: once
            applied = session.apply_host(event, now)
            publish(session, applied)
        after_commit(session_id, applied)
        return 200, {"call_id": call_id, "session_id": session_id, "outcome": outcome}

    answer_request(request_id, gateway_id, record)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="routes", **REQUEST_POLICY)
def routes(
    request_id: str,
    gateway_id: str,
    verb: str,
    route: dict[str, Any] | None = None,
    route_id: str = "",
    page: dict[str, Any] | None = None,
) -> None:
    """Add (or replace), list (a page), show or remove the routes of this deployment."""
    namespace = _runtime.settings.broker_namespace

    def act() -> tuple[int, dict[str, Any]]:
        if verb == "add":
            spec = RouteSpec.model_validate(route)
            # An unregistered tool, a model the catalog refuses or one retired: refused now, not per call.
            session_created(spec.session)
            return 201, {"route": phone.add_route(namespace, spec).as_json()}
        if verb == "remove":
            phone.remove_route(namespace, route_id)
            return 200, {"removed": route_id}
        if verb == "call":
            return 200, phone.phone_call(namespace, route_id)
        if verb == "show":
            return 200, {"route": phone.route(namespace, route_id)}
        listed, following = phone.routes(namespace, requested("routes", page))
        return 200, {"routes": listed, "refused": phone.refusals(namespace), "next": following}

    answer_request(request_id, gateway_id, act)


def _phone_session(route: phone.Route, line: PhoneLine) -> list[HostInput]:
    """The first inputs of a phone call's session: created as its route says, and admitting
    (the provider's accept is the call's creation)."""
    created = session_created(SessionSpec.model_validate(route.spec)).model_copy(update={"phone": line})
    return [created, AdmissionBegun()]
