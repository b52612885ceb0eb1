"""The actors: thin shells that lock a session, let `pipeline` decide, and emit the result.

Every actor reads the same way: validate the message, lock the row, apply, publish the
controls under the lock just before commit (DESIGN invariant 3: a rollback re-applies the
same events and re-emits the same control ids, which the gateway sends once), then schedule
timers and report incidents.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import time
import traceback
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import dramatiq
import sentry_sdk
from dramatiq.middleware import CurrentMessage
from psycopg2.errors import UniqueViolation
from pydantic import ValidationError

from models import campaigns as campaign_store
from models import data_keys, desk, dialer, incidents, phone, timers, tool_steps
from models import idempotency as idempotency_keys
from models import keys as api_keys
from models import outbound as outgoing
from models.db import is_connection_lost, reopen
from models.records import call_log, session_record
from models.records import sessions as listed_sessions
from models.releases import read_across
from models.sessions import (
    Applied,
    LockedSession,
    locked_for,
    locked_session,
    new_session,
    owners_of_unfinished,
    sessions_owned_by,
)
from pipeline.admission import busy_for_handover, creation_configuration, session_configuration
from pipeline.api import RouteSpec, SessionSpec
from pipeline.call.capabilities import Ability, refusal
from pipeline.catalog import ToolCatalog, ToolError, ToolOutcome
from pipeline.cost import cost_usd
from pipeline.dialects import capabilities_for, dialect_for
from pipeline.dialing import still_to_dial
from pipeline.envelope import EventEnvelope, Reply
from pipeline.errors import (
    BadInput,
    CampaignNotFound,
    DeadLetterNotFound,
    KeyNotFound,
    MalformedEnvelope,
    MalformedRequest,
    NotFound,
    NotSupported,
    Refusal,
    SessionExists,
    ToolOutcomeConflict,
    UnknownDelegationHandler,
    UnknownTool,
)
from pipeline.event_streams import Waiting
from pipeline.limits import INLINE_TOOL_BACKUP_MS, INLINE_TOOL_MS, MAXIMUM_TOOL_MS
from pipeline.live.delegation import DELEGATION_RUN_PREFIX
from pipeline.names import (
    ADMISSION_QUEUE,
    APP_WEBHOOKS_QUEUE,
    COMPACTION_QUEUE,
    EVENT_STREAMS_QUEUE,
    READS_QUEUE,
    TOOL_QUEUE,
    TOOL_RUNS_QUEUE,
    TRANSCRIPT_QUEUE,
)
from pipeline.outbound.contacts import Contact, RefusedRow, iter_contacts, zone_refusal
from pipeline.outbound.specs import CallSpec, CampaignSpec, SuppressionSpec, TrunkSpec, campaign_refusal
from pipeline.outbound.vars import MissingVars, fill
from pipeline.pages import in_memory, requested
from pipeline.phone import PhoneLine, kept_headers, line_of
from pipeline.privacy.inputs import redacted_creation
from pipeline.privacy.sealing import open_sealed
from pipeline.realtime.configuration import offered_tools
from pipeline.refusals import over_for
from pipeline.state import AppWebhook, EventStream, Greeting, LiveSetup, OutboundCall, Usage
from pipeline.step import RecordIncident, RunTool
from pipeline.wire import (
    AdmissionBegun,
    AdmissionFailed,
    CallAttached,
    HostInput,
    SessionCreated,
    ToolFinished,
)
from workers import app_webhooks, delegations, erasure, event_streams, runtime, tracing
from workers import dead_letters as dead_letters_
from workers import metrics as worker_metrics
from workers.dead_letters import DeadLetters
from workers.liveness import gateways_alive, takeover_refusal_now
from workers.middleware import Sweeps
from workers.outages import waits_out_outages
from workers.tools.runner import run_tool as execute_tool

logger = logging.getLogger(__name__)

_runtime = runtime.current()
# The worker's periodic sweeps (timers, campaigns, retention), added where each is defined.
_sweeps = Sweeps()
_runtime.broker.add_middleware(_sweeps)

# Retry fast, and long enough to ride out a Redis restart (a few seconds): an event that reaches
# the dead-letter queue leaves a gap its session waits on. A call's message that finds
# PostgreSQL away does not spend these: it waits for the database (workers.outages).
_EVENT_POLICY: dict[str, Any] = {"max_retries": 10, "min_backoff": 25, "max_backoff": 1_000}
_REQUEST_POLICY: dict[str, Any] = {"max_retries": 1, "min_backoff": 50, "max_backoff": 200}
# Refusals and bad input can never succeed: straight to the dead letters, no retry.
_NEVER_RETRIED = (Refusal, BadInput)


def _deployment() -> str:
    """This worker's deployment: every session it reads or locks by id must be one of its own
    (deployments may share a database, and one's ids must never reach another's calls)."""
    return _runtime.settings.broker_namespace


# ── numbered events ─────────────────────────────────────────────────────────────────────


def deliver(envelope_messages: list[dict[str, Any]]) -> Applied:
    """Log numbered events of one session (the gateway sends a session's events of one flush
    together) and apply what is now contiguous, under the row lock, in one transaction."""
    try:
        envelopes = [read_across(EventEnvelope, message, "event envelope") for message in envelope_messages]
    except ValidationError as exc:
        raise MalformedEnvelope(f"not an event envelope: {exc.errors()[0]['msg']}") from exc
    if not envelopes or len({envelope.session_id for envelope in envelopes}) != 1:
        raise MalformedEnvelope("a message carries the events of exactly one session")
    with tracing.applying(envelopes) as spans:
        with locked_for(envelopes, namespace=_deployment()) as session:
            each = [session.deliver(envelope) for envelope in envelopes]
            applied = Applied.together(each)
            # Under the lock, before the writes and the COMMIT go in one round trip: a rollback
            # re-applies the same events and re-emits the same ids, which the gateway sends once.
            _publish(session, applied)
            published_at = time.time()
        if spans:
            disposition = dict(applied.dispositions)
            tracing.disposed(spans, [disposition.get(envelope.seq, "") for envelope in envelopes])
        _after_commit(envelopes[0].session_id, applied)
    for envelope, delivered in zip(envelopes, each, strict=True):
        worker_metrics.delivered(envelope, delivered, published_at)
    return applied


def _envelopes(
    envelope: dict[str, Any] | None, envelopes: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """A message's events: one (`envelope`), or a session's several (`envelopes`)."""
    if envelopes is not None:
        return envelopes
    if envelope is None:
        raise MalformedEnvelope("an event message carries an envelope or envelopes")
    return [envelope]


@dramatiq.actor(
    queue_name=ADMISSION_QUEUE, actor_name="admission_event", throws=_NEVER_RETRIED, **_EVENT_POLICY
)
@waits_out_outages()
def admission_event(
    envelope: dict[str, Any] | None = None, envelopes: list[dict[str, Any]] | None = None
) -> None:
    deliver(_envelopes(envelope, envelopes))


@dramatiq.actor(
    queue_name=TRANSCRIPT_QUEUE, actor_name="transcript_event", throws=_NEVER_RETRIED, **_EVENT_POLICY
)
@waits_out_outages()
def transcript_event(
    envelope: dict[str, Any] | None = None, envelopes: list[dict[str, Any]] | None = None
) -> None:
    deliver(_envelopes(envelope, envelopes))


@dramatiq.actor(queue_name=TOOL_QUEUE, actor_name="tool_event", throws=_NEVER_RETRIED, **_EVENT_POLICY)
@waits_out_outages()
def tool_event(envelope: dict[str, Any] | None = None, envelopes: list[dict[str, Any]] | None = None) -> None:
    deliver(_envelopes(envelope, envelopes))


@dramatiq.actor(
    queue_name=COMPACTION_QUEUE, actor_name="compaction_event", throws=_NEVER_RETRIED, **_EVENT_POLICY
)
@waits_out_outages()
def compaction_event(
    envelope: dict[str, Any] | None = None, envelopes: list[dict[str, Any]] | None = None
) -> None:
    """A forced compaction or a deleted item: numbered like every event of the session."""
    deliver(_envelopes(envelope, envelopes))


# ── host inputs: creation, admission, timers ────────────────────────────────────────────


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="create_session", **_REQUEST_POLICY)
def create_session(
    request_id: str, gateway_id: str, session_id: str, spec: dict[str, Any], now: float
) -> None:
    """Create the session row, its first logged input, and its admission timer."""

    def create() -> tuple[int, dict[str, Any]]:
        event = session_created(SessionSpec.model_validate(spec))
        try:
            with new_session(
                session_id, gateway_id, _runtime.settings.broker_namespace, keys=_runtime.keys
            ) as session:
                applied = session.apply_host(event, now)
        except SessionExists:
            # The gateway names each new session afresh, so the session is this request's own:
            # it was created by an earlier run of this message, which failed after the commit
            # (a PostgreSQL restart while the record was read). The answer is the same.
            return 201, session_record(session_id, namespace=_deployment())
        _after_commit(session_id, applied)
        return 201, session_record(session_id, namespace=_deployment())

    _answer(request_id, gateway_id, create)


# ── phone calls: the SIP front door ─────────────────────────────────────────────────────


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="ring", **_REQUEST_POLICY)
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
        )
        decision = phone.ring(ringing, _phone_session, now, keys=_runtime.keys)
        for applied in decision.applied:
            _after_commit(decision.session_id or "", applied)
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

    _answer(request_id, gateway_id, decide)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="phone_call_answered", **_REQUEST_POLICY)
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
        with locked_session(session_id, namespace=_deployment()) as session:
            if not phone.mark_answered(session, call_id, claim, outcome):
                return 200, {"call_id": call_id, "outcome": outcome}  # answered already: once
            applied = session.apply_host(event, now)
            _publish(session, applied)
        _after_commit(session_id, applied)
        return 200, {"call_id": call_id, "session_id": session_id, "outcome": outcome}

    _answer(request_id, gateway_id, record)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="routes", **_REQUEST_POLICY)
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
            _session_catalog(spec.session.tools)  # an unregistered tool is refused now, not per call
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

    _answer(request_id, gateway_id, act)


# ── calls going out: trunks, the do-not-call list, one call ─────────────────────────────


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
        _answer(request_id, gateway_id, act)
    except Exception:
        logger.exception("trunks %s failed", verb)
        body = {
            "error": {"code": "trunk_not_stored", "message": "the trunk could not be stored now; try again"}
        }
        _runtime.publisher.publish(
            gateway_id, "", 0, [Reply(id=f"reply_{request_id}", request_id=request_id, status=503, body=body)]
        )


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="suppressions", **_REQUEST_POLICY)
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

    _answer(request_id, gateway_id, act)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="place_call", **_REQUEST_POLICY)
def place_call(
    request_id: str, gateway_id: str, session_id: str, call_id: str, spec: dict[str, Any], now: float
) -> None:
    """Place one call (`POST /v1/calls`): its session is created and its dial decided, in one
    transaction; 201 with the session and the call `dialing`, or a typed refusal."""

    def place() -> tuple[int, dict[str, Any]]:
        checked = CallSpec.model_validate(spec)
        session_spec = SessionSpec.model_validate(checked.session)
        cannot = refusal(capabilities_for(session_spec.provider), Ability.OUTBOUND_CALLS)
        if cannot is not None:
            raise NotSupported(cannot.code, cannot.message)
        created = session_created(filled(session_spec, checked.vars or {}))
        call = OutboundCall(id=call_id, to=checked.to, trunk=checked.trunk or "")
        try:
            placed = dialer.place(
                namespace=_runtime.settings.broker_namespace,
                session_id=session_id,
                gateway_id=gateway_id,
                created=created.model_copy(
                    update={"outbound": call, "phone": _line_out(checked.to, checked.keys)}
                ),
                request_id=request_id,
                capacity=_capacity(),
                now=now,
                publish=_publish,
                keys=_runtime.keys,
            )
        except SessionExists:
            # This request's own session, made by an earlier run of this message that failed
            # after its commit: the answer is the same.
            return 201, _placed(session_id, call_id, checked.to)
        for applied in placed.applied:
            _after_commit(session_id, applied)
        return 201, _placed(session_id, call_id, checked.to)

    _answer(request_id, gateway_id, place)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="outbound_call", **_REQUEST_POLICY)
def outbound_call(request_id: str, gateway_id: str, call_id: str) -> None:
    """A call going out: its session, status, outcome and who answered."""
    namespace = _runtime.settings.broker_namespace
    _answer_read(request_id, gateway_id, lambda: (200, outgoing.outbound_call(namespace, call_id)))


# ── campaigns: the durable dialer ───────────────────────────────────────────────────────


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="campaigns", **_REQUEST_POLICY)
def campaigns_api(
    request_id: str,
    gateway_id: str,
    verb: str,
    campaign_id: str = "",
    spec: dict[str, Any] | None = None,
    page: dict[str, Any] | None = None,
    now: float = 0.0,
    contacts: list[dict[str, Any]] | None = None,
    csv: str | None = None,
    first_line: int = 2,
) -> None:
    """Create, list, show, page or add to the contacts of, pause, resume or cancel campaigns."""
    namespace = _runtime.settings.broker_namespace

    def act() -> tuple[int, dict[str, Any]]:
        if verb == "create":
            checked = CampaignSpec.model_validate(spec)
            _campaign_refused(checked, now)
            try:
                campaign_store.create(namespace, campaign_id, checked.settings, checked.contacts)
            except UniqueViolation:
                pass  # this request's own campaign, made by an earlier run of this message
            campaign_tick.send(campaign_id=campaign_id)
            return 201, campaign_store.campaign(namespace, campaign_id)
        if verb == "show":
            return 200, campaign_store.campaign(namespace, campaign_id)
        if verb == "contacts":
            return 200, campaign_store.contacts(namespace, campaign_id, requested("contacts", page))
        if verb == "add_contacts":
            settings = campaign_store.spec_of(campaign_id)
            if settings is None:
                raise CampaignNotFound(f"no campaign {campaign_id!r}")
            window = settings[0].window
            taken: list[Contact] = []
            refused: list[dict[str, Any]] = []
            if csv is not None:
                for row in iter_contacts(csv.splitlines()):
                    why = row.reason if isinstance(row, RefusedRow) else zone_refusal(row, window)
                    if why is None and isinstance(row, Contact):
                        taken.append(row)
                    else:
                        # Numbered as the lines of the file the page came from.
                        line = row.line + first_line - 2 if isinstance(row, RefusedRow) else None
                        refused.append({"line": line, "to": getattr(row, "to", None), "reason": why})
            else:
                for contact in (Contact.model_validate(each) for each in contacts or ()):
                    why = zone_refusal(contact, window)
                    if why is None:
                        taken.append(contact)
                    else:
                        refused.append({"line": None, "to": contact.to, "reason": why})
            added = campaign_store.add_contacts(namespace, campaign_id, taken)
            campaign_tick.send(campaign_id=campaign_id)
            return 200, {"campaign_id": campaign_id, "added": added, "refused": refused}
        if verb in ("pause", "resume", "cancel"):
            shown = campaign_store.set_status(namespace, campaign_id, verb)
            if verb == "resume":
                campaign_tick.send(campaign_id=campaign_id)
            return 200, shown
        listed, following = campaign_store.campaigns(namespace, requested("campaigns", page))
        return 200, {"campaigns": listed, "next": following}

    _answer(request_id, gateway_id, act)


def _campaign_refused(spec: CampaignSpec, now: float) -> None:
    """A campaign that cannot run is refused whole: its session's provider places no calls, its
    trunk is unknown, its session's tools or handler are unregistered, its window never opens or
    it expired already."""
    session_spec = SessionSpec.model_validate(spec.session)
    cannot = refusal(capabilities_for(session_spec.provider), Ability.OUTBOUND_CALLS)
    if cannot is not None:
        raise NotSupported(cannot.code, cannot.message)
    session_created(session_spec)  # an unregistered tool or handler is refused now, not per dial
    outgoing.trunk_named(_runtime.settings.broker_namespace, spec.trunk)
    why = campaign_refusal(spec, campaign_store.utc(now))
    if why is not None:
        raise MalformedRequest(why)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="campaign_tick", max_retries=5, min_backoff=200)
def campaign_tick(campaign_id: str) -> None:
    """One look of a campaign's dialer: claim what may be dialled now, then place each call in
    a transaction of its own, through a live gateway."""
    now = time.time()
    tick = campaign_store.claim_dials(campaign_id, campaign_store.utc(now), capacity=_capacity())
    worker_metrics.dialer_looked(campaign_id, tick.waiting, tick.going_out)
    if tick.claimed:
        gateways = gateways_alive(_runtime.broker.client, _runtime.settings.broker_namespace)
        for claimed in tick.claimed:
            _place_claimed(claimed, gateways, now)
    if tick.completed:
        logger.info("campaign %s completed", campaign_id)
        _notify_campaign(campaign_id, "campaign.completed")


def _notify_campaign(campaign_id: str, kind: str) -> None:
    """Tell the app of the campaign, once (the delivery's id is the campaign's and the kind's)."""
    shown = campaign_store.campaign(campaign_store.namespace_of(campaign_id), campaign_id)
    delivery_id = app_webhooks.webhook_id(campaign_id, kind, "1")
    settings = _runtime.settings
    notify_campaign.send_with_options(
        kwargs={"campaign_id": campaign_id, "delivery_id": delivery_id, "kind": kind, "data": shown},
        max_retries=settings.app_webhook_retries,
        min_backoff=settings.app_webhook_min_backoff_ms,
        max_backoff=settings.app_webhook_max_backoff_ms,
    )


@dramatiq.actor(queue_name=APP_WEBHOOKS_QUEUE, actor_name="notify_campaign", max_retries=8)
def notify_campaign(campaign_id: str, delivery_id: str, kind: str, data: dict[str, Any]) -> None:
    """Deliver one notification of a campaign to its app (retried with backoff, then a dead letter)."""
    app_webhooks.deliver_for_campaign(campaign_id, delivery_id, kind, data)


def _place_claimed(claimed: campaign_store.Claimed, gateways: list[str], now: float) -> None:
    """Place one claimed call: its session is created (once, under the id its claim gave it)
    and its dial decided. A campaign whose session spec no longer resolves fails that call."""
    row = campaign_store.spec_of(claimed.campaign_id)
    if row is None:
        return
    spec, namespace = row
    if not gateways:
        # No gateway to dial through: the claim is placed by a later tick (it stays unplaced).
        logger.warning(
            "campaign %s: no live gateway to dial %s through", claimed.campaign_id, claimed.call_id
        )
        return
    gateway_id = gateways[int(claimed.call_id[5:13], 16) % len(gateways)]
    session_spec = filled(SessionSpec.model_validate(spec.session), claimed.vars)
    call = OutboundCall(
        id=claimed.call_id,
        to=claimed.to,
        trunk=spec.trunk or "",
        campaign_id=claimed.campaign_id,
        contact_id=claimed.contact_id,
        attempt=claimed.attempt,
        voicemail=spec.voicemail.action,
        message=spec.voicemail.message,
    )
    try:
        placed = dialer.place(
            namespace=namespace,
            session_id=claimed.session_id,
            gateway_id=gateway_id,
            created=session_created(session_spec).model_copy(
                update={"outbound": call, "phone": _line_out(claimed.to, spec.keys)}
            ),
            request_id=claimed.call_id,
            capacity=_capacity(),
            now=now,
            publish=_publish,
            keys=_runtime.keys,
            claimed=True,
        )
    except SessionExists:
        return  # placed already, by the run that claimed it or an earlier retry of this one
    for applied in placed.applied:
        _after_commit(claimed.session_id, applied)


def sweep_campaigns() -> int:
    """Tick the campaigns whose next look is due (a retry or a window opening, or a tick message
    lost); answers how many."""
    due = campaign_store.due_campaigns(_runtime.settings.broker_namespace, CAMPAIGN_LEASE_S)
    for campaign_id in due:
        campaign_tick.send(campaign_id=campaign_id)
    return len(due)


# A campaign claimed by a sweep is not swept again for this long (its tick takes far less).
CAMPAIGN_LEASE_S = 10.0
CAMPAIGN_SWEEP_INTERVAL_S = 1.0

_sweeps.add(
    sweep_campaigns,
    CAMPAIGN_SWEEP_INTERVAL_S,
    name="campaign-sweeper",
    # Routine: a running campaign is due at every retry, window and free line.
    report=None,
)


def _line_out(to: str, keys: Mapping[str, str]) -> PhoneLine:
    """The phone line of a call going out: the number dialled, and what its keypad presses do
    (an `opt_out` key puts the callee on the do-not-call list and ends the call)."""
    return PhoneLine(dialled=to, keys=dict(keys))


def _placed(session_id: str, call_id: str, to: str) -> dict[str, Any]:
    return {
        "session": session_record(session_id, namespace=_deployment()),
        "call": {"id": call_id, "to": to, "status": "dialing"},
    }


def _capacity() -> dialer.Capacity:
    settings = _runtime.settings
    return dialer.Capacity(
        max_outbound=settings.max_outbound,
        max_phone_calls=settings.max_phone_calls,
        reserve_inbound=settings.reserve_inbound,
    )


def filled(spec: SessionSpec, values: dict[str, str]) -> SessionSpec:
    """The session spec with a contact's `vars` placed in its instructions and greeting (as
    quoted data, never as instructions); a placeholder no var fills is refused."""
    instructions = fill(spec.instructions, values)
    if isinstance(instructions, MissingVars):
        raise MalformedRequest(f"instructions: {instructions.message}")
    greeting = spec.greeting
    if greeting is not None:
        changes: dict[str, str] = {}
        for field in ("say", "reply"):
            text = getattr(greeting, field)
            if text:
                done = fill(text, values)
                if isinstance(done, MissingVars):
                    raise MalformedRequest(f"greeting.{field}: {done.message}")
                changes[field] = done
        greeting = greeting.model_copy(update=changes)
    return spec.model_copy(update={"instructions": instructions, "greeting": greeting})


def _phone_session(route: phone.Route, line: PhoneLine) -> list[HostInput]:
    """The first inputs of a phone call's session: created as its route says, and admitting
    (the provider's accept is the call's creation)."""
    created = session_created(SessionSpec.model_validate(route.spec)).model_copy(update={"phone": line})
    return [created, AdmissionBegun()]


@dramatiq.actor(queue_name=APP_WEBHOOKS_QUEUE, actor_name="notify_app", max_retries=8)
def notify_app(session_id: str, delivery_id: str, kind: str, data: dict[str, Any]) -> None:
    """Tell the app that owns a call (its session's webhook); raises until it answers 2xx, so
    Dramatiq tries again with backoff, then dead-letters it (a replay keeps its id)."""
    settings = _runtime.settings
    app_webhooks.deliver(
        session_id, delivery_id, kind, data, settings.prices, settings.model_for, namespace=_deployment()
    )


@dramatiq.actor(
    queue_name=EVENT_STREAMS_QUEUE,
    actor_name="stream_events",
    max_retries=8,
    throws=(event_streams.EventStreamGivenUp,),
)
def stream_events(session_id: str, waiting: dict[str, Any] | None = None) -> None:
    """Publish the session's call-log entries past its stream's cursor (and its report once the
    call ended) to the app's broker. While the broker is down the session waits for its next try
    with one sweep, sent again for then (`waiting`); one that waited too long is a dead letter (a
    replay sweeps again from the cursor)."""
    settings = _runtime.settings
    swept = event_streams.sweep(
        session_id,
        Waiting.from_json(waiting),
        gate=_stream_gate(),
        prices=settings.prices,
        model_for=settings.model_for,
        namespace=_deployment(),
    )
    if swept.waiting is None:
        return
    # The waiting sweep carries its last failed try's traceback, as a retried message does: the
    # dead letter it may become says which broker failed, and how (the keeper keeps the body as
    # it was queued).
    last: str | None
    if swept.failure is not None:
        last = "".join(traceback.format_exception(swept.failure))
    else:
        current = CurrentMessage.get_current_message()
        last = current.options.get("traceback") if current is not None else None
    message = _sweep_stream(session_id, swept.waiting, last_traceback=last)
    _runtime.broker.enqueue(message, delay=swept.again_in_ms)


def _sweep_stream(
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
    return stream_events.message_with_options(
        kwargs=kwargs,
        max_retries=settings.event_stream_retries,
        min_backoff=settings.event_stream_min_backoff_ms,
        max_backoff=settings.event_stream_max_backoff_ms,
        **options,
    )


@functools.cache
def _stream_gate() -> event_streams.StreamGate:
    """The deployment's streams' shared back-offs and marks (one per process: its scripts are
    registered once)."""
    settings = _runtime.settings
    return event_streams.StreamGate(
        _runtime.broker.client,
        settings.broker_namespace,
        minimum_ms=settings.event_stream_min_backoff_ms,
        maximum_ms=settings.event_stream_max_backoff_ms,
        retries=settings.event_stream_retries,
    )


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="list_sessions", **_REQUEST_POLICY)
def list_sessions(
    request_id: str,
    gateway_id: str,
    status: str,
    route: str,
    end_reason: str,
    q: str = "",
    page: dict[str, Any] | None = None,
) -> None:
    """The deployment's sessions, newest first, filtered and searched, a page at a time (each
    with what its usage cost); and the counts by status."""
    settings = _runtime.settings

    def read() -> tuple[int, dict[str, Any]]:
        listed = listed_sessions(
            settings.broker_namespace,
            requested("sessions", page),
            status=status,
            route=route,
            end_reason=end_reason,
            search=q,
        )
        for session in listed["sessions"]:
            stored = session.pop("usage")
            usage = read_across(Usage, stored, "stored usage") if stored else Usage()
            session["cost_usd"] = cost_usd(
                usage, settings.prices.get(settings.model_for(session["provider"]))
            )
        return 200, listed

    _answer_read(request_id, gateway_id, read)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="call_queue", **_REQUEST_POLICY)
