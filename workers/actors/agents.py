"""Agents: create, list and read them, add versions, publish, roll back, delete a version no
call runs, archive (the API's `/v1/agents`; SQL in models/agents.py, rules in pipeline/agents)."""

from __future__ import annotations

from typing import Any

import dramatiq

from models import agents
from pipeline.agents.versions import changes, version_spec
from pipeline.api.pages import requested
from pipeline.api.requests import SessionSpec
from pipeline.platform.names import ADMISSION_QUEUE
from workers import runtime
from workers.actors.shared import answer_request, session_created

_runtime = runtime.current()


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="agents", max_retries=0, time_limit=30_000)
def agents_request(
    request_id: str,
    gateway_id: str,
    verb: str,
    name: str = "",
    version: int = 0,
    other: int = 0,
    spec: dict[str, Any] | None = None,
    by: str = "",
    page: dict[str, Any] | None = None,
) -> None:
    """One of the API's agent verbs, answered to the gateway that asked."""
    namespace = _runtime.settings.broker_namespace

    def act() -> tuple[int, dict[str, Any]]:
        if verb == "create":
            return 201, {"agent": agents.create_agent(namespace, name)}
        if verb == "list":
            listed, following = agents.agents(namespace, requested("agents", page))
            return 200, {"agents": listed, "next": following}
        if verb == "show":
            return 200, {"agent": agents.agent(namespace, name)}
        if verb == "add_version":
            checked = SessionSpec.model_validate(spec)
            stored = version_spec(checked)
            # Its tools, handler and model are checked now, as a session's are, not per call.
            session_created(checked)
            return 201, agents.add_version(namespace, name, stored, by)
        if verb == "version":
            return 200, agents.version(namespace, name, version)
        if verb == "publish":
            return 200, {"agent": agents.publish(namespace, name, version, by)}
        if verb == "rollback":
            return 200, {"agent": agents.rollback(namespace, name, by)}
        if verb == "delete_version":
            agents.delete_version(namespace, name, version)
            return 200, {"agent": name, "deleted": version}
        if verb == "archive":
            return 200, {"agent": agents.archive(namespace, name)}
        if verb == "diff":
            before = agents.version(namespace, name, version)
            after = agents.version(namespace, name, other)
            return 200, {
                "agent": name,
                "from": version,
                "to": other,
                "changes": changes(before["spec"], after["spec"]),
            }
        raise ValueError(f"no agent verb {verb!r}")

    answer_request(request_id, gateway_id, act)
