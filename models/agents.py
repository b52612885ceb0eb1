"""Agents in PostgreSQL: a deployment's agents, their immutable numbered versions (each a
session spec), the one published, and every publication (who, when; a rollback is one too).

A version's number is taken under the agent's row lock, so two versions added at once get two
numbers; a version is never changed once written (only deleted, when no call runs it)."""

from __future__ import annotations

import json
from typing import Any

import peewee

from models.db import database
from models.pages import keyset
from pipeline.agents.versions import status_of
from pipeline.api.pages import PageRequest, next_cursor
from pipeline.call.errors import (
    AgentArchived,
    AgentExists,
    AgentNotFound,
    AgentNotPublished,
    AgentVersionInUse,
    AgentVersionNotFound,
    AgentVersionPublished,
    NothingToRollBack,
)
from pipeline.platform.timestamps import rfc3339, rfc3339_or_none

_AGENT_COLUMNS = "name, created_at, archived_at, published_version"
# The phases of a session still running (a version it runs cannot be deleted).
_RUNNING = "status NOT IN ('ended', 'failed')"


def create_agent(namespace: str, name: str) -> dict[str, Any]:
    """A new agent, with no version yet (AgentExists when the deployment has one of that name)."""
    try:
        with database.atomic():
            row = database.execute_sql(
                f"INSERT INTO agents (namespace, name) VALUES (%s, %s) RETURNING {_AGENT_COLUMNS}",
                (namespace, name),
            ).fetchone()
    except peewee.IntegrityError as error:
        raise AgentExists(f"an agent named {name!r} exists") from error
    return _agent(row, versions=[])


def agents(namespace: str, page: PageRequest) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the deployment's agents in name order, each with its versions' count."""
    window = keyset(page, ("name",), created="created_at")
    rows = database.execute_sql(
        f"SELECT {_AGENT_COLUMNS}, (SELECT count(*) FROM agent_versions v"
        " WHERE v.namespace = a.namespace AND v.agent = a.name)"
        f" FROM agents a WHERE namespace = %(namespace)s {window.where} {window.order}",
        {"namespace": namespace, **window.parameters},
    ).fetchall()
    listed = [{**_agent(row[:4]), "versions": row[4]} for row in rows[: page.limit]]
    return listed, next_cursor(page, rows, lambda row: (row[0],))


def agent(namespace: str, name: str) -> dict[str, Any]:
    """An agent with its versions (number, status, when, by whom, the calls each served) and
    its publications, newest first."""
    row = _agent_row(namespace, name)
    history = database.execute_sql(
        "SELECT version, published_at, published_by FROM agent_publications"
        " WHERE namespace = %s AND agent = %s ORDER BY id DESC",
        (namespace, name),
    ).fetchall()
    published = {version for version, _at, _by in history}
    publications = [
        {"version": version, "published_at": rfc3339(at), "published_by": by} for version, at, by in history
    ]
    served = _calls_by_version(namespace, name)
    versions = [
        {
            "version": version,
            "status": status_of(version, row[3], published),
            "created_at": rfc3339(created),
            "created_by": by,
            "calls": served.get(version, (0, 0))[0],
            "live_calls": served.get(version, (0, 0))[1],
        }
        for version, created, by in database.execute_sql(
            "SELECT version, created_at, created_by FROM agent_versions"
            " WHERE namespace = %s AND agent = %s ORDER BY version",
            (namespace, name),
        ).fetchall()
    ]
    return {**_agent(row, versions=versions), "publications": publications}


def add_version(namespace: str, name: str, spec: dict[str, Any], by: str) -> dict[str, Any]:
    """A new draft version of the agent holding `spec` (checked already); its number is the
    next one, taken under the agent's row lock."""
    with database.atomic():
        row = _agent_row(namespace, name, lock=True)
        if row[2] is not None:
            raise AgentArchived(f"agent {name!r} is archived")
        # Never a number given before, even one whose version was deleted since.
        (number,) = database.execute_sql(
            "UPDATE agents SET versions_made = versions_made + 1 WHERE namespace = %s AND name = %s"
            " RETURNING versions_made",
            (namespace, name),
        ).fetchone()
        database.execute_sql(
            "INSERT INTO agent_versions (namespace, agent, version, spec, created_by)"
            " VALUES (%s, %s, %s, %s::jsonb, %s)",
            (namespace, name, number, json.dumps(spec), by),
        )
    return version(namespace, name, number)


def version(namespace: str, name: str, number: int) -> dict[str, Any]:
    """One version: its spec, its status, and the calls it served."""
    row = _agent_row(namespace, name)
    found = database.execute_sql(
        "SELECT spec, created_at, created_by FROM agent_versions"
        " WHERE namespace = %s AND agent = %s AND version = %s",
        (namespace, name, number),
    ).fetchone()
    if found is None:
        raise AgentVersionNotFound(f"agent {name!r} has no version {number}")
    ever = {
        each
        for (each,) in database.execute_sql(
            "SELECT DISTINCT version FROM agent_publications WHERE namespace = %s AND agent = %s",
            (namespace, name),
        ).fetchall()
    }
    calls, live = _calls_by_version(namespace, name).get(number, (0, 0))
    return {
        "agent": name,
        "version": number,
        "status": status_of(number, row[3], ever),
        "spec": found[0],
        "created_at": rfc3339(found[1]),
        "created_by": found[2],
        "calls": calls,
        "live_calls": live,
    }


