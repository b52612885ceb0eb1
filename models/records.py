"""Reading a session's durable record: what happened, in the words of the log."""

from __future__ import annotations

from typing import Any

from models import compactions
from models.db import (
    IncidentRow,
    SessionEventRow,
    SessionRow,
    TranscriptItemRow,
    database,
    is_connection_lost,
    reopen,
)
from models.erasure import erasures
from pipeline.call_log import CallLogEntry, LoggedInput, ended_by, erased_log, heard_latency, project
from pipeline.dialects import capabilities_for
from pipeline.errors import SessionNotFound
from pipeline.privacy.policy import PrivacyPolicy
from pipeline.state import Phase

# A transaction publishes its controls, directives and replies under the row lock just before
# its COMMIT, so whoever acts on one may read the session before that commit lands. A read
# first takes the row FOR SHARE in a statement of its own: it waits for a transaction holding
# the row's lock and lets go at once, so the read sees every transaction that published before
# it (the live stream read a call log without the `call.ended` whose directive it was carrying
# out), and holds up nothing while it reads.
_SETTLED = "SELECT 1 FROM sessions WHERE id = %s FOR SHARE"


def _settled(session_id: str) -> None:
    """Wait for a transaction that holds the session's row; SessionNotFound if there is none."""
    if database.execute_sql(_SETTLED, (session_id,)).fetchone() is None:
        raise SessionNotFound(f"no session {session_id!r}")


def session_record(session_id: str, *, with_events: bool = False) -> dict[str, Any]:
    """The session as stored: status, end reason, usage, transcripts, incidents, the log's
    dispositions (and the log itself when asked). Read-only, so a connection PostgreSQL
    dropped is reopened and the read done once more."""
    try:
        return _session_record(session_id, with_events=with_events)
    except Exception as error:
        if not is_connection_lost(error):
            raise
        reopen()
        return _session_record(session_id, with_events=with_events)


def _session_record(session_id: str, *, with_events: bool) -> dict[str, Any]:
    _settled(session_id)
    row = SessionRow.get_or_none(SessionRow.id == session_id)
    if row is None:
        raise SessionNotFound(f"no session {session_id!r}")
    transcripts = [
        {
            "role": item.role,
            "text": item.text,
            "item_id": item.provider_item_id,
            "response_id": item.response_id,
            "seq": item.seq,
            "late": item.late,
        }
        for item in TranscriptItemRow.select()
        .where(TranscriptItemRow.session == session_id)
        .order_by(TranscriptItemRow.id)
    ]
    incidents = [
        {
            "code": incident.code,
            "severity": incident.severity,
            "summary": incident.summary,
            "context": incident.context,
            "at": incident.created_at.isoformat(),
        }
        for incident in IncidentRow.select().where(IncidentRow.session == session_id).order_by(IncidentRow.id)
    ]
    record: dict[str, Any] = {
        "id": row.id,
        "status": row.status,
        "end_reason": row.end_reason,
        "ended_by": ended_by(Phase(row.status), row.end_reason),
        "generation": row.generation,
        "provider_call_id": row.provider_call_id,
        "owning_gateway": row.owning_gateway,
        "instructions": row.instructions,
        "usage": row.usage,
        "line": _line(row.state or {}),
        "provider": (row.state or {}).get("provider", "realtime"),
        "privacy": _privacy(row.state or {}),
        "storage": (row.state or {}).get("storage", "full"),
        "compaction": _compaction(row.state or {}),
        "outbound": _outbound(row.state or {}),
        "applied_seq": row.applied_seq,
        "logged_seq": row.logged_seq,
        "created_at": row.created_at.isoformat(),
        "ended_at": row.ended_at.isoformat() if row.ended_at else None,
        # Set once the session's content was erased ("request" or "retention"); the audit rows
        # say who asked and what was removed each time.
        "erased_at": row.erased_at.isoformat() if row.erased_at else None,
        "erased_because": row.erased_because,
        "erasures": erasures(session_id),
        "why": _why(row.status, row.end_reason, incidents),
        "transcript": transcripts,
        "incidents": incidents,
        "tool_steps": _tool_steps(session_id),
        "compactions": compactions.for_session(session_id),
        "events": _disposition_counts(session_id),
        # What callers waited for the agent's answers (the call log's `turn.agent.heard_ms`): its
        # projection is folded once more per read, which a read on the reads queue affords.
        "heard_latency": heard_latency(call_log(session_id)),
    }
    if with_events:
        record["log"] = event_log(session_id)
    return record


