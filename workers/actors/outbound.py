"""Calls going out, one at a time: the trunks, the numbers never to dial, a call placed, its
record, and whether its dial still stands."""

from __future__ import annotations

import base64
import logging
from typing import Any

import dramatiq

from models import dialer
from models import outbound as outgoing
from models.records import session_record
from models.sessions import locked_session
from pipeline.api.pages import requested
from pipeline.api.requests import SessionSpec
from pipeline.call.errors import SessionExists
from pipeline.outbound.dialing import still_to_dial
from pipeline.outbound.specs import CallSpec, SuppressionSpec, TrunkSpec, outbound_refusal
from pipeline.outbound.vars import filled
from pipeline.phone.sip import line_out
from pipeline.platform.envelope import Reply
from pipeline.platform.names import ADMISSION_QUEUE, READS_QUEUE
from pipeline.session.state import OutboundCall
from workers import runtime
from workers.actors.shared import (
    REQUEST_POLICY,
    after_commit,
    answer_read,
    answer_request,
    deployment,
    publish,
    session_created,
)

logger = logging.getLogger(__name__)

_runtime = runtime.current()


# A trunk's password rides in this actor's message: it is never retried into a dead letter
# (which `switchboard dlq show` prints), a failure is answered instead and the request is made again.
@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="trunks", max_retries=0, time_limit=30_000)
def trunks(
    request_id: str,
    gateway_id: str,
    verb: str,
    trunk: dict[str, Any] | None = None,
    name: str = "",
    page: dict[str, Any] | None = None,
) -> None:
    """Add (or replace), list (a page), show or remove the deployment's SIP trunks; a password is
    never answered."""
    namespace = _runtime.settings.broker_namespace

    def act() -> tuple[int, dict[str, Any]]:
        if verb == "add":
            spec = TrunkSpec.model_validate(trunk)
            created = outgoing.add_trunk(
                namespace,
                spec.name,
                spec.url,
                spec.username,
                spec.password.get_secret_value(),
                spec.caller_number,
            )
            return (201 if created else 200), {"trunk": outgoing.trunk_row(namespace, spec.name).as_json()}
        if verb == "remove":
            outgoing.remove_trunk(namespace, name)
            return 200, {"removed": name}
        if verb == "show":
            return 200, {"trunk": outgoing.trunk_row(namespace, name).as_json()}
        listed, following = outgoing.trunks(namespace, requested("trunks", page))
        return 200, {"trunks": [row.as_json() for row in listed], "next": following}

    try:
        answer_request(request_id, gateway_id, act)
    except Exception:
        logger.exception("trunks %s failed", verb)
        body = {
            "error": {"code": "trunk_not_stored", "message": "the trunk could not be stored now; try again"}
        }
        _runtime.publisher.publish(
            gateway_id, "", 0, [Reply(id=f"reply_{request_id}", request_id=request_id, status=503, body=body)]
        )


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="suppressions", **REQUEST_POLICY)
def suppressions(
    request_id: str,
    gateway_id: str,
    verb: str,
    suppression: dict[str, Any] | None = None,
    number: str = "",
    page: dict[str, Any] | None = None,
    by: str = "",
) -> None:
    """Add, list (a page, in number order), show or remove the numbers never to dial."""
    namespace = _runtime.settings.broker_namespace

    def act() -> tuple[int, dict[str, Any]]:
        if verb == "add":
            spec = SuppressionSpec.model_validate(suppression)
            added = outgoing.suppress(namespace, spec.number, reason=spec.reason or "", by=by)
            return (201 if added else 200), {"number": spec.number, "suppressed": True, "new": added}
        if verb == "remove":
            outgoing.unsuppress(namespace, number)
            return 200, {"number": number, "suppressed": False}
        if verb == "show":
            return 200, {"suppression": outgoing.suppression(namespace, number)}
        listed, following = outgoing.suppressions(namespace, requested("suppressions", page))
        return 200, {"suppressions": listed, "next": following}

    answer_request(request_id, gateway_id, act)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="place_call", **REQUEST_POLICY)
def place_call(
    request_id: str, gateway_id: str, session_id: str, call_id: str, spec: dict[str, Any], now: float
) -> None:
    """Place one call (`POST /v1/calls`): its session is created and its dial decided, in one
    transaction; 201 with the session and the call `dialing`, or a typed refusal."""

    def place() -> tuple[int, dict[str, Any]]:
        checked = CallSpec.model_validate(spec)
        session_spec = SessionSpec.model_validate(checked.session)
        refused = outbound_refusal(session_spec)
        if refused is not None:
            raise refused
        created = session_created(filled(session_spec, checked.vars or {}))
        call = OutboundCall(id=call_id, to=checked.to, trunk=checked.trunk or "")
        try:
            placed = dialer.place(
                namespace=_runtime.settings.broker_namespace,
                session_id=session_id,
                gateway_id=gateway_id,
                created=created.model_copy(
                    update={"outbound": call, "phone": line_out(checked.to, checked.keys)}
                ),
                request_id=request_id,
                capacity=dialer.Capacity.of(_runtime.settings),
                now=now,
                publish=publish,
                keys=_runtime.keys,
            )
        except SessionExists:
            # This request's own session, made by an earlier run of this message that failed
            # after its commit: the answer is the same.
            return 201, _placed(session_id, call_id, checked.to)
        for applied in placed.applied:
            after_commit(session_id, applied)
        return 201, _placed(session_id, call_id, checked.to)

    answer_request(request_id, gateway_id, place)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="outbound_call", **REQUEST_POLICY)
def outbound_call(request_id: str, gateway_id: str, call_id: str) -> None:
    """A call going out: its session, status, outcome and who answered."""
    namespace = _runtime.settings.broker_namespace
    answer_read(request_id, gateway_id, lambda: (200, outgoing.outbound_call(namespace, call_id)))


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="dial_committed", **REQUEST_POLICY)
def dial_committed(
    request_id: str, gateway_id: str, session_id: str, call_id: str, dial_key: str = ""
) -> None:
    """Whether the decision to dial the session's call was committed and still stands: 200, or
    404 (the decision was lost with its worker), or 409 (the session ended, or is not this
    call's). The lock waits for a transaction still creating the session. With the gateway's
    `dial_key` (a public key of its own, base64), the answer carries the trunk's password sealed
    to it (None: the trunk is gone, or its password does not open): the dial directive never
    carries it, and Redis never holds it readable."""

    def read() -> tuple[int, dict[str, Any]]:
        with locked_session(session_id, namespace=deployment()) as session:
            state = session.state
        if not still_to_dial(state, call_id) or state.outbound is None:
            message = f"session is {state.phase}; call {call_id} is not to be dialled"
            return 409, {"error": {"code": "dial_not_wanted", "message": message}}
        answer: dict[str, Any] = {"session_id": session_id, "call": call_id}
        if dial_key:
            public_key = base64.b64decode(dial_key)
            answer["password"] = outgoing.trunk_password_sealed(session_id, state.outbound.trunk, public_key)
        return 200, answer

    answer_request(request_id, gateway_id, read)


def _placed(session_id: str, call_id: str, to: str) -> dict[str, Any]:
    return {
        "session": session_record(session_id, namespace=deployment()),
        "call": {"id": call_id, "to": to, "status": "dialing"},
    }
