"""The strict wire oracle: does an event match the `openai` SDK's Realtime types exactly?

The SDK's own models accept unknown keys silently (`extra="allow"`) and parse the event union
without its discriminator, so neither catches a beta name or a stray field. Here the unions are
re-tagged on `type` and every `model_extra` key found while walking the parsed event is reported,
except the three session fields the server sends but the SDK does not declare (PROTOCOL.md §5).
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from openai.types.realtime import (
    RealtimeClientEvent,
    RealtimeServerEvent,
    ResponseCreateEventWithReferencesParam,
)
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

Direction = Literal["server", "client"]

# The server sends these on every session object; the SDK's RealtimeSessionCreateRequest lacks them.
ALLOWED_UNKNOWN_FIELDS = frozenset({"$.session.id", "$.session.object", "$.session.expires_at"})


@dataclass(frozen=True)
class WireProblem:
    """One way an event departs from the wire types: where, what kind, and the oracle's words."""

    path: str
    kind: Literal["missing", "unknown", "invalid"]
    message: str

    def __str__(self) -> str:
        if self.kind == "unknown":
            return f"unknown field {self.path}"
        return f"{self.path}: {self.message}"


def _tagged(alias: Any) -> TypeAdapter[Any]:
    # The SDK alias is Annotated[Union[...], PropertyInfo]; pydantic only sees a smart union in it,
    # which reports a hundred mismatches for one bad event instead of the one that matters.
    members = typing.get_args(typing.get_args(alias)[0])
    return TypeAdapter(Annotated[Union[members], Field(discriminator="type")])  # type: ignore[arg-type]  # noqa: UP007


@functools.cache
def _adapters() -> dict[str, TypeAdapter[Any]]:
    """Build the three adapters once, on first use: they take about a second to compile."""
    return {
        "server": _tagged(RealtimeServerEvent),
        "client": _tagged(RealtimeClientEvent),
        "references": TypeAdapter(ResponseCreateEventWithReferencesParam),
    }


def _unknown_fields(value: object, path: str = "$") -> Iterator[str]:
    if isinstance(value, BaseModel):
        yield from (f"{path}.{key}" for key in (value.model_extra or {}))
        for name in type(value).model_fields:
            yield from _unknown_fields(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, (list, tuple)):
        for index, member in enumerate(value):
            yield from _unknown_fields(member, f"{path}[{index}]")


def _refers_to_items(event: dict[str, Any]) -> bool:
    # Only ResponseCreateEventWithReferencesParam accepts item_reference inputs (PROTOCOL.md §5, 2).
    response = event.get("response")
    inputs = response.get("input") if isinstance(response, dict) else None
    return isinstance(inputs, list) and any(
        isinstance(item, dict) and item.get("type") == "item_reference" for item in inputs
    )


def _validation_problems(exc: ValidationError, *, tag: object) -> list[WireProblem]:
    problems = []
    for error in exc.errors():
        location = list(error["loc"])
        # A tagged union puts the tag first in every location; the field path is what helps.
        if location and location[0] == tag:
            location = location[1:]
        problems.append(
            WireProblem(
                path=".".join(str(part) for part in location) or "type",
                kind="missing" if error["type"] == "missing" else "invalid",
                message=error["msg"],
            )
        )
    return problems


def _without_references(event: dict[str, Any]) -> dict[str, Any]:
    response = dict(event["response"])
    response["input"] = [
        item
        for item in response["input"]
        if not (isinstance(item, dict) and item.get("type") == "item_reference")
    ]
    return {**event, "response": response}


def wire_problems(event: dict[str, Any], *, direction: Direction) -> list[WireProblem]:
    """Every departure of `event` from the strict wire types, structured; empty when it is valid."""
    adapters = _adapters()
    if direction == "client" and event.get("type") == "response.create" and _refers_to_items(event):
        try:
            adapters["references"].validate_python(event)
        except ValidationError as exc:
            return _validation_problems(exc, tag=None)
        # The TypedDict drops unknown keys unseen, so look for them with the references left out.
        event = _without_references(event)
    try:
        parsed = adapters[direction].validate_python(event)
    except ValidationError as exc:
        return _validation_problems(exc, tag=event.get("type"))
    return [
        WireProblem(path=path, kind="unknown", message="unknown field")
        for path in _unknown_fields(parsed)
        if path not in ALLOWED_UNKNOWN_FIELDS
    ]


def wire_errors(event: dict[str, Any], *, direction: Direction) -> list[str]:
    """Every departure of `event` from the strict wire types, as readable lines; empty when valid."""
    return [str(problem) for problem in wire_problems(event, direction=direction)]