def _outbound(state: dict[str, Any]) -> dict[str, Any] | None:
    """A call Switchboard placed: its id, whom it dialled, how far it got, who answered and what
    it came to (None: the call came in). What the callee said while that was decided is not here."""
    call = state.get("outbound")
    if not isinstance(call, dict):
        return None
    kept = ("id", "to", "trunk", "campaign_id", "attempt", "progress", "answered_by", "outcome", "failure")
    return {key: call.get(key) for key in kept}


def _privacy(state: dict[str, Any]) -> dict[str, Any]:
    """The session's privacy policy as it is applied: every kind its boundary redacts (the ones
    always redacted included), its consent notice, and its own retention (None: the
    deployment's)."""
    policy = PrivacyPolicy.model_validate(state.get("privacy") or {})
    consent = policy.consent.model_dump() if policy.consent is not None else None
    return {"redact": sorted(policy.kinds), "consent": consent, "retention_days": policy.retention_days}


def _line(state: dict[str, Any]) -> dict[str, Any]:
    """Who has the call's line: held or not, the person who holds it, a caller waiting, and a
    keypad collection under way (its tool and phase; what is typed is never here)."""
    collecting = state.get("collecting")
    return {
        "held": bool(state.get("held")),
        "taken_by": state.get("taken_by"),
        "attention": state.get("attention"),
        "collecting": (
            {key: collecting.get(key) for key in ("number", "tool", "phase", "by")}
            if isinstance(collecting, dict)
            else None
        ),
    }


def _compaction(state: dict[str, Any]) -> dict[str, Any]:
    """Who compacts the call's context: Switchboard (Realtime), or the provider itself (Live,
    whose share of its context window in use is kept as it reports it)."""
    if capabilities_for(state.get("provider") or "realtime").compaction:
        return {"by": "switchboard"}
    return {"by": "provider", "context_ratio": (state.get("live") or {}).get("context_ratio", 0.0)}


def _why(status: str, end_reason: str | None, incidents: list[dict[str, Any]]) -> dict[str, Any] | None:
    """For a failed session, the answer to "why did it fail?": the failure's code, its
    incident's summary and context, and the warnings that came before it."""
    if status != Phase.FAILED:
        return None
    failure = next(
        (i for i in reversed(incidents) if i["code"] == end_reason and i["severity"] == "error"), None
    )
    return {
        "code": end_reason,
        "summary": failure["summary"] if failure else None,
        "context": failure["context"] if failure else None,
        "at": failure["at"] if failure else None,
        "warnings_before": [i["code"] for i in incidents if i["severity"] == "warning"],
    }


CALL_LOG_INPUTS = """
SELECT received_at, disposition, generation, payload FROM session_events
 WHERE session_id = %s AND disposition IN ('applied', 'late') ORDER BY applied_order
"""


# An erased session's log holds no payloads to project: its call log is how it ended.
ERASED_CALL = """
SELECT status, end_reason, created_at, coalesce(ended_at, erased_at), erased_because FROM sessions
 WHERE id = %s AND erased_at IS NOT NULL
"""