def call_queue(request_id: str, gateway_id: str) -> None:
    """The desk's queue: callers waiting for a person (longest first), on hold, in trouble."""
    _answer_read(request_id, gateway_id, lambda: (200, desk.queue(_runtime.settings.broker_namespace)))


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="dead_letters", **_REQUEST_POLICY)
def dead_letters(
    request_id: str, gateway_id: str, verb: str, letter_id: str = "", page: dict[str, Any] | None = None
) -> None:
    """The dead letters, as `switchboard dlq` shows and acts on them: list (a page, oldest first),
    show (with what a replay would do), replay, purge."""

    def act() -> tuple[int, dict[str, Any]]:
        letters = DeadLetters(_runtime.broker)
        now_ms = int(time.time() * 1000)
        if verb == "list":
            # Read whole (they are few: each is a fault someone must look at), then paged on when
            # each was dead-lettered (their creation time here) and its id.
            shown, following = in_memory(
                requested("dead_letters", page),
                letters.list(),
                key=lambda letter: (letter.dead_since_ms, letter.id),
                created=lambda letter: datetime.fromtimestamp(letter.dead_since_ms / 1000, UTC),
            )
            return 200, {"dead_letters": [letter.summary(now_ms) for letter in shown], "next": following}
        letter = letters.find(letter_id)
        if letter is None:
            raise DeadLetterNotFound(f"no dead letter {letter_id!r} (replayed or purged already?)")
        if verb == "show":
            return 200, {**letter.detail(now_ms), "replay_would": letters.outlook(letter, now_ms)}
        outlook = letters.outlook(letter, now_ms)
        done = letters.replay(letter) if verb == "replay" else letters.purge(letter)
        return 200, {"id": letter.id, "done": done, "outlook": outlook if verb == "replay" else None}

    _answer(request_id, gateway_id, act)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="key_identity", **_REQUEST_POLICY)
