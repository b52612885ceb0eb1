"""The strict wire oracle for the Live API: does an event match `openai.types.live` exactly?

As for Realtime (`simulator.oracle`), the SDK's models accept unknown keys silently and its
unions are not parsed on their discriminator, so the unions are re-tagged on `type` and every
`model_extra` key of the parsed event is reported (LIVE_PROTOCOL.md §6). A client event is also
checked against the SDK's `…Param` TypedDicts, which carry the documented `Required[...]` rules
the pydantic models relax (`delegation_id` is required and nullable there, optional in the
model). A Responses stream event nested in `response.event` is checked too, when its type is
one the SDK knows. An append's content is held to the provider's 500 tokens (§1.3, §4), counted
by the same conservative estimate Switchboard bounds its appends by (`estimated_tokens`).

REST bodies are TypedDicts in the SDK; they are checked inside a wrapper that forbids extra
keys, which pydantic applies to every nested TypedDict as well. The outbound SIP create
(§2.2) is not in SDK 3.57.0, whose create is WebRTC-only: its transport is written out here
from OpenAPI 2.3.0 (`LiveSipTransport`, `LiveSipTrunk`, `LiveSipTrunkAuth`), beside the SDK's
own session config.
"""

from __future__ import annotations

import functools
import re
import typing
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Required, Union

from openai.types.live import ConnectClientEvent, ConnectClientEventParam, ConnectServerEvent
from openai.types.live.live_create_params import LiveCreateParams
from openai.types.live.media_session_config_param import MediaSessionConfigParam
from openai.types.live.session_accept_params import SessionAcceptParams
from openai.types.live.session_refer_params import SessionReferParams
from openai.types.live.session_reject_params import SessionRejectParams
from openai.types.responses import ResponseStreamEvent
from openai.types.webhooks import LiveTransportIncomingWebhookEvent
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

# pydantic reads a TypedDict only from typing_extensions before Python 3.12.
from typing_extensions import TypedDict

from simulator.oracle import Direction, WireProblem

RestBody = Literal["create", "create_sip", "accept", "reject", "refer"]

# Appended content is limited to 500 tokens (§1.3, §4).
MAXIMUM_APPEND_TOKENS = 500
APPEND_TYPES = frozenset(
    {"session.commentary.append", "session.thinking.append", "session.instructions.append"}
)


def _tagged(alias: Any) -> TypeAdapter[Any]:
    # The SDK alias is Annotated[Union[...], PropertyInfo]: re-tagged, one bad event reports the
    # one member it names instead of a mismatch per member.
    members = typing.get_args(typing.get_args(alias)[0])
    return TypeAdapter(Annotated[Union[members], Field(discriminator="type")])  # type: ignore[arg-type]  # noqa: UP007


def _tags(alias: Any) -> frozenset[str]:
    members = typing.get_args(typing.get_args(alias)[0])
    return frozenset(typing.get_args(member.model_fields["type"].annotation)[0] for member in members)


class SipTrunkAuthParam(TypedDict, total=False):
    """Credentials for SIP Digest authentication with the trunk provider (`LiveSipTrunkAuth`)."""

    type: Required[Literal["digest"]]
    username: Required[str]
    password: Required[str]


class SipTrunkParam(TypedDict, total=False):
    """The caller's own SIP trunk for one call (`LiveSipTrunk`): never returned by the API."""

    provider_url: Required[str]
    """`sips:host[:port][;transport=tcp]`."""
    auth: Required[SipTrunkAuthParam]
    caller_number: Required[str]
    """E.164, the SIP From number."""


class SipTransportParam(TypedDict, total=False):
    """Place an outbound call through the trunk (`LiveSipTransport`)."""

    type: Required[Literal["sip"]]
    destination: Required[str]
    """E.164; SIP URI destinations are not supported."""
    trunk: Required[SipTrunkParam]


class SipCreateParams(TypedDict, total=False):
    """`POST /v1/live/sessions` placing an outbound SIP call (`LiveSessionCreateRequest`)."""

    session: Required[MediaSessionConfigParam]
    transport: Required[SipTransportParam]


class _CreateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: LiveCreateParams


class _CreateSipBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: SipCreateParams


class _AcceptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: SessionAcceptParams


class _RejectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: SessionRejectParams


class _ReferBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: SessionReferParams


_REST_BODIES: dict[RestBody, type[BaseModel]] = {
    "create": _CreateBody,
    "create_sip": _CreateSipBody,
    "accept": _AcceptBody,
    "reject": _RejectBody,
    "refer": _ReferBody,
}


@functools.cache
def _adapters() -> dict[str, TypeAdapter[Any]]:
    """Built once, on first use: compiling the unions takes a noticeable fraction of a second."""
    return {
        "server": _tagged(ConnectServerEvent),
        "client": _tagged(ConnectClientEvent),
        "client_params": TypeAdapter(Annotated[ConnectClientEventParam, Field(discriminator="type")]),
        "nested": _tagged(ResponseStreamEvent),
    }


@functools.cache
def server_event_types() -> frozenset[str]:
    """Every server event type a Live sideband may carry."""
    return _tags(ConnectServerEvent)


