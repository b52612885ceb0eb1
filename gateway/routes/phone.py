"""Phone calls coming in: the provider's webhook that announces one, the routes that say which
session answers a number, and what became of a call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openai.types.webhooks import LiveTransportIncomingWebhookEvent, RealtimeCallIncomingWebhookEvent
from starlette.requests import Request
from starlette.responses import Response

from gateway.phone import WebhookRefused, answer_phone_call
from gateway.routes import requests
from gateway.routes.answers import Answer, Record, Removed, created, page_of, relayed, segment
from gateway.routes.requests import page_asked
from gateway.routes.table import Operation, paging
from gateway.web import error_response
from pipeline.api.requests import RouteSpec

if TYPE_CHECKING:
    from gateway.ports import PhoneRoutesPort

WEBHOOK_PATH = "/v1/webhooks/openai"

RoutePage = page_of("routes", "A page of routes, and refused calls counted by why.", "refused")


class RouteAnswer(Answer):
    """A route, with its calls counted."""

    route: dict[str, Any]


class PhoneCall(Record):
    """What became of a phone call: its session, or why not."""


class WebhookAnswer(Record):
    """A delivery recorded (and its call answered), or an event acted on by nothing."""


async def openai_webhook(api: PhoneRoutesPort, request: Request) -> Response:
    """The provider announces a phone call. Its signature is checked (400 and nothing
    created otherwise); the delivery is recorded and the call answered once per call id
    (accepted with its route's session, or rejected with a SIP status) before the 2xx. A
    delivery that could not be recorded, or whose call could not be answered, gets a 5xx
    so the provider delivers it again."""
    body = await request.body()
    try:
        event = api.phone_door.unwrap(body, request.headers)
    except WebhookRefused as refused:
        api.counters.count_refused_webhook(refused.code)
        return error_response(400, refused.code, str(refused))
    webhook_id = request.headers.get("webhook-id", event.id)
    if isinstance(event, LiveTransportIncomingWebhookEvent):
        # A Live phone call: answered by its session id, through the Live API.
        return await answer_phone_call(
            api, webhook_id, event.data.session_id, event.data.sip_headers, provider="live"
        )
    if not isinstance(event, RealtimeCallIncomingWebhookEvent):
        return WebhookAnswer(received=event.type, acted=False).sent()
    return await answer_phone_call(api, webhook_id, event.data.call_id, event.data.sip_headers)


async def list_routes(api: PhoneRoutesPort, request: Request) -> Response:
    """A page of the routes in number order, with the calls refused counted by why."""
    status, body = await api.rpc.call("routes", verb="list", page=page_asked(request, "routes"))
    if status == 200:
        body = {**body, "refused": {**body["refused"], **await api.counters.refused_webhooks()}}
    return relayed(status, body)


async def add_route(api: PhoneRoutesPort, request: Request) -> Response:
    """Add a route (or replace the one for the same number): 201, or 422."""
    route = await requests.body(request, RouteSpec)
    status, body = await api.rpc.call("routes", verb="add", route=route.model_dump(mode="json"))
    location = f"/v1/routes/{segment(body['route']['id'])}" if status == 201 else None
    return created(body, status, location)


async def phone_call(api: PhoneRoutesPort, request: Request) -> Response:
    """What became of a phone call (by the provider's call id): its session, or why not."""
    status, body = await api.rpc.call("routes", verb="call", route_id=request.path_params["call_id"])
    return relayed(status, body)


async def show_route(api: PhoneRoutesPort, request: Request) -> Response:
    """One route, with its calls counted (where a created route's `Location` points)."""
    status, body = await api.rpc.call("routes", verb="show", route_id=request.path_params["route_id"])
    return relayed(status, body)


async def remove_route(api: PhoneRoutesPort, request: Request) -> Response:
    status, body = await api.rpc.call("routes", verb="remove", route_id=request.path_params["route_id"])
    return relayed(status, body)


ROUTES = (
    Operation(
        "POST",
        WEBHOOK_PATH,
        "The provider announces a phone call (signed)",
        "phone",
        {200: "recorded and answered"},
        openai_webhook,
        errors={400: ("invalid_signature", "malformed_webhook", "webhooks_not_configured")},
        security="webhook",
        answer=WebhookAnswer,
        starts_a_call=True,
    ),
    Operation(
        "GET",
        "/v1/routes",
        "Phone routes in number order, with refused webhooks counted",
        "phone",
        {200: "a page of routes"},
        list_routes,
        query=paging("the number"),
        answer=RoutePage,
    ),
    Operation(
        "POST",
        "/v1/routes",
        "Add a route (or replace the one for its number)",
        "phone",
        {201: "the route"},
        add_route,
        body=RouteSpec,
        errors={422: ("malformed_request", "unknown_tool", "events_url_unsupported", "model_retired")},
        location="/v1/routes/{route_id}",
        answer=RouteAnswer,
    ),
    Operation(
        "GET",
        "/v1/routes/{route_id}",
        "A route, with its calls counted",
        "phone",
        {200: "the route"},
        show_route,
        errors={404: ("route_not_found",)},
        answer=RouteAnswer,
    ),
    Operation(
        "DELETE",
        "/v1/routes/{route_id}",
        "Remove a route",
        "phone",
        {200: "removed"},
        remove_route,
        errors={404: ("route_not_found",)},
        answer=Removed,
    ),
    Operation(
        "GET",
        "/v1/phone-calls/{call_id}",
        "What became of a phone call",
        "phone",
        {200: "its session, or why not"},
        phone_call,
        errors={404: ("call_not_found",)},
        answer=PhoneCall,
    ),
)