def key_identity(request_id: str, gateway_id: str, key_id: str) -> None:
    """A live API key's name, role and secret digest, for the gateway to check a request's key
    against (404 for an unknown or revoked key)."""

    def look_up() -> tuple[int, dict[str, Any]]:
        record = api_keys.key_for(_runtime.settings.broker_namespace, key_id)
        if record is None:
            raise KeyNotFound(f"no key {key_id!r}")
        return 200, record

    _answer_read(request_id, gateway_id, look_up)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="claim_idempotency_key", **_REQUEST_POLICY)
def claim_idempotency_key(
    request_id: str, gateway_id: str, owner: str, key: str, fingerprint: str, claim_id: str, now: float
) -> None:
    """Claim an Idempotency-Key for a request about to act, or say why it must not act (and
    the stored answer, base64, when it is a replay): see `pipeline.idempotency`."""

    def claim() -> tuple[int, dict[str, Any]]:
        namespace = _runtime.settings.broker_namespace
        claimed = idempotency_keys.claim(namespace, owner, key, fingerprint, claim_id, now)
        answer = claimed.answer
        stored = None
        if answer is not None:
            stored = {
                "status": answer.status,
                "headers": answer.headers,
                "body": base64.b64encode(answer.body).decode(),
            }
        return 200, {"verdict": str(claimed.verdict), "answer": stored}

    _answer(request_id, gateway_id, claim)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="finish_idempotency_key", **_REQUEST_POLICY)
