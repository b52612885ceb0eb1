"""The desk: the queue of callers waiting for a person, held, or in trouble."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.routes.answers import Answer, relayed
from gateway.routes.table import Operation

if TYPE_CHECKING:
    from gateway.ports import Workers


class Queue(Answer):
    waiting: list[dict[str, Any]]
    held: list[dict[str, Any]]
    struggling: list[dict[str, Any]]


async def call_queue(api: Workers, _request: Request) -> Response:
    """The desk's queue: `{"waiting", "held", "struggling"}` — callers waiting for a person
    (longest first), callers on hold or held by a person, calls in trouble lately."""
    status, body = await api.rpc.call("call_queue")
    return relayed(status, body)


ROUTES = (
    Operation(
        "GET", "/v1/queue", "The desk's queue", "sessions", {200: "the queue"}, call_queue, answer=Queue
    ),
)
