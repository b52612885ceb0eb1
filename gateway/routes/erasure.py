"""Erasure (admin): an ended session's content, or every ended session of a caller's number."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from gateway.routes.answers import Record, relayed
from gateway.routes.requests import identity_of, refusing
from gateway.routes.sessions import S
from gateway.routes.table import Operation
from pipeline.call.limits import ERASURE_REPLY_TIMEOUT_MS
from pipeline.phone.numbers import e164

if TYPE_CHECKING:
    from gateway.ports import Workers


class Erased(Record):
    """What an erasure removed (`already_erased` on a repeat)."""


class CallerErased(Record):
    """How many of a caller's sessions were erased, and how many were live (skipped)."""


async def erase(api: Workers, request: Request) -> Response:
    """Erase an ended session's content: 200 with what was removed (`already_erased` on a
    repeat), 404 for an unknown session, 409 `session_live` while its call runs."""
    session_id = request.path_params["session_id"]
    status, body = await api.rpc.call(
        "erase_session", ERASURE_REPLY_TIMEOUT_MS, session_id=session_id, by=_who(request)
    )
    return relayed(status, body)


async def erase_caller(api: Workers, request: Request) -> Response:
    """Erase every ended session whose phone call came from or went to an E.164 number
    (422 otherwise): 200 with how many were erased and how many were live (skipped)."""
    with refusing():
        number = e164(request.path_params["number"])
    status, body = await api.rpc.call(
        "erase_caller", ERASURE_REPLY_TIMEOUT_MS, number=number, by=_who(request)
    )
    return relayed(status, body)


def _who(request: Request) -> str:
    """Who asked, as the audit row of an erasure names them: the key's role and id."""
    identity = identity_of(request)
    return f"{identity.role}:{identity.key_id}" if identity is not None else "unknown"


ROUTES = (
    Operation(
        "DELETE",
        S,
        "Erase an ended session's content (admin)",
        "admin",
        {200: "what was removed"},
        erase,
        errors={404: ("session_not_found", "not_found"), 409: ("session_live",)},
        answer=Erased,
    ),
    Operation(
        "DELETE",
        "/v1/callers/{number}",
        "Erase every ended session of a caller's number, and the number from its calls turned away",
        "admin",
        {200: "what was erased"},
        erase_caller,
        errors={422: ("malformed_number",)},
        answer=CallerErased,
    ),
)