def finish_idempotency_key(
    request_id: str,
    gateway_id: str,
    owner: str,
    key: str,
    claim_id: str,
    answer: dict[str, Any] | None = None,
) -> None:
    """Store the answer of the request holding a key's claim (`answer`: status, headers, body
    in base64), or, without one, let the claim go (the request did nothing)."""

    def finish() -> tuple[int, dict[str, Any]]:
        namespace = _runtime.settings.broker_namespace
        if answer is None:
            idempotency_keys.release(namespace, owner, key, claim_id)
            return 200, {"kept": False}
        kept = idempotency_keys.StoredAnswer(
            status=int(answer["status"]),
            headers=[(str(name), str(value)) for name, value in answer["headers"]],
            body=base64.b64decode(answer["body"]),
        )
        return 200, {"kept": idempotency_keys.finish(namespace, owner, key, claim_id, kept)}

    _answer(request_id, gateway_id, finish)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="resolve_tools", **_REQUEST_POLICY)
def resolve_tools(request_id: str, gateway_id: str, names: list[str]) -> None:
    """The registered tools of these names as a session is offered them (422 for an unknown
    one): what `PUT /v1/sessions/{id}/tools` numbers into the session's log."""
    _answer_read(request_id, gateway_id, lambda: (200, _session_catalog(tuple(names))))


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="begin_admission", **_REQUEST_POLICY)
def begin_admission(request_id: str, gateway_id: str, session_id: str, now: float) -> None:
    """Move a created session to admitting and hand the gateway what the call needs."""

    def begin() -> tuple[int, dict[str, Any]]:
        with locked_session(session_id, namespace=_deployment()) as session:
            if session.state.tool_versions and _current_digest(session.state.tool_versions) != (
                session.state.catalog_digest
            ):
                # The tools changed (a deploy) between creation and connect: the session's
                # durable tool identities would lie, so it fails instead of connecting.
                failed = AdmissionFailed(
                    code="tool_catalog_changed",
                    detail="the registered tools changed after the session was created",
                )
                applied = session.apply_host(failed, now)
                _publish(session, applied)
                state = session.state
            else:
                applied = session.apply_host(AdmissionBegun(request_id=request_id), now)
                _publish(session, applied)
                state = session.state
        _after_commit(session_id, applied)
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
        }

    _answer(request_id, gateway_id, begin)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="attach_call", **_REQUEST_POLICY)
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
        with locked_session(session_id, namespace=_deployment()) as session:
            applied = session.apply_host(CallAttached(call_id=call_id, medium=medium), now)
            _publish(session, applied)
            state = session.state
        _after_commit(session_id, applied)
        ended = over_for(state)
        if ended is not None:
            # The session ended while the call was being created (the admission timeout):
            # the fresh call is hung up by the directive just published.
            return 409, ended.body()
        return 200, {"session_id": session_id, "status": str(state.phase), "call_id": call_id}

    _answer(request_id, gateway_id, attach)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="dial_committed", **_REQUEST_POLICY)
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
        with locked_session(session_id, namespace=_deployment()) as session:
            state = session.state
        if not still_to_dial(state, call_id) or state.outbound is None:
            message = f"session is {state.phase}; call {call_id} is not to be dialled"
            return 409, {"error": {"code": "dial_not_wanted", "message": message}}
        answer: dict[str, Any] = {"session_id": session_id, "call": call_id}
        if dial_key:
            public_key = base64.b64decode(dial_key)
            answer["password"] = outgoing.trunk_password_sealed(session_id, state.outbound.trunk, public_key)
        return 200, answer

    _answer(request_id, gateway_id, read)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="admission_failed", **_REQUEST_POLICY)
