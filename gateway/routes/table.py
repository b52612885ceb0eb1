"""The route table: each route declares, beside its handler, all that is served and described of it.

A room module (`gateway/routes/<room>.py`) lists its routes as `Operation`s: the method and path,
the handler, the request model it validates with, the answer model(s) of its success, and the
error codes it may answer by status. `RouteTable` serves them (Starlette routes, in the order
given, since a literal path must be tried before a template that also matches it) and
`gateway/openapi.py` describes them: the API is written down once, here.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from gateway.routes.requests import Refused, draining
from gateway.web import EXCEPTION_HANDLERS, error_response
from pipeline.api.pages import DEFAULT_LIMIT, MAXIMUM_LIMIT

if TYPE_CHECKING:
    from gateway.ports import ApiPort

Security = Literal["key", "open", "webhook", "live"]
# Tags group the operations on /docs as the README's API section does.
Tag = Literal["sessions", "verbs", "phone", "outbound", "agents", "models", "admin", "service"]

Handler = Callable[["ApiPort", Request], Awaitable[Response]]
Listener = Callable[["ApiPort", WebSocket], Awaitable[None]]

# A session's id as a path names it; any other is no route at all (404 `not_found`).
SESSION_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}")


@dataclass(frozen=True)
class Query:
    """One query parameter (every one is optional)."""

    name: str
    description: str
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})


def paging(order: str, *, maximum: int = MAXIMUM_LIMIT, dated: bool = True) -> tuple[Query, ...]:
    """A list's paging parameters (`pipeline.api.pages`); `order` says what its pages follow."""
    limit = Query(
        "limit",
        f"at most this many (1 to {maximum:,}; {DEFAULT_LIMIT})",
        {"type": "integer", "minimum": 1, "maximum": maximum},
    )
    cursor = Query("cursor", f"the `next` of the page before (pages follow {order})")
    if not dated:
        return (limit, cursor)
    return (
        limit,
        cursor,
        Query("created_after", "created at or after this time: ISO 8601 (UTC when it names no zone)"),
        Query("created_before", "created before this time: ISO 8601 (UTC when it names no zone)"),
    )


@dataclass(frozen=True)
class Operation:
    """One method on one path: its handler, what it takes, its success answers and its error
    codes by status (besides those every route of its kind may answer: gateway/openapi.py)."""

    method: str
    path: str
    summary: str
    tag: Tag
    # Each success status, described.
    success: dict[int, str]
    handler: Handler | None = None
    # The WebSocket's handler (a route served over HTTP's upgrade, described as a GET).
    listener: Listener | None = None
    # The JSON body the handler validates with; `body_required` false when it may be left out.
    body: type[BaseModel] | None = None
    body_required: bool = True
    # A body's other media types than JSON, with the schema of each.
    other_bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A verb that takes no body at all (`{}` or nothing).
    empty_body: bool = False
    # The success answer's model (or one by status); answers other than JSON by media type.
    answer: type[BaseModel] | dict[int, type[BaseModel]] | None = None
    other_answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[int, tuple[str, ...]] = field(default_factory=dict)
    query: tuple[Query, ...] = ()
    # A path parameter's schema when it is narrower than any string.
    path_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    security: Security = "key"
    # Where a 201 says the created resource is (its `Location` header).
    location: str | None = None
    # What starts a call: refused 503 `draining` by a gateway that is stopping (another takes it).
    starts_a_call: bool = False

    @property
    def path_names(self) -> list[str]:
        return [part[1:-1] for part in self.path.split("/") if part.startswith("{") and part.endswith("}")]

    @property
    def body_types(self) -> tuple[str, ...]:
        """The media types the operation's body may have (none: it takes no body)."""
        if self.body is not None:
            return ("application/json", *self.other_bodies)
        return ("application/json",) if self.empty_body else ()

    def answer_model(self, status: int) -> type[BaseModel] | None:
        return self.answer.get(status) if isinstance(self.answer, dict) else self.answer

    def answer_models(self) -> list[type[BaseModel]]:
        return (
            list(self.answer.values()) if isinstance(self.answer, dict) else [m for m in [self.answer] if m]
        )

    def served(self, port: ApiPort) -> Route | WebSocketRoute:
        """This operation as the Starlette route that serves it through `port`."""
        if self.listener is not None:
            listener = self.listener

            async def listen(websocket: WebSocket) -> None:
                await listener(port, websocket)

            return WebSocketRoute(self.path, listen)
        assert self.handler is not None, self.path
        handler, names_a_session, starts_a_call = (
            self.handler,
            "session_id" in self.path_names,
            self.starts_a_call,
        )

        async def endpoint(request: Request) -> Response:
            if names_a_session and not SESSION_ID.fullmatch(request.path_params["session_id"]):
                return error_response(404, "not_found", f"no route {request.url.path}")
            if starts_a_call and port.draining:
                return draining()
            try:
                return await handler(port, request)
            except Refused as refused:
                return refused.answer

        return Route(self.path, endpoint, methods=[self.method])


class RouteTable:
    """Every operation of the API, in the order they are matched."""

    def __init__(self, *rooms: tuple[Operation, ...]) -> None:
        self.operations: tuple[Operation, ...] = tuple(operation for room in rooms for operation in room)

    def app(self, port: ApiPort) -> Starlette:
        """The API's Starlette app, each handler asking `port` for what it needs of the gateway."""
        routes = [operation.served(port) for operation in self.operations]
        return Starlette(routes=routes, exception_handlers=EXCEPTION_HANDLERS)

    @cached_property
    def _templates(self) -> tuple[tuple[re.Pattern[str], Operation], ...]:
        return tuple(
            (re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(operation.path))), operation)
            for operation in self.operations
        )

    def accepted_bodies(self, method: str, path: str) -> tuple[str, ...] | None:
        """The media types a request's body may have on this method and path: those of the
        operations that match it (a literal path and a template may both); None when no
        operation describes a body there (a path no route serves, or the provider's webhook,
        whose body is what the provider signs)."""
        found = [
            kind
            for pattern, operation in self._templates
            if operation.method == method and pattern.fullmatch(path)
            for kind in operation.body_types
        ]
        return tuple(dict.fromkeys(found)) or None