@functools.cache
def client_event_types() -> frozenset[str]:
    """Every client event type a Live sideband accepts."""
    return _tags(ConnectClientEvent)


@functools.cache
def _nested_types() -> frozenset[str]:
    return _tags(ResponseStreamEvent)


def _unknown_fields(value: object, path: str = "$") -> Iterator[str]:
    if isinstance(value, BaseModel):
        yield from (f"{path}.{key}" for key in (value.model_extra or {}))
        for name in type(value).model_fields:
            yield from _unknown_fields(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, (list, tuple)):
        for index, member in enumerate(value):
            yield from _unknown_fields(member, f"{path}[{index}]")


def _problems(exc: ValidationError, *, tag: object, prefix: str = "") -> list[WireProblem]:
    problems = []
    for error in exc.errors():
        location = list(error["loc"])
        # A tagged union puts the tag first in every location; the field path is what helps.
        if location and location[0] == tag:
            location = location[1:]
        path = ".".join(str(part) for part in location) or "type"
        if error["type"] == "extra_forbidden":
            problems.append(WireProblem(path=f"$.{prefix}{path}", kind="unknown", message="unknown field"))
            continue
        problems.append(
            WireProblem(
                path=prefix + path,
                kind="missing" if error["type"] == "missing" else "invalid",
                message=error["msg"],
            )
        )
    return problems


# Latin, Greek and Cyrillic, where UTF-8 writes a letter in one or two bytes: ASCII, Latin-1,
# Latin Extended-A and -B, Greek and Coptic, Cyrillic and its supplement.
_ALPHABETIC_RUN = re.compile(r"[\u0000-\u024f\u0370-\u052f]+")
_SUPPLEMENTARY = re.compile(r"[\U00010000-\U0010ffff]")


def estimated_tokens(text: str) -> int:
    """The tokens in `text`, estimated on the high side, exactly as `pipeline.live` estimates them
    (the simulator may not import the pipeline; a test holds the two copies equal): a run of
    Latin, Greek and Cyrillic counts one token per four UTF-8 bytes, rounded up; a character
    beyond the Basic Multilingual Plane its four bytes; any other character one token."""
    tokens = 0
    in_runs = 0
    for run in _ALPHABETIC_RUN.finditer(text):
        tokens += -(-len(run.group().encode()) // 4)
        in_runs += run.end() - run.start()
    return tokens + (len(text) - in_runs) + 3 * len(_SUPPLEMENTARY.findall(text))


def oversized_append(event: dict[str, Any]) -> WireProblem | None:
    """The problem with an append whose content is over the provider's bound, or None."""
    content = event.get("content")
    if event.get("type") not in APPEND_TYPES or not isinstance(content, str):
        return None
    tokens = estimated_tokens(content)
    if tokens <= MAXIMUM_APPEND_TOKENS:
        return None
    message = f"content is limited to {MAXIMUM_APPEND_TOKENS} tokens; this is about {tokens}"
    return WireProblem(path="content", kind="invalid", message=message)


def live_wire_problems(event: dict[str, Any], *, direction: Direction) -> list[WireProblem]:
    """Every departure of a sideband event from the strict Live types; empty when it is valid."""
    adapters = _adapters()
    tag = event.get("type")
    try:
        parsed = adapters[direction].validate_python(event)
        if direction == "client":
            adapters["client_params"].validate_python(event)
    except ValidationError as exc:
        return _problems(exc, tag=tag)
    problems = [
        WireProblem(path=path, kind="unknown", message="unknown field") for path in _unknown_fields(parsed)
    ]
    oversized = oversized_append(event) if direction == "client" else None
    if oversized is not None:
        problems.append(oversized)
    nested = event.get("event") if tag == "response.event" else None
    if isinstance(nested, dict) and nested.get("type") in _nested_types():
        try:
            inner = adapters["nested"].validate_python(nested)
        except ValidationError as exc:
            return problems + _problems(exc, tag=nested.get("type"), prefix="event.")
        problems += [
            WireProblem(path=f"$.event{path[1:]}", kind="unknown", message="unknown field")
            for path in _unknown_fields(inner)
        ]
    return problems


def live_wire_errors(event: dict[str, Any], *, direction: Direction) -> list[str]:
    """Every departure of a sideband event from the strict Live types, as readable lines."""
    return [str(problem) for problem in live_wire_problems(event, direction=direction)]


def rest_body_problems(body: Any, *, kind: RestBody) -> list[WireProblem]:
    """Every departure of a Live REST request body from the SDK's parameters, unknown keys included."""
    try:
        _REST_BODIES[kind].model_validate({"body": body})
    except ValidationError as exc:
        return _problems(exc, tag="body")
    return []


def webhook_problems(event: dict[str, Any]) -> list[WireProblem]:
    """Every departure of a `live.transport.incoming` delivery from the SDK's webhook type."""
    try:
        parsed = LiveTransportIncomingWebhookEvent.model_validate(event, strict=True)
    except ValidationError as exc:
        return _problems(exc, tag=None)
    return [
        WireProblem(path=path, kind="unknown", message="unknown field") for path in _unknown_fields(parsed)
    ]