def call_log(session_id: str, after: int = 0) -> list[CallLogEntry]:
    """The session's call log (entries numbered above `after`), projected from its durable log
    in applied order: the same after any crash."""
    _settled(session_id)
    erased = database.execute_sql(ERASED_CALL, (session_id,)).fetchone()
    if erased is not None:
        status, end_reason, created, ended, because = erased
        story = erased_log(Phase(status), end_reason, created.timestamp(), ended.timestamp(), because)
        return [entry for entry in story if entry.seq > after]
    rows = database.execute_sql(CALL_LOG_INPUTS, (session_id,)).fetchall()
    logged = (
        LoggedInput(
            received_at=float(received_at), disposition=disposition, generation=generation, payload=payload
        )
        for received_at, disposition, generation, payload in rows
    )
    return project(logged, after)


def event_log(session_id: str) -> list[dict[str, Any]]:
    """Every logged input of the session in the order it was logged."""
    return [
        {
            "seq": event.seq,
            "kind": event.kind,
            "disposition": event.disposition,
            "applied_order": event.applied_order,
            "generation": event.generation,
            "received_at": event.received_at,
            "taken_at": event.taken_at,
            "applied_at": event.applied_at,
            "payload": event.payload,
            "controls": event.controls,
        }
        for event in SessionEventRow.select()
        .where(SessionEventRow.session == session_id)
        .order_by(SessionEventRow.id)
    ]


def _tool_steps(session_id: str) -> list[dict[str, Any]]:
    cursor = database.execute_sql(
        "SELECT provider_call_id, tool_name, tool_version, status, error, elapsed_ms, sequence"
        " FROM tool_steps WHERE session_id = %s ORDER BY sequence",
        (session_id,),
    )
    return [
        {
            "call_id": call_id,
            "tool": name,
            "version": version,
            "status": status,
            "error": error,
            "elapsed_ms": elapsed_ms,
            "sequence": sequence,
        }
        for call_id, name, version, status, error, elapsed_ms, sequence in cursor.fetchall()
    ]


def _disposition_counts(session_id: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in SessionEventRow.select(SessionEventRow.disposition).where(
        SessionEventRow.session == session_id
    ):
        counts[event.disposition] = counts.get(event.disposition, 0) + 1
    return counts


LIST_SESSIONS = """
SELECT s.id, s.status, s.end_reason, s.created_at, s.ended_at, s.provider_call_id,
       p.route_id, p.caller, p.number, s.usage, s.erased_at
  FROM sessions s LEFT JOIN phone_calls p ON p.session_id = s.id
 WHERE s.namespace = %s
   AND (%s = '' OR s.status = %s)
   AND (%s = '' OR p.route_id = %s)
   AND (%s = '' OR s.end_reason = %s)
 ORDER BY s.created_at DESC
 LIMIT %s
"""

COUNT_SESSIONS = "SELECT status, count(*) FROM sessions WHERE namespace = %s GROUP BY status"


def sessions(
    namespace: str, *, status: str = "", route: str = "", end_reason: str = "", limit: int = 100
) -> dict[str, Any]:
    """The deployment's sessions, newest first (filtered by status, route and end reason), and
    how many there are in each status."""
    rows = database.execute_sql(
        LIST_SESSIONS, (namespace, status, status, route, route, end_reason, end_reason, limit)
    ).fetchall()
    listed = [
        {
            "id": session_id,
            "status": found_status,
            "end_reason": reason,
            "ended_by": ended_by(Phase(found_status), reason),
            "created_at": created.isoformat(),
            "ended_at": ended.isoformat() if ended else None,
            "call_id": call_id,
            "route_id": route_id,
            "caller": caller,
            "dialled": number,
            "total_tokens": (usage or {}).get("total_tokens", 0),
            "erased_at": erased.isoformat() if erased else None,
        }
        for (
            session_id,
            found_status,
            reason,
            created,
            ended,
            call_id,
            route_id,
            caller,
            number,
            usage,
            erased,
        ) in rows
    ]
    counts = {
        str(found): int(n) for found, n in database.execute_sql(COUNT_SESSIONS, (namespace,)).fetchall()
    }
    return {"sessions": listed, "counts": counts}
