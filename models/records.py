"""Reading a session's durable record: what happened, in the words of the log."""

from __future__ import annotations

from typing import Any

from models import compactions
from models.db import (
    IncidentRow,
    SessionEventRow,
    SessionRow,
    database,
    is_connection_lost,
    reopen,
)
from models.erasure import erasures
from models.event_streams import cursor_of
from models.pages import keyset
from pipeline.api.event_streams import shown
from pipeline.api.pages import PageRequest, next_cursor
from pipeline.call.capabilities import not_supported
from pipeline.call.conversation_order import PLACE_FIELD, PlacedLine, in_conversation_order, place_of
from pipeline.call.errors import SessionNotFound
from pipeline.dialects import capabilities_for
from pipeline.platform.timestamps import rfc3339, rfc3339_or_none
from pipeline.privacy.policy import PrivacyPolicy
from pipeline.records.call_log import CallLogEntry, LoggedInput, ended_by, erased_log, heard_latency, project
from pipeline.records.desk import activity, direction, outcome
from pipeline.session.state import IN_CALL, Phase

# A transaction publishes its controls, directives and replies under the row lock just before
# its COMMIT, so whoever acts on one may read the session before that commit lands. A read
# first takes the row FOR SHARE in a statement of its own: it waits for a transaction holding
# the row's lock and lets go at once, so the read sees every transaction that published before
# it (the live stream read a call log without the `call.ended` whose directive it was carrying
# out), and holds up nothing while it reads.
#
# Deployments may share a database: a read made for one (`namespace`) finds only its sessions,
# and another's id is as unknown as one never made. Only a tool reading the whole database
# (the tests' own checks) leaves the namespace out.
_SETTLED = "SELECT 1 FROM sessions WHERE id = %s AND namespace = coalesce(%s, namespace) FOR SHARE"


def _settled(session_id: str, namespace: str | None) -> None:
    """Wait for a transaction that holds the session's row; SessionNotFound if there is none
    (in the deployment `namespace`, when one is named)."""
    if database.execute_sql(_SETTLED, (session_id, namespace)).fetchone() is None:
        raise SessionNotFound(f"no session {session_id!r}")


def session_record(
    session_id: str, *, namespace: str | None = None, with_events: bool = False
) -> dict[str, Any]:
    """The session as stored: status, end reason, usage, transcripts, incidents, the log's
    dispositions (and the log itself when asked). Read-only, so a connection PostgreSQL
    dropped is reopened and the read done once more."""
    try:
        return _session_record(session_id, namespace, with_events=with_events)
    except Exception as error:
        if not is_connection_lost(error):
            raise
        reopen()
        return _session_record(session_id, namespace, with_events=with_events)