def admission_failed(
    request_id: str, gateway_id: str, session_id: str, code: str, detail: str, now: float
) -> None:
    """The provider refused or failed the call: the session fails with that reason."""

    def record() -> tuple[int, dict[str, Any]]:
        with locked_session(session_id, namespace=_deployment()) as session:
            applied = session.apply_host(AdmissionFailed(code=code, detail=detail), now)
            _publish(session, applied)
            state = session.state
        _after_commit(session_id, applied)
        # A stale report (the call connected since) changes nothing: the answer says so.
        return 200, {"session_id": session_id, "status": str(state.phase), "reason": state.end_reason}

    _answer(request_id, gateway_id, record)


@dramatiq.actor(
    queue_name=ADMISSION_QUEUE, actor_name="session_timer", throws=_NEVER_RETRIED, **_EVENT_POLICY
)
@waits_out_outages(settles=True)
def session_timer(session_id: str, name: str) -> None:
    """A delayed message (or the sweeper's): the timer is checked against the state it finds,
    under the lock — unless it is no longer pending (cancelled, or fired by its other path), which
    a read without the lock tells: a timer's row is written before its message is sent, and a
    name is not scheduled again once it fired or was cancelled."""
    if not timers.is_pending(session_id, name):
        return
    with locked_session(session_id, namespace=_deployment()) as session:
        applied = session.fire_timer(name, time.time())
        _publish(session, applied)
    _after_commit(session_id, applied)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="take_over", **_REQUEST_POLICY)
