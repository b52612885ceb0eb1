"""Agents in PostgreSQL (models/agents.py): versions numbered under the agent's lock (two added
at once get two numbers), publish and rollback recorded, the version a new call runs resolved,
and what may not be deleted or named."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from models import agents
from models.db import SessionRow
from pipeline.api.pages import PageRequest
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


def _spec(text: str) -> dict[str, Any]:
    return {"instructions": text, "tools": []}


def _agent() -> tuple[str, str]:
    namespace = f"agents-{uuid.uuid4().hex[:8]}"
    agents.create_agent(namespace, "support")
    return namespace, "support"


def test_versions_are_numbered_in_order_and_never_twice(database: Any) -> None:
    namespace, name = _agent()
    with ThreadPoolExecutor(8) as pool:
        added = list(pool.map(lambda n: agents.add_version(namespace, name, _spec(f"v{n}"), "ada"), range(8)))
    assert sorted(version["version"] for version in added) == list(range(1, 9))
    assert all(version["status"] == "draft" for version in added)
    with pytest.raises(AgentExists):
        agents.create_agent(namespace, name)
    listed, following = agents.agents(namespace, PageRequest("agents", limit=10))
    assert [(each["name"], each["versions"]) for each in listed] == [("support", 8)] and following is None


def test_publish_rollback_and_what_a_new_call_runs(database: Any) -> None:
    namespace, name = _agent()
    with pytest.raises(AgentNotPublished):
        agents.resolved(namespace, name, None)
    agents.add_version(namespace, name, _spec("one"), "ada")
    agents.add_version(namespace, name, _spec("two"), "ada")
    assert agents.resolved(namespace, name, 2) == (2, _spec("two"))  # a pinned draft runs

    agents.publish(namespace, name, 1, "ada")
    assert agents.resolved(namespace, name, None) == (1, _spec("one"))
    shown = agents.publish(namespace, name, 2, "bo")
    assert shown["published_version"] == 2 and agents.resolved(namespace, name, None)[0] == 2
    assert [(each["version"], each["status"]) for each in shown["versions"]] == [
        (1, "superseded"),
        (2, "published"),
    ]
    assert [(each["version"], each["published_by"]) for each in shown["publications"]] == [
        (2, "bo"),
        (1, "ada"),
    ]

    rolled = agents.rollback(namespace, name, "cy")
    assert rolled["published_version"] == 1 and agents.resolved(namespace, name, None)[0] == 1
    assert [each["version"] for each in rolled["publications"]] == [1, 2, 1]
    assert agents.rollback(namespace, name, "cy")["published_version"] == 2  # and back


def test_what_cannot_be_found_or_done_is_refused_by_name(database: Any) -> None:
    namespace, name = _agent()
    with pytest.raises(AgentNotFound, match="'nobody'"):
        agents.resolved(namespace, "nobody", None)
    with pytest.raises(AgentNotFound):
        agents.resolved(f"other-{uuid.uuid4().hex[:8]}", name, None)  # another deployment's
    with pytest.raises(AgentVersionNotFound, match="no version 4"):
        agents.publish(namespace, name, 4, "ada")
    with pytest.raises(NothingToRollBack):
        agents.rollback(namespace, name, "ada")
    agents.add_version(namespace, name, _spec("one"), "ada")
    agents.publish(namespace, name, 1, "ada")
    with pytest.raises(NothingToRollBack):
        agents.rollback(namespace, name, "ada")
    with pytest.raises(AgentVersionPublished):
        agents.delete_version(namespace, name, 1)
    agents.archive(namespace, name)
    for refused in (
        lambda: agents.resolved(namespace, name, None),
        lambda: agents.add_version(namespace, name, _spec("two"), "ada"),
        lambda: agents.publish(namespace, name, 1, "ada"),
    ):
        with pytest.raises(AgentArchived):
            refused()
    assert agents.version(namespace, name, 1)["spec"] == _spec("one")  # still readable


def test_a_version_a_running_call_runs_cannot_be_deleted(database: Any) -> None:
    namespace, name = _agent()
    agents.add_version(namespace, name, _spec("one"), "ada")
    agents.add_version(namespace, name, _spec("two"), "ada")
    agents.publish(namespace, name, 2, "ada")
    session_id = f"sess_{uuid.uuid4().hex}"
    SessionRow.create(
        id=session_id,
        namespace=namespace,
        status="listening",
        owning_gateway="gw1",
        state={"agent": {"name": "support", "version": 1}},
    )
    assert agents.version(namespace, name, 1)["live_calls"] == 1
    with pytest.raises(AgentVersionInUse):
        agents.delete_version(namespace, name, 1)
    SessionRow.update(status="ended").where(SessionRow.id == session_id).execute()
    agents.delete_version(namespace, name, 1)
    with pytest.raises(AgentVersionNotFound):
        agents.version(namespace, name, 1)
    agents.add_version(namespace, name, _spec("three"), "ada")
    agents.delete_version(namespace, name, 3)
    # A number is never given twice: `support@3` never comes to mean another version.
    assert agents.add_version(namespace, name, _spec("four"), "ada")["version"] == 4
