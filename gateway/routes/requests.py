"""What every handler reads of a request: its body validated by one helper, and who asked.

A request that does not validate is refused 422 with what is wrong (`malformed_request`, or a
code of its own), raised as `Refused` so that a handler reads straight on; the route table turns
it into the answer (gateway/routes/table.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from gateway.web import error_response
from pipeline.api.idempotency import derived_id
from pipeline.api.pages import requested
from pipeline.api.requests import EVENTS_URL_UNSUPPORTED
from pipeline.api.roles import Identity
from pipeline.call.errors import BadInput, MalformedRequest
from pipeline.call.limits import MAXIMUM_REQUEST_JSON_DEPTH
from pipeline.session.wire import exceeds_depth, holds_unstorable

M = TypeVar("M", bound=BaseModel)

# Validation errors that answer with their own code rather than malformed_request.
TYPED_VALIDATION_CODES = frozenset({EVENTS_URL_UNSUPPORTED})


class Refused(Exception):
    """A request refused before anything was asked: `answer` says why."""

    def __init__(self, answer: Response) -> None:
        super().__init__(answer.status_code)
        self.answer = answer


async def body(request: Request, model: type[M], *, optional: bool = False) -> M:
    """The request's JSON body validated as `model` (an empty one as `{}` when `optional`), or
    `Refused` 422 with what is wrong."""
    raw = await request.body()
    with refusing():
        return model.model_validate(parse_json(raw) if raw.strip() or not optional else {})


@contextmanager
def refusing() -> Iterator[None]:
    """Bad input met inside (a model that does not validate, a `BadInput`) is refused 422."""
    try:
        yield
    except (ValidationError, BadInput) as error:
        raise Refused(invalid(error)) from error


def invalid(error: ValidationError | BadInput) -> Response:
    """The 422 answer to bad input: every problem, and its own code when it has one."""
    if isinstance(error, ValidationError):
        problems = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()]
        # A refusal with a code of its own answers with it (an events URL no broker's).
        typed = [e["type"] for e in error.errors() if e["type"] in TYPED_VALIDATION_CODES]
        return error_response(422, typed[0] if typed else "malformed_request", "; ".join(problems))
    return error_response(422, getattr(error, "code", "malformed_request"), str(error))


def page_asked(request: Request, listing: str) -> dict[str, Any]:
    """The page of `listing` the query asks for (`pipeline.api.pages`: checked here, so a bad limit,
    cursor or time is refused 422 before a worker is asked)."""
    with refusing():
        page: dict[str, Any] = requested(listing, request.query_params).as_query()
    return page


def refuse_any_body(raw: bytes, message: str) -> None:
    """A verb that takes no parameters: nothing, or `{}` (422 otherwise)."""
    if raw.strip() not in (b"", b"{}"):
        raise Refused(error_response(422, "malformed_request", message))


def parse_json(raw: bytes) -> Any:
    """A request body as JSON that can be stored: not deeper than MAXIMUM_REQUEST_JSON_DEPTH,
    and without U+0000 or a lone surrogate (PostgreSQL refuses both)."""
    try:
        value = json.loads(raw or b"null")
    except RecursionError:
        raise MalformedRequest(f"body is nested deeper than {MAXIMUM_REQUEST_JSON_DEPTH} levels") from None
    except ValueError as error:
        raise MalformedRequest(f"body is not JSON: {error}") from error
    if exceeds_depth(value, MAXIMUM_REQUEST_JSON_DEPTH):
        raise MalformedRequest(f"body is nested deeper than {MAXIMUM_REQUEST_JSON_DEPTH} levels")
    if holds_unstorable(value):
        raise MalformedRequest("body holds U+0000 or a lone surrogate, which cannot be stored")
    return value


def new_id(request: Request, kind: str) -> str:
    """A new id of `kind` ("sess", "call", "camp"): derived from the request's Idempotency-Key
    when it has one, so a retry of a create that made something (and lost its answer) finds it
    instead of making it twice; else fresh."""
    seed: str | None = request.scope.get("idempotency_seed")
    return derived_id(seed, kind) if seed is not None else f"{kind}_{uuid.uuid4().hex}"


def identity_of(request: Request) -> Identity | None:
    """The key the request was made with (none on an open route)."""
    identity: Identity | None = request.scope.get("identity")
    return identity


def draining() -> Response:
    """A new call asked of a gateway that is stopping: another gateway takes it (a load balancer
    sends it there once /readyz says so; the provider delivers a webhook again)."""
    return error_response(
        503, "draining", "this gateway is stopping and takes no new calls; ask another", {"Retry-After": "1"}
    )
