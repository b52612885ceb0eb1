"""Campaigns, the durable dialer: their API, each tick that claims and places what may be
dialled now, and the sweeper that ticks those due."""

from __future__ import annotations

import logging
import time
from typing import Any

import dramatiq
from psycopg2.errors import UniqueViolation

from models import campaigns as campaign_store
from models import dialer
from models import outbound as outgoing
from pipeline.api.pages import requested
from pipeline.api.requests import SessionSpec
from pipeline.call.errors import CampaignNotFound, MalformedRequest, SessionExists
from pipeline.outbound.contacts import Contact, RefusedRow, iter_contacts, zone_refusal
from pipeline.outbound.dialing import dialling_gateway
from pipeline.outbound.specs import CampaignSpec, campaign_refusal, outbound_refusal
from pipeline.outbound.vars import filled
from pipeline.phone.sip import line_out
from pipeline.platform.names import ADMISSION_QUEUE
from pipeline.session.state import OutboundCall
from workers import app_webhooks, runtime
from workers import metrics as worker_metrics
from workers.actors.shared import (
    NOTIFY_CAMPAIGN,
    REQUEST_POLICY,
    after_commit,
    answer_request,
    app_notification,
    publish,
    session_created,
    sweeps,
)
from workers.liveness import gateways_alive

logger = logging.getLogger(__name__)

_runtime = runtime.current()


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="campaigns", **REQUEST_POLICY)
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

    answer_request(request_id, gateway_id, act)


def _campaign_refused(spec: CampaignSpec, now: float) -> None:
    """A campaign that cannot run is refused whole: its session's provider places no calls, its
    trunk is unknown, its session's tools or handler are unregistered, its window never opens or
    it expired already."""
    session_spec = SessionSpec.model_validate(spec.session)
    refused = outbound_refusal(session_spec)
    if refused is not None:
        raise refused
    # An unregistered tool or handler, or an unknown agent, is refused now, not per dial.
    session_created(session_spec, vars_to_come=True)
    outgoing.trunk_named(_runtime.settings.broker_namespace, spec.trunk)
    why = campaign_refusal(spec, campaign_store.utc(now))
    if why is not None:
        raise MalformedRequest(why)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="campaign_tick", max_retries=5, min_backoff=200)
def campaign_tick(campaign_id: str) -> None:
    """One look of a campaign's dialer: claim what may be dialled now, then place each call in
    a transaction of its own, through a live gateway."""
    now = time.time()
    tick = campaign_store.claim_dials(
        campaign_id, campaign_store.utc(now), capacity=dialer.Capacity.of(_runtime.settings)
    )
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
    kwargs = {"campaign_id": campaign_id, "delivery_id": delivery_id, "kind": kind, "data": shown}
    _runtime.broker.enqueue(app_notification(NOTIFY_CAMPAIGN, kwargs))


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
    gateway_id = dialling_gateway(claimed.call_id, gateways)
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
                update={"outbound": call, "phone": line_out(claimed.to, spec.keys)}
            ),
            request_id=claimed.call_id,
            capacity=dialer.Capacity.of(_runtime.settings),
            now=now,
            publish=publish,
            keys=_runtime.keys,
            claimed=True,
        )
    except SessionExists:
        return  # placed already, by the run that claimed it or an earlier retry of this one
    for applied in placed.applied:
        after_commit(claimed.session_id, applied)


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

sweeps.add(
    sweep_campaigns,
    CAMPAIGN_SWEEP_INTERVAL_S,
    name="campaign-sweeper",
    # Routine: a running campaign is due at every retry, window and free line.
    report=None,
)