def _session_record(session_id: str, namespace: str | None, *, with_events: bool) -> dict[str, Any]:
    _settled(session_id, namespace)
    row = SessionRow.get_or_none(SessionRow.id == session_id)
    if row is None:
        raise SessionNotFound(f"no session {session_id!r}")
    transcripts = transcript(session_id)
    incidents = [
        {
            "code": incident.code,
            "severity": incident.severity,
            "summary": incident.summary,
            "context": incident.context,
            "at": rfc3339(incident.created_at),
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
        # The model that served the call and its voice (the record says null for a session
        # stored before models were chosen per session, which had the deployment's default).
        **_model(row.state or {}),
        # The agent and version the call ran (null: its spec was given inline).
        "agent": (row.state or {}).get("agent"),
        # What the provider cannot do, each with the code and message it is refused with.
        "not_supported": not_supported(capabilities_for((row.state or {}).get("provider") or "realtime")),
        "privacy": _privacy(row.state or {}),
        "storage": (row.state or {}).get("storage", "full"),
        "compaction": _compaction(row.state or {}),
        "outbound": _outbound(row.state or {}, row.namespace),
        # Where the call's events are streamed (the URL's password masked), and how far it got.
        "event_stream": _event_stream(session_id, row.state or {}),
        "applied_seq": row.applied_seq,
        "logged_seq": row.logged_seq,
        "created_at": rfc3339(row.created_at),
        "ended_at": rfc3339_or_none(row.ended_at),
        # Set once the session's content was erased ("request" or "retention"); the audit rows
        # say who asked and what was removed each time.
        "erased_at": rfc3339_or_none(row.erased_at),
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
        "heard_latency": heard_latency(call_log(session_id, namespace=namespace)),
    }
    if with_events:
        # The log as it may be shown: a creation's events URL masked (folds read `event_log`).
        logged = event_log(session_id)
        record["log"] = [_shown_event(event) for event in logged]
    return record


# A session's lines as they arrived, each with the place the gateway noted on the event that
# brought it (a Realtime final's `place`; inside an event that arrived late, that event's): the
# order is put together as the record is read (pipeline.call.conversation_order), so keeping it costs
# the hot path nothing.
_LINES = """
SELECT t.role, t.text, t.provider_item_id, t.response_id, t.seq, t.late,
       coalesce(e.payload -> 'place', e.payload -> 'event' -> 'place')
  FROM transcript_items t
  LEFT JOIN session_events e ON e.session_id = t.session_id AND e.seq = t.seq
 WHERE t.session_id = %s
 ORDER BY t.id
"""


def transcript(session_id: str) -> list[dict[str, Any]]:
    """A session's lines in the conversation's order, whatever order their finals came in."""
    rows = database.execute_sql(_LINES, (session_id,)).fetchall()
    lines = [
        {"role": role, "text": text, "item_id": item_id, "response_id": response_id, "seq": seq, "late": late}
        for role, text, item_id, response_id, seq, late, _place in rows
    ]
    placed = [PlacedLine(item_id=row[2], place=place_of({PLACE_FIELD: row[6]})) for row in rows]
    return [lines[index] for index in in_conversation_order(placed)]


def _event_stream(session_id: str, state: dict[str, Any]) -> dict[str, Any] | None:
    where = shown(state.get("event_stream"))
    if where is None:
        return None
    cursor = cursor_of(session_id)
    return {
        **where,
        "published_seq": cursor.published_seq if cursor else 0,
        "report_published": cursor.report_published if cursor else False,
    }


def _outbound(state: dict[str, Any], namespace: str) -> dict[str, Any] | None:
    """A call Switchboard placed: its id, whom it dialled, its campaign's id and name, how far it
    got, who answered and what it came to (None: the call came in). What the callee said while
    that was decided is not here."""
    call = state.get("outbound")
    if not isinstance(call, dict):
        return None
    kept = ("id", "to", "trunk", "campaign_id", "attempt", "progress", "answered_by", "outcome", "failure")
    shown = {key: call.get(key) for key in kept}
    shown["campaign_name"] = _campaign_name(call.get("campaign_id"), namespace)
    return shown


def _campaign_name(campaign_id: object, namespace: str) -> str | None:
    if not isinstance(campaign_id, str):
        return None
    row = database.execute_sql(
        "SELECT name FROM campaigns WHERE id = %s AND namespace = %s", (campaign_id, namespace)
    ).fetchone()
    return str(row[0]) if row is not None else None


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
        # When it starts: once a response's input reaches this many tokens.
        return {
            "by": "switchboard",
            "threshold_tokens": (state.get("limits") or {}).get("compaction_input_tokens"),
        }
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


def call_log(session_id: str, after: int = 0, *, namespace: str | None = None) -> list[CallLogEntry]:
    """The session's call log (entries numbered above `after`), projected from its durable log
    in applied order: the same after any crash."""
    _settled(session_id, namespace)
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


# The moments of the event log's rows, kept as epoch seconds (folds and the desk's queries
# compute with them) and shown as RFC 3339.
_LOGGED_MOMENTS = ("received_at", "taken_at", "applied_at")


def _shown_event(event: dict[str, Any]) -> dict[str, Any]:
    """A row of the event log as the record shows it: its moments in RFC 3339, its payload as
    `_shown_payload` shows it, and no `seq` for an input a worker applied itself (a timer, an
    admission, a takeover): only what a gateway numbers has one, so its place is `applied_order`."""
    shown_event = {
        **event,
        **{moment: rfc3339_or_none(event[moment]) for moment in _LOGGED_MOMENTS},
        "payload": _shown_payload(event["payload"]),
    }
    if shown_event["seq"] is None:
        del shown_event["seq"]
    return shown_event


def _shown_payload(payload: Any) -> Any:
    """A logged input as the record shows it: a session's creation with its events URL masked,
    and the moments the gateway stamped on an answer (`heard`, epoch seconds in the log) in
    RFC 3339. The rest is the provider's frame or the host's input as it was logged."""
    if not isinstance(payload, dict):
        return payload
    if isinstance(payload.get("event_stream"), dict):
        payload = {**payload, "event_stream": shown(payload["event_stream"])}
    heard = payload.get("heard")
    if isinstance(heard, dict):
        moments = {key: rfc3339(value) for key, value in heard.items() if isinstance(value, int | float)}
        payload = {**payload, "heard": {**heard, **moments}}
    return payload


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
       p.route_id, p.caller, p.number, s.usage, s.erased_at, s.state, c.name
  FROM sessions s LEFT JOIN phone_calls p ON p.session_id = s.id
  LEFT JOIN campaigns c ON c.id = s.state -> 'outbound' ->> 'campaign_id' AND c.namespace = s.namespace
 WHERE s.namespace = %(namespace)s
   AND (%(status)s = '' OR s.status = %(status)s
        OR (%(status)s = 'live' AND s.status = ANY(%(in_call)s))
        OR (%(status)s = 'not_connected' AND s.provider_call_id IS NULL AND NOT s.status = ANY(%(in_call)s)))
   AND (%(route)s = '' OR p.route_id = %(route)s)
   AND (%(agent)s = '' OR (s.state -> 'agent' ->> 'name' = %(agent)s
        AND (%(agent_version)s = 0 OR (s.state -> 'agent' ->> 'version')::int = %(agent_version)s)))
   AND (%(end_reason)s = '' OR s.end_reason = %(end_reason)s)
   AND (%(words)s = ''
        OR s.id ILIKE %(words)s ESCAPE '\\'
        OR p.caller ILIKE %(words)s ESCAPE '\\'
        OR p.number ILIKE %(words)s ESCAPE '\\'
        OR s.state -> 'outbound' ->> 'to' ILIKE %(words)s ESCAPE '\\'
        OR EXISTS (SELECT 1 FROM transcript_items t
                    WHERE t.session_id = s.id AND t.text ILIKE %(words)s ESCAPE '\\'))
"""

# By status, and of those whether a provider's call ever reached the session.
_LIVE_STATUSES = frozenset(str(phase) for phase in IN_CALL)
COUNT_SESSIONS = """
SELECT status, provider_call_id IS NOT NULL, count(*) FROM sessions WHERE namespace = %s GROUP BY 1, 2
"""


def _like(text: str) -> str:
    """A search text as an ILIKE pattern that matches it anywhere, its wildcards taken literally."""
    if not text:
        return ""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def sessions(
    namespace: str,
    page: PageRequest | None = None,
    *,
    status: str = "",
    route: str = "",
    end_reason: str = "",
    search: str = "",
    agent: tuple[str, int | None] | None = None,
) -> dict[str, Any]:
    """The deployment's sessions, newest first (filtered by status — or `live`, or
    `not_connected` — route, end reason, when
    they were created and a search of their id, numbers and words said), a page at a time
    (`next`: the cursor of the next page, None on the last), how many there are in each status,
    and how many are live, over, or were never connected (`calls`)."""
    page = page or PageRequest("sessions")
    window = keyset(page, ("s.created_at", "s.id"), created="s.created_at", descending=True)
    rows = database.execute_sql(
        f"{LIST_SESSIONS} {window.where} {window.order}",
        {
            **window.parameters,
            "namespace": namespace,
            "status": status,
            "in_call": sorted(_LIVE_STATUSES),
            "route": route,
            "end_reason": end_reason,
            "words": _like(search),
            "agent": agent[0] if agent else "",
            "agent_version": (agent[1] or 0) if agent else 0,
        },
    ).fetchall()
    listed = [_listed(row) for row in rows[: page.limit]]
    counts: dict[str, int] = {}
    # Live (connecting included), over, or not connected: a session no call reached is not a
    # failed call, whatever its status says.
    sorted_counts = {"live": 0, "over": 0, "not_connected": 0}
    for found, reached, n in database.execute_sql(COUNT_SESSIONS, (namespace,)).fetchall():
        counts[str(found)] = counts.get(str(found), 0) + int(n)
        if str(found) in _LIVE_STATUSES or (reached and found == Phase.ADMITTING):
            sorted_counts["live"] += int(n)
        elif not reached:
            sorted_counts["not_connected"] += int(n)
        else:
            sorted_counts["over"] += int(n)
    return {
        "calls": sorted_counts,
        "sessions": listed,
        "counts": counts,
        "next": next_cursor(page, rows, lambda row: (row[3], row[0])),
    }


def _listed(row: tuple[Any, ...]) -> dict[str, Any]:
    (
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
        state,
        campaign_name,
    ) = row
    state = state or {}
    outbound = state.get("outbound") if isinstance(state.get("outbound"), dict) else None
    finished = ended.timestamp() if ended else None
    return {
        "id": session_id,
        "status": found_status,
        "end_reason": reason,
        "ended_by": ended_by(Phase(found_status), reason),
        "created_at": rfc3339(created),
        "ended_at": rfc3339_or_none(ended),
        "call_id": call_id,
        "route_id": route_id,
        "caller": caller if outbound is None else outbound.get("caller_number") or None,
        "dialled": number if outbound is None else outbound.get("to"),
        "total_tokens": (usage or {}).get("total_tokens", 0),
        "usage": usage or {},
        "erased_at": rfc3339_or_none(erased),
        "provider": state.get("provider") or "realtime",
        "model": _model(state)["model"],
        "agent": state.get("agent"),
        "direction": direction(state),
        "campaign_id": outbound.get("campaign_id") if outbound else None,
        "campaign_name": campaign_name,
        "activity": activity(found_status, state),
        "line": {"held": bool(state.get("held")), "taken_by": state.get("taken_by")},
        "outcome": outcome(found_status, reason, call_id),
        "duration_s": round(finished - created.timestamp(), 1) if finished is not None else None,
    }


def _model(state: dict[str, Any]) -> dict[str, Any]:
    """The session's model and voice as the record shows them."""
    chosen = state.get("model") or {}
    return {"model": chosen.get("id") or None, "voice": chosen.get("voice")}
