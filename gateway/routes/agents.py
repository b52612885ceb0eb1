"""Agents: a name with immutable numbered versions (each a session spec), the one published,
rollback, what changed between two versions (pipeline/agents; docs/agents.md). Any reading key
reads them; an administrator's changes them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from gateway.routes import requests
from gateway.routes.answers import Answer, created, page_of, relayed, segment
from gateway.routes.requests import Refused, identity_of, page_asked
from gateway.routes.table import Operation, Query, paging
from gateway.web import error_response
from pipeline.api.requests import AGENT_NAME, SessionSpec

if TYPE_CHECKING:
    from gateway.ports import Workers

A = "/v1/agents/{name}"
V = f"{A}/versions/{{version}}"
_NAME = re.compile(AGENT_NAME)
_VERSION = re.compile(r"[1-9][0-9]{0,8}")

AgentPage = page_of("agents", "A page of agents, in name order.")


class NewAgent(BaseModel):
    """`POST /v1/agents`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=f"^{AGENT_NAME}$")


class AgentAnswer(Answer):
    """An agent: its versions (number, status, the calls each served) and its publications."""

    agent: dict[str, Any]


class VersionAnswer(Answer):
    """One version of an agent: its spec, its status, the calls it served."""

    agent: str
    version: int
    status: Literal["draft", "published", "superseded"]
    spec: dict[str, Any]


class VersionDeleted(Answer):
    agent: str
    deleted: int


class Changes(Answer):
    """What changed from one version to another, field by field."""

    agent: str
    changes: list[dict[str, Any]]


def _name(request: Request) -> str:
    name = request.path_params["name"]
    if not _NAME.fullmatch(name):
        raise Refused(error_response(404, "agent_not_found", f"no agent {name[:80]!r}"))
    return str(name)


def _number(raw: str, name: str) -> int:
    if not _VERSION.fullmatch(raw):
        raise Refused(
            error_response(404, "agent_version_not_found", f"agent {name!r} has no version {raw[:20]!r}")
        )
    return int(raw)


def _by(request: Request) -> str:
    identity = identity_of(request)
    return identity.name if identity is not None else ""


async def create_agent(api: Workers, request: Request) -> Response:
    asked = await requests.body(request, NewAgent)
    status, body = await api.rpc.call("agents", verb="create", name=asked.name)
    return created(body, status, f"/v1/agents/{segment(asked.name)}")


async def list_agents(api: Workers, request: Request) -> Response:
    status, body = await api.rpc.call("agents", verb="list", page=page_asked(request, "agents"))
    return relayed(status, body)


async def show_agent(api: Workers, request: Request) -> Response:
    status, body = await api.rpc.call("agents", verb="show", name=_name(request))
    return relayed(status, body)


async def add_version(api: Workers, request: Request) -> Response:
    name = _name(request)
    spec = await requests.body(request, SessionSpec)
    status, body = await api.rpc.call(
        "agents",
        verb="add_version",
        name=name,
        spec=spec.model_dump(mode="json", exclude_unset=True),
        by=_by(request),
    )
    location = f"/v1/agents/{segment(name)}/versions/{body.get('version')}" if status == 201 else None
    return created(body, status, location)


async def show_version(api: Workers, request: Request) -> Response:
    name = _name(request)
    number = _number(request.path_params["version"], name)
    status, body = await api.rpc.call("agents", verb="version", name=name, version=number)
    return relayed(status, body)


async def publish(api: Workers, request: Request) -> Response:
    name = _name(request)
    number = _number(request.path_params["version"], name)
    requests.refuse_any_body(await request.body(), "publish takes no body")
    status, body = await api.rpc.call("agents", verb="publish", name=name, version=number, by=_by(request))
    return relayed(status, body)


async def rollback(api: Workers, request: Request) -> Response:
    name = _name(request)
    requests.refuse_any_body(await request.body(), "rollback takes no body")
    status, body = await api.rpc.call("agents", verb="rollback", name=name, by=_by(request))
    return relayed(status, body)