def take_over(request_id: str, gateway_id: str, dead_gateway: str, now: float) -> None:
    """A gateway died: its unfinished sessions are handed to the asking gateway, a message each
    (so a takeover of N sessions is N short transactions on any workers, never one message that
    runs N times as long). Answered with the sessions handed out."""

    def hand_out() -> tuple[int, dict[str, Any]]:
        refusal = _takeover_refusal(dead_gateway, gateway_id)
        if refusal is not None:
            return 409, {"error": {"code": "takeover_refused", "message": refusal}}
        owned = sessions_owned_by(_deployment(), dead_gateway)
        for session_id in owned:
            take_over_session.send(
                session_id=session_id, dead_gateway=dead_gateway, gateway_id=gateway_id, now=now
            )
        return 200, {"dead_gateway": dead_gateway, "gateway": gateway_id, "sessions": owned}

    _answer(request_id, gateway_id, hand_out)


@dramatiq.actor(
    queue_name=ADMISSION_QUEUE, actor_name="take_over_session", throws=_NEVER_RETRIED, **_EVENT_POLICY
)
@waits_out_outages()
def take_over_session(session_id: str, dead_gateway: str, gateway_id: str, now: float) -> None:
    """Move one session from a dead gateway to a live one, which re-opens its sideband. Checked
    under the row lock: the session still belongs to the dead gateway, which is still dead, and
    the new owner is alive (a replayed dead letter moved three live calls of a healthy gateway
    to one that did not exist)."""
    with locked_session(session_id, namespace=_deployment()) as session:
        if session.owning_gateway != dead_gateway:
            return  # finished, or moved meanwhile
        refusal = _takeover_refusal(dead_gateway, gateway_id)
        if refusal is not None:
            logger.warning("takeover of %s refused: %s", session_id, refusal)
            return
        applied = session.take_over(gateway_id, now)
        _publish(session, applied)
    _after_commit(session_id, applied)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="hand_over_session", **_REQUEST_POLICY)
def hand_over_session(request_id: str, gateway_id: str, session_id: str, now: float) -> None:
    """A stopping gateway hands one of its calls to a live peer, if the call is idle (an answer
    under way would be asked for again on the new sideband and heard twice): answered whether it
    moved, and if not, why (the gateway asks again)."""

    def hand_over() -> tuple[int, dict[str, Any]]:
        with locked_session(session_id, namespace=_deployment()) as session:
            if session.owning_gateway != gateway_id or session.state.is_terminal:
                return 200, {"session_id": session_id, "moved": True}
            busy = busy_for_handover(session.state)
            if busy is not None:
                return 200, {"session_id": session_id, "moved": False, "reason": busy}
            client, namespace = _runtime.broker.client, _runtime.settings.broker_namespace
            peers = [peer for peer in gateways_alive(client, namespace) if peer != gateway_id]
            if not peers:
                return 200, {"session_id": session_id, "moved": False, "reason": "no_peer"}
            # Spread over the peers by session, the same peer for the same session every time.
            peer = peers[int(hashlib.sha256(session_id.encode()).hexdigest(), 16) % len(peers)]
            applied = session.take_over(peer, now, handed_over=True)
            _publish(session, applied)
        _after_commit(session_id, applied)
        return 200, {"session_id": session_id, "moved": True, "to": peer}

    _answer(request_id, gateway_id, hand_over)


def _takeover_refusal(dead_gateway: str, new_gateway: str) -> str | None:
    client, namespace = _runtime.broker.client, _runtime.settings.broker_namespace
    return takeover_refusal_now(client, namespace, dead_gateway, new_gateway)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="session_owners", **_REQUEST_POLICY)
