"""Reads of the sessions' records: the list, one session's record and its call log, and the
desk's queue."""

from __future__ import annotations

from typing import Any

import dramatiq

from models import desk
from models.records import call_log, session_record
from models.records import sessions as listed_sessions
from models.releases import read_across
from pipeline.agents.versions import parsed_ref
from pipeline.api.pages import requested
from pipeline.platform.cost import cost_usd
from pipeline.platform.names import READS_QUEUE
from pipeline.session.state import Usage
from workers import runtime
from workers.actors.shared import REQUEST_POLICY, answer_read, deployment

_runtime = runtime.current()


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="list_sessions", **REQUEST_POLICY)
def list_sessions(
    request_id: str,
    gateway_id: str,
    status: str,
    route: str,
    end_reason: str,
    q: str = "",
    page: dict[str, Any] | None = None,
    agent: str = "",
) -> None:
    """The deployment's sessions, newest first, filtered and searched, a page at a time (each
    with what its usage cost); and the counts by status. `agent` ("name" or "name@n") keeps the
    calls an agent's versions (or one version) ran."""
    settings = _runtime.settings

    def read() -> tuple[int, dict[str, Any]]:
        listed = listed_sessions(
            settings.broker_namespace,
            requested("sessions", page),
            status=status,
            route=route,
            end_reason=end_reason,
            search=q,
            agent=parsed_ref(agent) if agent else None,
        )
        for session in listed["sessions"]:
            stored = session.pop("usage")
            usage = read_across(Usage, stored, "stored usage") if stored else Usage()
            session["cost_usd"] = cost_usd(
                usage, settings.price_of(session["provider"], session["model"] or "")
            )
        return 200, listed

    answer_read(request_id, gateway_id, read)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="call_queue", **REQUEST_POLICY)
def call_queue(request_id: str, gateway_id: str) -> None:
    """The desk's queue: callers waiting for a person (longest first), on hold, in trouble."""
    answer_read(request_id, gateway_id, lambda: (200, desk.queue(_runtime.settings.broker_namespace)))


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="session_call_log", **REQUEST_POLICY)
def session_call_log(request_id: str, gateway_id: str, session_id: str, after: int = 0) -> None:
    """A session's call log (the entries after `after`), projected from its durable log."""

    def read() -> tuple[int, dict[str, Any]]:
        entries = call_log(session_id, namespace=deployment())
        return 200, {
            "session_id": session_id,
            "entries": [entry.model_dump(mode="json") for entry in entries if entry.seq > after],
            "ended": any(entry.kind == "call.ended" for entry in entries),
        }

    answer_read(request_id, gateway_id, read)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="describe_session", **REQUEST_POLICY)
def describe_session(request_id: str, gateway_id: str, session_id: str, with_events: bool = False) -> None:
    """The session's durable record, with what its usage cost (from the deployment's prices)."""

    def read() -> tuple[int, dict[str, Any]]:
        record = session_record(session_id, namespace=deployment(), with_events=with_events)
        settings = _runtime.settings
        usage = read_across(Usage, record["usage"], "stored usage") if record["usage"] else Usage()
        price = settings.price_of(record["provider"], record["model"] or "")
        return 200, {**record, "cost_usd": cost_usd(usage, price)}

    answer_read(request_id, gateway_id, read)
