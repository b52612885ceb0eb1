"""Calls going out: place one call, read it, and the SIP trunks calls are dialled through."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.routes import requests
from gateway.routes.answers import Answer, Record, Removed, created, page_of, relayed, segment
from gateway.routes.requests import new_id, page_asked
from gateway.routes.sessions import live_credentials
from gateway.routes.table import Operation, paging
from pipeline.outbound.specs import CallSpec, TrunkSpec

if TYPE_CHECKING:
    from gateway.ports import CallsPort

TrunkPage = page_of("trunks", "A page of trunks.")


class CallPlaced(Answer):
    """The session made for the call, and the call, dialing."""

    session: dict[str, Any]
    call: dict[str, Any]


class OutboundCall(Record):
    """An outbound call."""


class TrunkAnswer(Answer):
    """A SIP trunk, never its password."""

    trunk: dict[str, Any]


async def place_call(api: CallsPort, request: Request) -> Response:
    """Place one call (a Live session dials `to` through a trunk): 201 with the session and
    the call `dialing`; 409 on a Realtime session, to a suppressed number or without room
    to dial; 404 for an unknown trunk; 422 for bad input."""
    spec = await requests.body(request, CallSpec)
    session_id, call_id = new_id(request, "sess"), new_id(request, "call")
    status, body = await api.rpc.call(
        "place_call",
        session_id=session_id,
        call_id=call_id,
        spec=spec.model_dump(mode="json"),
        now=time.time(),
    )
    if status == 201:
        body = {**body, "live": live_credentials(api, session_id).model_dump(mode="json")}
    return created(body, status, f"/v1/calls/{call_id}")


async def outbound_call(api: CallsPort, request: Request) -> Response:
    status, body = await api.rpc.call("outbound_call", call_id=request.path_params["call_id"])
    return relayed(status, body)


async def list_trunks(api: CallsPort, request: Request) -> Response:
    """A page of the trunks in name order."""
    status, body = await api.rpc.call("trunks", page=page_asked(request, "trunks"), verb="list")
    return relayed(status, body)


async def add_trunk(api: CallsPort, request: Request) -> Response:
    """Add a SIP trunk (or replace the one of that name): 201 (200 replaced), its password
    never answered; 422 for bad input."""
    trunk = await requests.body(request, TrunkSpec)
    # The password travels to the worker that encrypts it, and nowhere else (the actor is
    # never retried into a dead letter: a failure is answered, and the request made again).
    body_out = {**trunk.model_dump(mode="json"), "password": trunk.password.get_secret_value()}
    status, body = await api.rpc.call("trunks", verb="add", trunk=body_out)
    return created(body, status, f"/v1/trunks/{segment(trunk.name)}")


async def show_trunk(api: CallsPort, request: Request) -> Response:
    """One trunk, never its password."""
    status, body = await api.rpc.call("trunks", verb="show", name=request.path_params["name"])
    return relayed(status, body)


async def remove_trunk(api: CallsPort, request: Request) -> Response:
    status, body = await api.rpc.call("trunks", verb="remove", name=request.path_params["name"])
    return relayed(status, body)


_NO_TRUNK: dict[int, tuple[str, ...]] = {404: ("trunk_not_found", "not_found")}

ROUTES = (
    Operation(
        "POST",
        "/v1/calls",
        "Place one call",
        "outbound",
        {201: "the session and the call, dialing"},
        place_call,
        body=CallSpec,
        location="/v1/calls/{call_id}",
        errors={
            404: ("trunk_not_found",),
            409: ("not_supported_on_realtime", "suppressed", "outbound_capacity"),
            422: ("malformed_request", "model_retired"),
            503: ("live_model_at_capacity",),
        },
        answer=CallPlaced,
        starts_a_call=True,
    ),
    Operation(
        "GET",
        "/v1/calls/{call_id}",
        "An outbound call",
        "outbound",
        {200: "the call"},
        outbound_call,
        errors={404: ("call_not_found",)},
        answer=OutboundCall,
    ),
    Operation(
        "GET",
        "/v1/trunks",
        "SIP trunks in name order (never their passwords)",
        "outbound",
        {200: "a page of trunks"},
        list_trunks,
        query=paging("the name"),
        answer=TrunkPage,
    ),
    Operation(
        "POST",
        "/v1/trunks",
        "Add a SIP trunk (or replace the one of its name)",
        "outbound",
        {200: "replaced", 201: "added"},
        add_trunk,
        body=TrunkSpec,
        errors={422: ("malformed_request",)},
        location="/v1/trunks/{name}",
        answer=TrunkAnswer,
    ),
    Operation(
        "GET",
        "/v1/trunks/{name}",
        "A SIP trunk (never its password)",
        "outbound",
        {200: "the trunk"},
        show_trunk,
        errors=_NO_TRUNK,
        answer=TrunkAnswer,
    ),
    Operation(
        "DELETE",
        "/v1/trunks/{name}",
        "Remove a SIP trunk",
        "outbound",
        {200: "removed"},
        remove_trunk,
        errors=_NO_TRUNK,
        answer=Removed,
    ),
)