def session_owners(request_id: str, gateway_id: str) -> None:
    """The gateways owning unfinished sessions of this deployment: a gateway puts them back in
    the liveness registry, which a Redis that restarted empty has lost."""
    namespace = _runtime.settings.broker_namespace
    _answer_read(request_id, gateway_id, lambda: (200, {"gateways": owners_of_unfinished(namespace)}))


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="session_call_log", **_REQUEST_POLICY)
def session_call_log(request_id: str, gateway_id: str, session_id: str, after: int = 0) -> None:
    """A session's call log (the entries after `after`), projected from its durable log."""

    def read() -> tuple[int, dict[str, Any]]:
        entries = call_log(session_id, namespace=_deployment())
        return 200, {
            "session_id": session_id,
            "entries": [entry.model_dump(mode="json") for entry in entries if entry.seq > after],
            "ended": any(entry.kind == "call.ended" for entry in entries),
        }

    _answer_read(request_id, gateway_id, read)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="describe_session", **_REQUEST_POLICY)
def describe_session(request_id: str, gateway_id: str, session_id: str, with_events: bool = False) -> None:
    """The session's durable record, with what its usage cost (from the deployment's prices)."""

    def read() -> tuple[int, dict[str, Any]]:
        record = session_record(session_id, namespace=_deployment(), with_events=with_events)
        settings = _runtime.settings
        usage = read_across(Usage, record["usage"], "stored usage") if record["usage"] else Usage()
        model = settings.model_for(record["provider"])
        return 200, {**record, "cost_usd": cost_usd(usage, settings.prices.get(model))}

    _answer_read(request_id, gateway_id, read)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="record_incident", **_REQUEST_POLICY)
def record_incident(session_id: str | None, code: str, summary: str, context: dict[str, Any]) -> None:
    """A gateway-side incident (a malformed or oversized frame): durable, whatever it quotes."""
    incidents.record(
        session_id, RecordIncident(code=code, summary=summary, severity="warning", context=context)
    )


# ── erasure: on request, and by retention ───────────────────────────────────────────────


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="erase_session", **_REQUEST_POLICY)
def erase_session(request_id: str, gateway_id: str, session_id: str, by: str) -> None:
    """Erase an ended session's content (404 unknown, 409 `session_live`): the database in one
    transaction under its row lock, then its Redis keys and messages. Safe to repeat."""
    settings = _runtime.settings

    def act() -> tuple[int, dict[str, Any]]:
        client = _runtime.broker.client
        return 200, erasure.erase(
            client,
            settings.broker_namespace,
            session_id,
            by=by,
            deployment_retention_days=settings.retention_days,
        )

    _answer(request_id, gateway_id, act)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="erase_caller", **_REQUEST_POLICY)
def erase_caller(request_id: str, gateway_id: str, number: str, by: str) -> None:
    """Erase every ended session whose phone call came from or went to `number` (422 for a
    number that is not E.164); the live ones are skipped and counted."""
    namespace = _runtime.settings.broker_namespace
    _answer(
        request_id,
        gateway_id,
        lambda: (200, erasure.erase_number(_runtime.broker.client, namespace, number, by=by)),
    )


def sweep_retention() -> int:
    """Erase the ended sessions whose retention is over; answers how many. The idempotency
    keys past their day go in the same sweep."""
    settings = _runtime.settings
    idempotency_keys.sweep_expired(time.time())
    return erasure.sweep_retention(_runtime.broker.client, settings.broker_namespace, settings.retention_days)


_sweeps.add(
    sweep_retention,
    erasure.RETENTION_SWEEP_INTERVAL_S,
    name="retention-sweeper",
    report="erased %d sessions whose retention was over",
)


def sweep_dead_letter_counts() -> int:
    """Publish the dead letters' counts for the gateway's gauge (routine: reports nothing)."""
    dead_letters_.publish_counts(_runtime.broker.client, _runtime.settings.broker_namespace)
    return 0


_sweeps.add(sweep_dead_letter_counts, 10.0, name="dead-letter-counter", report=None)


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


_sweeps.add(
    sweep_timers,
    TIMER_SWEEP_INTERVAL_S,
    name="timer-sweeper",
    report="fired %d timers whose delayed message was lost",
)


# ── tool bodies: run on tool_runs, outside the row lock ────────────────────────────────


# A cancellation flag outlives any tool run (30 s at most) and then disappears by itself.
TOOL_CANCEL_TTL_S = 120