async def delete_version(api: Workers, request: Request) -> Response:
    name = _name(request)
    number = _number(request.path_params["version"], name)
    status, body = await api.rpc.call("agents", verb="delete_version", name=name, version=number)
    return relayed(status, body)


async def archive(api: Workers, request: Request) -> Response:
    name = _name(request)
    requests.refuse_any_body(await request.body(), "archive takes no body")
    status, body = await api.rpc.call("agents", verb="archive", name=name)
    return relayed(status, body)


async def diff(api: Workers, request: Request) -> Response:
    name = _name(request)
    query = request.query_params
    before = _number(query.get("from", ""), name)
    after = _number(query.get("to", ""), name)
    status, body = await api.rpc.call("agents", verb="diff", name=name, version=before, other=after)
    return relayed(status, body)


_NO_AGENT: dict[int, tuple[str, ...]] = {404: ("agent_not_found",)}
_NO_VERSION: dict[int, tuple[str, ...]] = {404: ("agent_not_found", "agent_version_not_found")}

ROUTES = (
    Operation(
        "POST",
        "/v1/agents",
        "Create an agent (no version yet)",
        "agents",
        {201: "the agent"},
        create_agent,
        body=NewAgent,
        errors={409: ("agent_exists",), 422: ("malformed_request",)},
        location=A,
        answer=AgentAnswer,
    ),
    Operation(
        "GET",
        "/v1/agents",
        "Agents in name order",
        "agents",
        {200: "a page of agents"},
        list_agents,
        query=paging("the name"),
        answer=AgentPage,
    ),
    Operation(
        "GET",
        A,
        "An agent: its versions and publications",
        "agents",
        {200: "the agent"},
        show_agent,
        errors=_NO_AGENT,
        answer=AgentAnswer,
    ),
    Operation(
        "POST",
        f"{A}/versions",
        "Add a draft version (a session spec; immutable once added)",
        "agents",
        {201: "the version, a draft"},
        add_version,
        body=SessionSpec,
        errors={
            **_NO_AGENT,
            409: ("agent_archived",),
            422: ("malformed_request", "unknown_tool", "unknown_delegation_handler", "model_retired"),
        },
        location=V,
        answer=VersionAnswer,
    ),
    Operation(
        "GET",
        V,
        "One version of an agent",
        "agents",
        {200: "the version"},
        show_version,
        errors=_NO_VERSION,
        answer=VersionAnswer,
    ),
    Operation(
        "DELETE",
        V,
        "Delete a version no call runs (not the published one)",
        "agents",
        {200: "deleted"},
        delete_version,
        errors={**_NO_VERSION, 409: ("version_in_use", "version_published")},
        answer=VersionDeleted,
    ),
    Operation(
        "POST",
        f"{V}/publish",
        "Publish a version: the next calls naming the agent run it",
        "agents",
        {200: "the agent"},
        publish,
        empty_body=True,
        errors={**_NO_VERSION, 409: ("agent_archived",), 422: ("malformed_request",)},
        answer=AgentAnswer,
    ),
    Operation(
        "POST",
        f"{A}/rollback",
        "Publish again the version published before this one",
        "agents",
        {200: "the agent"},
        rollback,
        empty_body=True,
        errors={**_NO_AGENT, 409: ("agent_archived", "nothing_to_roll_back"), 422: ("malformed_request",)},
        answer=AgentAnswer,
    ),
    Operation(
        "POST",
        f"{A}/archive",
        "Archive an agent: no new call may name it",
        "agents",
        {200: "the agent"},
        archive,
        empty_body=True,
        errors={**_NO_AGENT, 422: ("malformed_request",)},
        answer=AgentAnswer,
    ),
    Operation(
        "GET",
        f"{A}/diff",
        "What changed from one version to another",
        "agents",
        {200: "the changes"},
        diff,
        errors=_NO_VERSION,
        query=(
            Query("from", "a version's number", {"type": "integer", "minimum": 1}),
            Query("to", "another version's number", {"type": "integer", "minimum": 1}),
        ),
        answer=Changes,
    ),
)