def publish(namespace: str, name: str, number: int, by: str) -> dict[str, Any]:
    """Make `number` the version `"agent": name` means from the next call on (calls running
    keep theirs); recorded as a publication."""
    with database.atomic():
        row = _agent_row(namespace, name, lock=True)
        if row[2] is not None:
            raise AgentArchived(f"agent {name!r} is archived")
        _published(namespace, name, number, by)
    return agent(namespace, name)


def rollback(namespace: str, name: str, by: str) -> dict[str, Any]:
    """Publish again the version published before the one published now (NothingToRollBack
    when there was none, or it was deleted)."""
    with database.atomic():
        row = _agent_row(namespace, name, lock=True)
        if row[2] is not None:
            raise AgentArchived(f"agent {name!r} is archived")
        history = [
            each
            for (each,) in database.execute_sql(
                "SELECT version FROM agent_publications WHERE namespace = %s AND agent = %s ORDER BY id DESC",
                (namespace, name),
            ).fetchall()
        ]
        earlier = next((each for each in history if each != row[3]), None)
        if earlier is None:
            raise NothingToRollBack(f"agent {name!r} had no version published before {row[3]}")
        _published(namespace, name, earlier, by)
    return agent(namespace, name)


def delete_version(namespace: str, name: str, number: int) -> None:
    """Remove a version no call runs and that is not the published one."""
    with database.atomic():
        row = _agent_row(namespace, name, lock=True)
        if row[3] == number:
            raise AgentVersionPublished(f"version {number} of {name!r} is published; publish another first")
        _, live = _calls_by_version(namespace, name).get(number, (0, 0))
        if live:
            raise AgentVersionInUse(f"version {number} of {name!r} runs {live} call(s) in progress")
        deleted = database.execute_sql(
            "DELETE FROM agent_versions WHERE namespace = %s AND agent = %s AND version = %s"
            " RETURNING version",
            (namespace, name, number),
        ).fetchone()
        if deleted is None:
            raise AgentVersionNotFound(f"agent {name!r} has no version {number}")


def archive(namespace: str, name: str) -> dict[str, Any]:
    """No new call may name the agent; its versions and the calls they served stay readable."""
    with database.atomic():
        _agent_row(namespace, name, lock=True)
        database.execute_sql(
            "UPDATE agents SET archived_at = coalesce(archived_at, now()) WHERE namespace = %s AND name = %s",
            (namespace, name),
        )
    return agent(namespace, name)


def resolved(namespace: str, name: str, number: int | None) -> tuple[int, dict[str, Any]]:
    """The version a new call of the agent runs — `number`, or the published one — and its
    spec (AgentNotFound, AgentVersionNotFound, AgentArchived, AgentNotPublished)."""
    row = _agent_row(namespace, name)
    if row[2] is not None:
        raise AgentArchived(f"agent {name!r} is archived: no new call may name it")
    if number is None:
        if row[3] is None:
            raise AgentNotPublished(
                f"agent {name!r} has no published version: publish one, or name one (name@n)"
            )
        number = int(row[3])
    found = database.execute_sql(
        "SELECT spec FROM agent_versions WHERE namespace = %s AND agent = %s AND version = %s",
        (namespace, name, number),
    ).fetchone()
    if found is None:
        raise AgentVersionNotFound(f"agent {name!r} has no version {number}")
    return number, found[0]


def _published(namespace: str, name: str, number: int, by: str) -> None:
    exists = database.execute_sql(
        "SELECT 1 FROM agent_versions WHERE namespace = %s AND agent = %s AND version = %s",
        (namespace, name, number),
    ).fetchone()
    if exists is None:
        raise AgentVersionNotFound(f"agent {name!r} has no version {number}")
    database.execute_sql(
        "UPDATE agents SET published_version = %s WHERE namespace = %s AND name = %s",
        (number, namespace, name),
    )
    database.execute_sql(
        "INSERT INTO agent_publications (namespace, agent, version, published_by) VALUES (%s, %s, %s, %s)",
        (namespace, name, number, by),
    )


def _agent_row(namespace: str, name: str, *, lock: bool = False) -> tuple[Any, ...]:
    row = database.execute_sql(
        f"SELECT {_AGENT_COLUMNS} FROM agents WHERE namespace = %s AND name = %s"
        + (" FOR UPDATE" if lock else ""),
        (namespace, name),
    ).fetchone()
    if row is None:
        raise AgentNotFound(f"no agent {name!r}")
    return tuple(row)


def _calls_by_version(namespace: str, name: str) -> dict[int, tuple[int, int]]:
    """The calls each version of the agent served, and how many of them still run."""
    rows = database.execute_sql(
        "SELECT (state->'agent'->>'version')::int, count(*), count(*) FILTER (WHERE " + _RUNNING + ")"
        " FROM sessions WHERE namespace = %s AND state->'agent'->>'name' = %s GROUP BY 1",
        (namespace, name),
    ).fetchall()
    return {version: (calls, live) for version, calls, live in rows}


def _agent(row: tuple[Any, ...], versions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "name": row[0],
        "created_at": rfc3339(row[1]),
        "archived_at": rfc3339_or_none(row[2]),
        "published_version": row[3],
    }
    if versions is not None:
        shown["versions"] = versions
    return shown
