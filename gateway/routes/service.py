"""The gateway as a service: its health and readiness, its metrics, who a key is, and the API's
description with its page and the operator console."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Literal

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway import console
from gateway.routes.answers import Answer
from gateway.routes.requests import draining, identity_of
from gateway.routes.table import Operation
from gateway.web import error_response
from pipeline.api.roles import Permission, Role

if TYPE_CHECKING:
    from gateway.ports import ServicePort

# Where the app keeps its own description (gateway.api.build_api puts it there).
DESCRIPTION = "openapi"


class Health(Answer):
    status: Literal["ok"]
    gateway: str


class Ready(Answer):
    status: Literal["ready"]
    gateway: str


class Me(Answer):
    name: str
    role: Role
    may: dict[str, bool]


class OpenApiDocument(Answer):
    """This API as OpenAPI 3.1."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
    components: dict[str, Any]


async def health(api: ServicePort, _request: Request) -> Response:
    return Health(status="ok", gateway=api.gateway_id).sent()


async def ready(api: ServicePort, _request: Request) -> Response:
    """Whether to send this gateway new calls: 503 while it drains (on SIGTERM) or cannot
    reach Redis, so a load balancer sends them to another."""
    reason = api.readiness()
    if reason is None:
        return Ready(status="ready", gateway=api.gateway_id).sent()
    if reason == "draining":
        return draining()
    return error_response(503, "not_ready", f"this gateway is not ready: {reason}", {"Retry-After": "1"})


async def metrics(api: ServicePort, _request: Request) -> Response:
    """The gateway's metrics in the Prometheus text format (read in a thread: the queues'
    are read from Redis)."""
    if api.metrics is None:
        return error_response(404, "metrics_off", "metrics are off (SWITCHBOARD_METRICS=false)")
    body = await asyncio.to_thread(generate_latest, api.metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


async def me(_api: ServicePort, request: Request) -> Response:
    """Who the request's key is and what its role may do (the console shows only the
    buttons a key may use)."""
    identity = identity_of(request)
    assert identity is not None  # a keyed route: the guard put it there
    may = {str(permission): identity.may(permission) for permission in Permission}
    return Me(name=identity.name, role=identity.role, may=may).sent()


async def described(_api: ServicePort, request: Request) -> Response:
    """This API as OpenAPI 3.1 (gateway/openapi.py)."""
    return JSONResponse(getattr(request.app.state, DESCRIPTION))


async def docs_page(_api: ServicePort, request: Request) -> Response:
    return await console.docs_page(request)


async def console_page(_api: ServicePort, request: Request) -> Response:
    return await console.page(request)


async def console_asset(_api: ServicePort, request: Request) -> Response:
    return await console.asset(request)


_HTML = {"text/html": {"schema": {"type": "string"}}}

ROUTES = (
    Operation(
        "GET", "/healthz", "The gateway is up", "service", {200: "up"}, health, security="open", answer=Health
    ),
    Operation(
        "GET",
        "/readyz",
        "The gateway takes new calls (503 while it drains or cannot reach Redis)",
        "service",
        {200: "ready"},
        ready,
        security="open",
        answer=Ready,
        errors={503: ("draining", "not_ready")},
    ),
    Operation(
        "GET",
        "/metrics",
        "The gateway's Prometheus metrics",
        "service",
        {200: "the Prometheus text format"},
        metrics,
        errors={404: ("metrics_off",)},
        other_answers={"text/plain": {"schema": {"type": "string"}}},
    ),
    Operation(
        "GET", "/v1/me", "Who the key is and what its role may do", "service", {200: "the key"}, me, answer=Me
    ),
    Operation(
        "GET",
        "/openapi.json",
        "This document",
        "service",
        {200: "OpenAPI 3.1"},
        described,
        security="open",
        answer=OpenApiDocument,
    ),
    Operation(
        "GET",
        "/docs",
        "This document as a page",
        "service",
        {200: "an HTML page"},
        docs_page,
        security="open",
        other_answers=_HTML,
    ),
    Operation(
        "GET",
        "/console",
        "The operator console",
        "service",
        {200: "an HTML page"},
        console_page,
        security="open",
        other_answers=_HTML,
    ),
    Operation(
        "GET",
        "/console/{asset}",
        "The console's and the docs page's scripts and styles",
        "service",
        {200: "a script or a style sheet"},
        console_asset,
        errors={404: ("not_found",)},
        security="open",
        path_schemas={"asset": {"enum": ["console.js", "console.css", "docs.js", "docs.css"]}},
        other_answers={
            "text/javascript": {"schema": {"type": "string"}},
            "text/css": {"schema": {"type": "string"}},
        },
    ),
)
