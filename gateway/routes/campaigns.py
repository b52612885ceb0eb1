"""Campaigns: many calls going out, dialled as their window and `max_concurrent` allow; their
contacts, and pausing, resuming or cancelling them."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.routes import requests
from gateway.routes.answers import Answer, Record, created, page_of, relayed
from gateway.routes.requests import new_id, page_asked
from gateway.routes.table import Operation, Query, paging
from gateway.web import error_response
from pipeline.api.pages import MAXIMUM_LIMIT_OF
from pipeline.outbound.specs import CampaignSpec, ContactsPage

if TYPE_CHECKING:
    from gateway.ports import Workers

CampaignPage = page_of("campaigns", "A page of campaigns.")
ContactPage = page_of("contacts", "A page of a campaign's contacts.")
# What a campaign's verb may be (any other is no route: 404 `not_found`).
VERBS = ("pause", "resume", "cancel")


class Campaign(Record):
    """A campaign and its counts."""


class ContactsAdded(Answer):
    """What was taken, and each row refused by its number and why."""

    campaign_id: str
    added: int
    refused: list[dict[str, Any]]


async def create_campaign(api: Workers, request: Request) -> Response:
    """A campaign: 201 with its counts (it dials as its window and `max_concurrent` allow;
    `"paused": true` holds it while more contacts are added); 409 on a Realtime session; 422
    for bad input, a window that never opens or an expiry past."""
    spec = await requests.body(request, CampaignSpec)
    campaign_id = new_id(request, "camp")
    status, body = await api.rpc.call(
        "campaigns",
        verb="create",
        campaign_id=campaign_id,
        spec=spec.model_dump(mode="json"),
        now=time.time(),
    )
    return created(body, status, f"/v1/campaigns/{campaign_id}")


async def list_campaigns(api: Workers, request: Request) -> Response:
    """A page of the campaigns, newest first."""
    status, body = await api.rpc.call("campaigns", page=page_asked(request, "campaigns"), verb="list")
    return relayed(status, body)


async def campaign(api: Workers, request: Request) -> Response:
    status, body = await api.rpc.call(
        "campaigns", verb="show", campaign_id=request.path_params["campaign_id"]
    )
    return relayed(status, body)


async def campaign_contacts(api: Workers, request: Request) -> Response:
    """A page of a campaign's contacts, in their order (`?limit=` ≤ 1,000)."""
    campaign_id = request.path_params["campaign_id"]
    page = page_asked(request, "contacts")
    status, body = await api.rpc.call("campaigns", page=page, verb="contacts", campaign_id=campaign_id)
    return relayed(status, body)


async def add_campaign_contacts(api: Workers, request: Request) -> Response:
    """More contacts for a campaign not over: `{"contacts": [...]}` (≤ 1,000) or a CSV body
    (`text/csv`, ≤ 1 MiB); each bad row is refused by its number, the rest taken."""
    campaign_id = request.path_params["campaign_id"]
    if "text/csv" in request.headers.get("content-type", ""):
        raw = await request.body()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            return error_response(422, "malformed_request", "the CSV is not UTF-8")
        first_line = request.query_params.get("first_line", "2")
        if not first_line.isdigit() or len(first_line) > 7:
            return error_response(422, "malformed_request", "first_line must be a line number")
        status, answer = await api.rpc.call(
            "campaigns", verb="add_contacts", campaign_id=campaign_id, csv=text, first_line=int(first_line)
        )
        return relayed(status, answer)
    page = await requests.body(request, ContactsPage)
    status, answer = await api.rpc.call(
        "campaigns",
        verb="add_contacts",
        campaign_id=campaign_id,
        contacts=[contact.model_dump(mode="json") for contact in page.contacts],
    )
    return relayed(status, answer)


async def campaign_verb(api: Workers, request: Request) -> Response:
    """Pause (no new dials; calls in progress finish), resume, or cancel a campaign."""
    verb = request.path_params["verb"]
    if verb not in VERBS:
        return error_response(404, "not_found", f"a campaign has no {verb[:40]!r}: pause, resume or cancel")
    status, body = await api.rpc.call("campaigns", verb=verb, campaign_id=request.path_params["campaign_id"])
    return relayed(status, body)


_NO_CAMPAIGN: dict[int, tuple[str, ...]] = {404: ("campaign_not_found", "not_found")}

# The contacts' routes come before the verbs': `/contacts` is not a verb.
ROUTES = (
    Operation(
        "GET",
        "/v1/campaigns",
        "Campaigns, newest first",
        "outbound",
        {200: "a page of campaigns"},
        list_campaigns,
        query=paging("the creation time and the id, newest first"),
        answer=CampaignPage,
    ),
    Operation(
        "POST",
        "/v1/campaigns",
        "Create a campaign",
        "outbound",
        {201: "the campaign and its counts"},
        create_campaign,
        body=CampaignSpec,
        errors={409: ("not_supported_on_realtime",), 422: ("malformed_request", "model_retired")},
        location="/v1/campaigns/{campaign_id}",
        answer=Campaign,
    ),
    Operation(
        "GET",
        "/v1/campaigns/{campaign_id}",
        "A campaign",
        "outbound",
        {200: "the campaign"},
        campaign,
        errors=_NO_CAMPAIGN,
        answer=Campaign,
    ),
    Operation(
        "GET",
        "/v1/campaigns/{campaign_id}/contacts",
        "A page of a campaign's contacts, in the campaign's order",
        "outbound",
        {200: "a page of contacts"},
        campaign_contacts,
        errors={**_NO_CAMPAIGN, 422: ("malformed_request",)},
        # A contact keeps no time it was added: no created_after / created_before.
        query=paging("the contact's position", maximum=MAXIMUM_LIMIT_OF["contacts"], dated=False),
        answer=ContactPage,
    ),
    Operation(
        "POST",
        "/v1/campaigns/{campaign_id}/contacts",
        "More contacts for a campaign (JSON, or CSV as `text/csv`)",
        "outbound",
        {200: "what was taken and what was refused"},
        add_campaign_contacts,
        body=ContactsPage,
        other_bodies={"text/csv": {"schema": {"type": "string"}}},
        errors={**_NO_CAMPAIGN, 409: ("campaign_over",), 422: ("malformed_request",)},
        query=(Query("first_line", "a CSV's first data line (2)"),),
        answer=ContactsAdded,
    ),
    Operation(
        "POST",
        "/v1/campaigns/{campaign_id}/{verb}",
        "Pause, resume or cancel a campaign",
        "outbound",
        {200: "the campaign"},
        campaign_verb,
        errors={**_NO_CAMPAIGN, 409: ("campaign_over",)},
        empty_body=True,
        path_schemas={"verb": {"enum": list(VERBS)}},
        answer=Campaign,
    ),
)
