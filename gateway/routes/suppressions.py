"""The numbers never dialled (a do-not-call list): add, list, read and remove them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.routes import requests
from gateway.routes.answers import Answer, created, page_of, relayed, segment
from gateway.routes.requests import identity_of, page_asked, refusing
from gateway.routes.table import Operation, paging
from pipeline.api.pages import MAXIMUM_LIMIT_OF
from pipeline.outbound.specs import SuppressionSpec
from pipeline.phone.numbers import e164

if TYPE_CHECKING:
    from gateway.ports import Workers

SuppressionPage = page_of("suppressions", "A page of suppressed numbers.")


class Suppressed(Answer):
    """Whether a number is suppressed now (and, once added, whether it was new)."""

    number: str
    suppressed: bool


class SuppressionAnswer(Answer):
    """A number never dialled: why, by whom, since when."""

    suppression: dict[str, Any]


async def list_suppressions(api: Workers, request: Request) -> Response:
    """A page of the numbers never dialled, in number order (`?limit=` ≤ 1,000)."""
    status, body = await api.rpc.call("suppressions", page=page_asked(request, "suppressions"), verb="list")
    return relayed(status, body)


async def add_suppression(api: Workers, request: Request) -> Response:
    """Never dial this number again: 201 (200 if it was already), 422 for a bad number."""
    spec = await requests.body(request, SuppressionSpec)
    identity = identity_of(request)
    by = identity.name if identity is not None else ""
    status, body = await api.rpc.call(
        "suppressions", verb="add", suppression=spec.model_dump(mode="json"), by=by
    )
    return created(body, status, f"/v1/suppressions/{segment(spec.number)}")


async def show_suppression(api: Workers, request: Request) -> Response:
    """One number never dialled: why, by whom, since when (422 for a number that is none)."""
    with refusing():
        number = e164(request.path_params["number"])
    status, body = await api.rpc.call("suppressions", verb="show", number=number)
    return relayed(status, body)


async def remove_suppression(api: Workers, request: Request) -> Response:
    """Dial this number again (422 for a number that is none)."""
    with refusing():
        number = e164(request.path_params["number"])
    status, body = await api.rpc.call("suppressions", verb="remove", number=number)
    return relayed(status, body)


_NUMBER_ERRORS: dict[int, tuple[str, ...]] = {404: ("suppression_not_found",), 422: ("malformed_number",)}

ROUTES = (
    Operation(
        "GET",
        "/v1/suppressions",
        "Numbers never dialled, in number order",
        "outbound",
        {200: "a page of numbers"},
        list_suppressions,
        errors={422: ("malformed_request",)},
        query=paging("the number", maximum=MAXIMUM_LIMIT_OF["suppressions"]),
        answer=SuppressionPage,
    ),
    Operation(
        "POST",
        "/v1/suppressions",
        "Never dial this number again",
        "outbound",
        {200: "it was already", 201: "added"},
        add_suppression,
        body=SuppressionSpec,
        errors={422: ("malformed_request", "malformed_number")},
        location="/v1/suppressions/{number}",
        answer=Suppressed,
    ),
    Operation(
        "GET",
        "/v1/suppressions/{number}",
        "A number never dialled (in any spelling): why, by whom, since when",
        "outbound",
        {200: "the suppression"},
        show_suppression,
        errors=_NUMBER_ERRORS,
        answer=SuppressionAnswer,
    ),
    Operation(
        "DELETE",
        "/v1/suppressions/{number}",
        "Dial this number again (admin; in any spelling)",
        "outbound",
        {200: "removed"},
        remove_suppression,
        errors=_NUMBER_ERRORS,
        answer=Suppressed,
    ),
)