@dramatiq.actor(
    queue_name=TOOL_RUNS_QUEUE,
    actor_name="run_tool",
    throws=_NEVER_RETRIED,
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
    with locked_session(session_id, namespace=_deployment()) as session:
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
        with locked_session(session_id, namespace=_deployment()) as session:
            try:
                tool_steps.finish_step(session, call_id, outcome)
            except ToolOutcomeConflict:
                return  # finished meanwhile with another outcome (interrupted): that one stands
            applied = session.apply_host(event, time.time())
            _publish(session, applied)
        _after_commit(session_id, applied)


def _outcome_of(
    session_id: str, call_id: str, name: str, arguments: str, *, timeout_ms: int, waited: bool
) -> ToolOutcome:
    """Run a tool body (or a Live delegation's handler) outside the lock: its one outcome."""
    cancel_key = _cancel_key(session_id, call_id)
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
            cancelled=lambda: bool(_runtime.broker.client.exists(cancel_key)),
        )
    elif declared is None:
        outcome = ToolOutcome(
            status="unavailable",
            error=ToolError(code="tool_unavailable", message=f"no registered tool {name!r}"),
            elapsed_ms=0,
        )
    else:
        outcome = execute_tool(
            declared,
            arguments,
            timeout_ms=timeout_ms,
            cancelled=lambda: bool(_runtime.broker.client.exists(cancel_key)),
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


def _cancel_key(session_id: str, call_id: str) -> str:
    return f"{_runtime.settings.broker_namespace}:tool-cancel:{session_id}:{call_id}"


# ── shared ──────────────────────────────────────────────────────────────────────────────


def _publish(session: LockedSession, applied: Applied) -> None:
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


def _after_commit(session_id: str, applied: Applied) -> None:
    settings = _runtime.settings
    model = settings.model_for(applied.provider)
    worker_metrics.recorded(applied, settings.prices.get(model))
    # What the transaction asks to be sent, sent together: one round trip, not one each (a tool
    # call's run, or its inline backup, and its deadline timer were two before the body ran).
    sends: list[tuple[dramatiq.Message[Any], int | None]] = []
    for told in applied.notifications:
        message = notify_app.message_with_options(
            kwargs={
                "session_id": session_id,
                "delivery_id": app_webhooks.webhook_id(session_id, told.kind, told.key),
                "kind": told.kind,
                "data": told.data,
            },
            max_retries=settings.app_webhook_retries,
            min_backoff=settings.app_webhook_min_backoff_ms,
            max_backoff=settings.app_webhook_max_backoff_ms,
        )
        sends.append((message, None))
    if applied.streams_events:
        # A sweep per commit that applied something: each publishes whatever the cursor has not
        # (so a lost or failed one is made good by the next), or leaves it to the session's
        # publisher, or to its sweep waiting for a broker that is down.
        sends.append((_sweep_stream(session_id), None))
    for cancel in applied.tool_cancels:
        _runtime.broker.client.set(
            _cancel_key(session_id, cancel.call_id), cancel.reason, ex=TOOL_CANCEL_TTL_S
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
        message = run_tool.message_with_options(kwargs=kwargs)
        declared = _runtime.registry.get(run.name)
        if declared is not None and declared.runs_inline:
            sends.append((message, INLINE_TOOL_BACKUP_MS))
            inline.append(run)
        else:
            sends.append((message, None))
    for campaign_id in dict.fromkeys(applied.campaigns):
        # A call of the campaign ended: its dialer looks again now (a retry, the next contact).
        sends.append((campaign_tick.message_with_options(kwargs={"campaign_id": campaign_id}), None))
    for timer in applied.timers:
        if timer.swept_only:
            continue
        message = session_timer.message_with_options(kwargs={"session_id": session_id, "name": timer.name})
        sends.append((message, timer.delay_ms))
    _send_all(sends)
    for incident in applied.incidents:
        if incident.severity == "error":
            with sentry_sdk.new_scope() as scope:
                scope.set_tag("session_id", session_id)
                scope.set_tag("incident", incident.code)
                scope.set_context("incident", incident.context)
                sentry_sdk.capture_message(f"session failed: {incident.code}: {incident.summary}", "error")
    for run in inline:
        _run_inline(session_id, run)


def _send_all(sends: list[tuple[dramatiq.Message[Any], int | None]]) -> None:
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


def _answer_read(request_id: str, gateway_id: str, work: Callable[[], tuple[int, dict[str, Any]]]) -> None:
    """A read of the API (the reads queue): answered as `_answer` does, but when the database is
    away it is answered 503 `database_unavailable` at once and not retried. Its asker may ask
    again; a retry after the gateway stopped waiting would answer nobody, and its dead letter
    would only be noise for whoever looks after the real ones."""
    try:
        _answer(request_id, gateway_id, work)
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


def _answer(request_id: str, gateway_id: str, work: Callable[[], tuple[int, dict[str, Any]]]) -> None:
    """Run an API request's work and reply to the gateway waiting on it, with a typed error
    for refusals and bad input (faults propagate, so Dramatiq retries them)."""
    try:
        status, body = work()
    except NotFound as exc:
        status, body = 404, exc.body()
    except Refusal as exc:
        status, body = 409, exc.body()
    except (BadInput, ValidationError) as exc:
        code = exc.code if isinstance(exc, BadInput) else "malformed_request"
        status, body = 422, {"error": {"code": code, "message": str(exc)}}
    reply = Reply(id=f"reply_{request_id}", request_id=request_id, status=status, body=body)
    _runtime.publisher.publish(gateway_id, body.get("id") or body.get("session_id") or "", 0, [reply])


def session_created(checked: SessionSpec) -> SessionCreated:
    """A session's first input, from its spec: its tools and delegation handler resolved
    against the registries now (an unknown one is refused), its limits filled in, its own texts
    through its privacy boundary."""
    created = SessionCreated(
        instructions=checked.instructions,
        limits=_limits(checked),
        greeting=Greeting.model_validate(checked.greeting.model_dump()) if checked.greeting else None,
        hangup_when=checked.hangup.when if checked.hangup else None,
        app_webhook=AppWebhook.model_validate(checked.webhook.model_dump()) if checked.webhook else None,
        event_stream=EventStream.model_validate(checked.events.model_dump()) if checked.events else None,
        provider=checked.provider,
        live=_live_setup(checked),
        privacy=checked.privacy,
        storage=checked.storage,
        **_session_catalog(checked.tools),
    )
    return redacted_creation(created)


def _session_catalog(names: tuple[str, ...]) -> dict[str, Any]:
    """The registered tools a session asked for, fixed at creation with their digest."""
    specs = []
    for name in names:
        declared = _runtime.registry.get(name)
        if declared is None:
            known = ", ".join(tool.name for tool in _runtime.registry.tools) or "none"
            raise UnknownTool(f"no registered tool {name!r} (registered: {known})")
        specs.append(declared.spec)
    catalog = ToolCatalog(tools=tuple(specs))
    return {
        "tools": catalog.provider_tools(),
        "catalog_digest": catalog.digest if specs else "",
        "tool_versions": {spec.name: spec.version for spec in specs},
        "tool_side_effects": {spec.name: str(spec.side_effect) for spec in specs},
        "tool_sensitive": {spec.name: spec.sensitive for spec in specs if spec.sensitive},
    }


def _current_digest(tool_versions: dict[str, str]) -> str:
    """The digest the session's tools have in today's registry ("" if one is gone)."""
    specs = []
    for name in tool_versions:
        declared = _runtime.registry.get(name)
        if declared is None:
            return ""
        specs.append(declared.spec)
    return ToolCatalog(tools=tuple(specs)).digest


def _limits(spec: SessionSpec) -> dict[str, Any]:
    settings = _runtime.settings
    return {
        "max_output_tokens": spec.limits.max_output_tokens or settings.max_output_tokens,
        "max_session_seconds": spec.limits.max_session_seconds or settings.max_session_seconds,
        "compaction_input_tokens": spec.limits.compaction_input_tokens or settings.compaction_input_tokens,
        "usage_budget_tokens": spec.limits.usage_budget_tokens or settings.usage_budget_tokens,
        "usage_budget_seconds": spec.limits.usage_budget_seconds,
    }


def _live_setup(spec: SessionSpec) -> LiveSetup | None:
    """A Live session's delegation handler, fixed at creation with its version (an unknown one
    is refused now, not at the first delegation)."""
    if not capabilities_for(spec.provider).delegations:
        return None
    live = spec.live
    name = live.delegation if live is not None else None
    delay = live.acknowledgement_delay_ms if live is not None else 400
    if name is None:
        return LiveSetup(acknowledgement_delay_ms=delay)
    declared = _runtime.handlers.get(name)
    if declared is None:
        known = ", ".join(handler.name for handler in _runtime.handlers.handlers) or "none"
        raise UnknownDelegationHandler(f"no registered delegation handler {name!r} (registered: {known})")
    return LiveSetup(handler=name, handler_version=declared.version, acknowledgement_delay_ms=delay)
