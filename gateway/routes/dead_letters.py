"""Dead letters: the messages no worker could handle, to read, send again or purge (admin)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.routes.answers import Answer, page_of, relayed
from gateway.routes.requests import page_asked
from gateway.routes.table import Operation, paging

if TYPE_CHECKING:
    from gateway.ports import Workers

DeadLetterPage = page_of("dead_letters", "A page of dead letters.")


class DeadLetter(Answer):
    """A dead letter, with what a replay would do."""

    id: str
    replay_would: Any


class DeadLetterDone(Answer):
    """What a replay or a purge did."""

    id: str
    done: Any
    outlook: Any


async def dead_letters(api: Workers, request: Request) -> Response:
    """A page of the dead letters, oldest first (by when each was dead-lettered)."""
    status, body = await api.rpc.call("dead_letters", page=page_asked(request, "dead_letters"), verb="list")
    return relayed(status, body)


async def dead_letter(api: Workers, request: Request) -> Response:
    """A dead letter, with what a replay would do."""
    status, body = await api.rpc.call("dead_letters", verb="show", letter_id=request.path_params["letter_id"])
    return relayed(status, body)


async def purge(api: Workers, request: Request) -> Response:
    status, body = await api.rpc.call(
        "dead_letters", verb="purge", letter_id=request.path_params["letter_id"]
    )
    return relayed(status, body)


async def replay(api: Workers, request: Request) -> Response:
    status, body = await api.rpc.call(
        "dead_letters", verb="replay", letter_id=request.path_params["letter_id"]
    )
    return relayed(status, body)


_NOT_FOUND: dict[int, tuple[str, ...]] = {404: ("dead_letter_not_found",)}

ROUTES = (
    Operation(
        "GET",
        "/v1/dead-letters",
        # They are kept in Redis, not with a creation time: their time is when each was
        # dead-lettered, which created_after / created_before filter on.
        "Dead letters, oldest first (their time is when each was dead-lettered)",
        "admin",
        {200: "a page of dead letters"},
        dead_letters,
        query=paging("the time each was dead-lettered and the id, oldest first"),
        answer=DeadLetterPage,
    ),
    Operation(
        "GET",
        "/v1/dead-letters/{letter_id}",
        "A dead letter, with what a replay would do",
        "admin",
        {200: "the letter"},
        dead_letter,
        errors=_NOT_FOUND,
        answer=DeadLetter,
    ),
    Operation(
        "DELETE",
        "/v1/dead-letters/{letter_id}",
        "Purge a dead letter",
        "admin",
        {200: "purged"},
        purge,
        errors=_NOT_FOUND,
        answer=DeadLetterDone,
    ),
    Operation(
        "POST",
        "/v1/dead-letters/{letter_id}/replay",
        "Send a dead letter again",
        "admin",
        {200: "sent again"},
        replay,
        errors=_NOT_FOUND,
        empty_body=True,
        answer=DeadLetterDone,
    ),
)
