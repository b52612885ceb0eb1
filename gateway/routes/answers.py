"""The answers every room gives: the error shape, a verb's `Queued`, a page of a list, a created
resource's `Location`. Each answer body the API sends has a model, so its schema in
`/openapi.json` is the model's own JSON Schema.

An answer's model lists the fields a client may rely on and allows more: a worker's record
grows a field without the description lying about it.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model
from starlette.responses import JSONResponse, Response

from pipeline.platform.timestamps import RFC3339_UTC

# A point in time, as every answer writes one (pipeline.platform.timestamps: RFC 3339 UTC, microseconds).
Timestamp = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "pattern": f"^{RFC3339_UTC.pattern}$",
            "examples": ["2026-12-04T23:37:51.123456Z"],
        }
    ),
]
# The cursor of the next page of a list (null: the last page).
Cursor = Annotated[str | None, Field(description="the cursor of the next page (null: the last page)")]


class Answer(BaseModel):
    """An answer's body: the fields named, and any others its maker adds."""

    model_config = ConfigDict(extra="allow")

    def sent(self, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        """This answer as JSON, with only the fields it was given."""
        return JSONResponse(
            self.model_dump(mode="json", exclude_unset=True), status_code=status, headers=headers
        )


class ErrorDetail(BaseModel):
    code: str
    message: str
    status: str | None = Field(default=None, description="the session's status (a refusal for its state)")
    end_reason: str | None = Field(
        default=None, description="`session_ended`: how the session ended (docs/api.md, Endings)"
    )
    model: str | None = Field(
        default=None, description="`live_model_at_capacity`: the Live model that is full"
    )
    cap: int | None = Field(
        default=None, description="`live_model_at_capacity`: its cap of sessions in a call at once"
    )


class Error(BaseModel):
    """Every refusal, a 500 included."""

    error: ErrorDetail


class Record(Answer):
    """A record a worker answers with (a route, a trunk, a campaign, a call...)."""


class Removed(Answer):
    """What a remove took away."""

    removed: str


class Queued(Answer):
    """A verb's answer: what the worker that applied it said, or that it is queued."""

    status: str
    session_id: str | None = None


def queued(session_id: str, **more: str) -> Queued:
    """A verb asked for and not answered within the wait: it is in the log and will be applied."""
    return Queued(session_id=session_id, status="queued", **more)


def page_of(items: str, description: str, *more: str) -> type[Answer]:
    """A page of a list: its items under the list's own name, beside `next` (the cursor)."""
    fields: dict[str, Any] = {items: (list[dict[str, Any]], ...), "next": (Cursor, ...)}
    fields.update(dict.fromkeys(more, (Any, ...)))
    name = "".join(word.capitalize() for word in items.removesuffix("s").split("_")) + "Page"
    return create_model(name, __base__=Answer, __doc__=description, **fields)


def created(body: Any, status: int, location: str | None) -> Response:
    """An answer that, when it is 201, says where the created resource is (`Location`). The
    idempotency wrapper stores the header with the answer, so a replay carries it too."""
    headers = {"Location": location} if status == 201 and location is not None else None
    return JSONResponse(body, status_code=status, headers=headers)


def segment(value: str) -> str:
    """A name as one path segment (a "/" or a space in a trunk's name stays inside it)."""
    return quote(value, safe="+")


def relayed(status: int, body: Any) -> Response:
    """A worker's answer, as it answered."""
    return JSONResponse(body, status_code=status)
