"""Erasing a session's content in PostgreSQL (issue 25), in one transaction under its row lock.

`erase_session` blanks every table's content of one ended session — the event log's payloads
and controls, the transcript texts, the tool steps' arguments, results and errors, the
compaction summaries, the incidents' summaries and contexts, the phone call's numbers and the
state's content (`pipeline.records.erasure.erased_state`) — sets `erased_at` and `erased_because`, and
writes an `erasures` audit row with what it removed. The metadata row stays. A transaction
either commits all of it or none (a worker killed half-way leaves the session as it was).
Erasing an erased session runs the same statements, finds nothing left and writes no audit row
(`already_erased`); something that landed since (an incident the gateway recorded about the call)
is removed and audited. An event that arrives after the erasure is not kept at all
(`LockedSession.deliver` reads `erased_at` with the row lock).

`erase_caller` erases every ended session whose call came from or went to a number, and the
number from the calls that number made or was dialled in that no session answered (turned
away: an unrouted number, a full line); the Redis side (the session's keys and dead letters) is
`workers.erasure`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from models.data_keys import destroy_session_key
from models.db import database
from models.sessions import LockedSession, locked_session
from pipeline.call.errors import SessionLive
from pipeline.phone.numbers import e164
from pipeline.platform.releases import as_stored
from pipeline.platform.timestamps import rfc3339
from pipeline.records.erasure import (
    Because,
    erased_controls,
    erased_payload,
    erased_state,
    is_erased_payload,
    numbers_matching,
    refusal_to_erase,
    retention_days,
    retention_over,
)

_ROW = "SELECT erased_at, ended_at, now() FROM sessions WHERE id = %s"
_EVENTS = "SELECT id, kind, payload, controls FROM session_events WHERE session_id = %s ORDER BY id"
_ERASE_EVENTS = """
UPDATE session_events AS e SET payload = v.payload::jsonb, controls = v.controls::jsonb
  FROM (VALUES {values}) AS v (id, payload, controls)
 WHERE e.id = v.id
"""
_ERASE_TRANSCRIPTS = "UPDATE transcript_items SET text = '' WHERE session_id = %s AND text <> ''"
_ERASE_TOOL_STEPS = """
UPDATE tool_steps SET
    raw_arguments = '', argument_digest = '', outcome_digest = NULL,
    result = CASE WHEN result IS NULL THEN NULL ELSE '{"erased": true}'::jsonb END,
    error = CASE WHEN error IS NULL THEN NULL
                 ELSE jsonb_build_object('code', error->'code', 'erased', true) END
 WHERE session_id = %s
   AND (raw_arguments <> '' OR argument_digest <> '' OR outcome_digest IS NOT NULL
        OR (result IS NOT NULL AND result <> '{"erased": true}'::jsonb)
        OR (error IS NOT NULL AND NOT error ? 'erased'))
"""
_ERASE_COMPACTIONS = (
    "UPDATE compactions SET summary = '' WHERE session_id = %s AND summary IS NOT NULL AND summary <> ''"
)
# An incident recorded before its session existed is kept unattached, naming it in its context.
_ERASE_INCIDENTS = """
UPDATE incidents SET summary = '', context = jsonb_build_object('session_id', %(id)s, 'erased', true)
 WHERE (session_id = %(id)s OR (session_id IS NULL AND context->>'session_id' = %(id)s))
   AND NOT (summary = '' AND context ? 'erased')
"""
_ERASE_PHONE_CALL = (
    "UPDATE phone_calls SET caller = '', number = '' WHERE session_id = %s AND (caller <> '' OR number <> '')"
)
# A call turned away has no session to erase with it: its row keeps only what became of it.
_ERASE_TURNED_AWAY = """
UPDATE phone_calls SET caller = '', number = ''
 WHERE namespace = %(namespace)s AND session_id IS NULL
   AND (caller = ANY(%(numbers)s) OR number = ANY(%(numbers)s))
"""
_MARK_ERASED = """
UPDATE sessions SET state = %s::jsonb, erased_at = coalesce(erased_at, now()),
    erased_because = coalesce(erased_because, %s)
 WHERE id = %s
"""
_AUDIT = "INSERT INTO erasures (session_id, by, because, removed) VALUES (%s, %s, %s, %s::jsonb)"

# A phone call's session, by the numbers its state and its call row name.
_SESSIONS_OF_NUMBER = """
SELECT s.id FROM sessions s
 WHERE s.namespace = %(namespace)s
   AND (s.state->'phone'->>'caller' = ANY(%(numbers)s)
        OR s.state->'phone'->>'dialled' = ANY(%(numbers)s)
        OR s.state->'phone'->>'asserted_identity' = ANY(%(numbers)s)
        OR s.state->'outbound'->>'to' = ANY(%(numbers)s)
        OR s.id IN (SELECT p.session_id FROM phone_calls p
                     WHERE p.namespace = %(namespace)s AND p.session_id IS NOT NULL
                       AND (p.caller = ANY(%(numbers)s) OR p.number = ANY(%(numbers)s)))
        OR s.id IN (SELECT o.session_id FROM outbound_calls o
                     WHERE o.namespace = %(namespace)s AND o.to_number = ANY(%(numbers)s)))
 ORDER BY s.created_at
"""

# The ended sessions of a deployment whose retention is over, oldest first (the partial index
# `sessions_retention` holds exactly the ended sessions not yet erased).
_RETENTION_DUE = """
SELECT id FROM sessions
 WHERE namespace = %(namespace)s AND erased_at IS NULL AND ended_at IS NOT NULL
   AND (state->>'storage' = 'metadata'
        OR ended_at <= now() - make_interval(
            days => coalesce((state->'privacy'->>'retention_days')::int, %(days)s::int)))
 ORDER BY ended_at
 LIMIT %(limit)s
"""


@dataclass(frozen=True)
class Erased:
    """What one erasure did: whether the session was erased before, and how many rows of each
    kind it blanked now."""

    session_id: str
    already_erased: bool
    removed: dict[str, int] = field(default_factory=dict)
    because: Because = "request"

    def as_json(self) -> dict[str, Any]:
        return {
            "erased": True,
            "session_id": self.session_id,
            "already_erased": self.already_erased,
            "removed": self.removed,
        }


def erase_session(
    session_id: str,
    *,
    by: str,
    because: Because = "request",
    deployment_retention_days: int | None = None,
    namespace: str | None = None,
) -> Erased | None:
    """Erase one ended session's content (`SessionNotFound`, `SessionLive` otherwise); with a
    `namespace`, only a session of that deployment (deployments may share a database: one's
    admin erases nothing of another's). For the retention sweep (`because="retention"`) the
    session's retention is checked again under the lock, and a session whose retention is not
    over is left alone: None."""
    with locked_session(session_id, namespace=namespace) as session:
        erased_at, ended_at, now = session.execute(_ROW, (session_id,)).fetchone()
        refusal = refusal_to_erase(session.state.phase, session_id)
        if refusal is not None:
            raise refusal
        already = erased_at is not None
        if because == "retention" and not already:
            if session.state.storage == "metadata":
                # Kept only until its call was over: its content goes now, whatever its retention.
                because = "storage"
            else:
                days = retention_days(session.state.privacy.retention_days, deployment_retention_days)
                if not retention_over(ended_at, days, now):
                    return None
        removed = _blank(session)
        # Crypto-shredding: what was sealed for the session opens never again, wherever a copy is.
        removed["data_key"] = int(destroy_session_key(session_id, execute=session.execute))
        state = erased_state(session.state)
        removed["state"] = int(state != session.state)
        if removed["state"] or not already:
            session.execute(_MARK_ERASED, (as_stored(state), because, session_id))
        if not already or any(removed.values()):
            session.execute(_AUDIT, (session_id, by[:200], because, json.dumps(removed)))
    return Erased(session_id, already, removed, because)


def _blank(session: LockedSession) -> dict[str, int]:
    """Blank the content of every table the session owns; how many rows of each changed."""
    session_id = session.id
    removed = {"events": _blank_events(session)}
    for name, sql, parameters in (
        ("transcript_items", _ERASE_TRANSCRIPTS, (session_id,)),
        ("tool_steps", _ERASE_TOOL_STEPS, (session_id,)),
        ("compactions", _ERASE_COMPACTIONS, (session_id,)),
        ("incidents", _ERASE_INCIDENTS, {"id": session_id}),
        ("phone_calls", _ERASE_PHONE_CALL, (session_id,)),
        # Whom a call Switchboard placed dialled; its outcome and timings stay.
        (
            "outbound_calls",
            "UPDATE outbound_calls SET to_number = '' WHERE session_id = %s AND to_number <> ''",
            (session_id,),
        ),
    ):
        removed[name] = int(session.execute(sql, parameters).rowcount)
    return removed


def _blank_events(session: LockedSession) -> int:
    """Each logged event keeps its type, seq, ids, disposition and timings; its payload and
    controls keep only their types (`pipeline.records.erasure`)."""
    cursor = session.execute(_EVENTS, (session.id,))
    changed: list[bytes] = []
    for event_id, kind, payload, controls in cursor.fetchall():
        if is_erased_payload(payload) and controls == erased_controls(controls):
            continue
        changed.append(
            cursor.mogrify(
                "(%s, %s, %s)",
                (event_id, json.dumps(erased_payload(kind)), json.dumps(erased_controls(controls or []))),
            )
        )
    for start in range(0, len(changed), 500):
        values = b", ".join(changed[start : start + 500]).decode()
        # Run as it is, without parameters: the values are quoted already (and may hold a `%`).
        cursor.execute(_ERASE_EVENTS.format(values=values))
    return len(changed)


@dataclass(frozen=True)
class CallerErased:
    number: str
    erased: list[Erased]
    skipped_live: list[str]
    # Calls of the number turned away (no session answered them) whose rows held it.
    turned_away: int = 0

    def as_json(self) -> dict[str, Any]:
        fresh = [e for e in self.erased if not e.already_erased]
        return {
            "number": self.number,
            "erased": len(fresh),
            "already_erased": len(self.erased) - len(fresh),
            "skipped_live": len(self.skipped_live),
            "turned_away": self.turned_away,
            "sessions": [e.session_id for e in self.erased],
            "live_sessions": self.skipped_live,
        }


def sessions_of_number(namespace: str, number: str) -> list[str]:
    """The sessions of a deployment whose phone call came from or went to `number` (checked:
    `MalformedNumber` otherwise), oldest first."""
    numbers = list(numbers_matching(e164(number)))
    rows = database.execute_sql(_SESSIONS_OF_NUMBER, {"namespace": namespace, "numbers": numbers}).fetchall()
    return [str(row[0]) for row in rows]


def erase_caller(namespace: str, number: str, *, by: str) -> CallerErased:
    """Erase every ended session whose call came from or went to `number`, one transaction
    each; the live ones are skipped (and named). The calls of the number turned away lose it
    too, and so do the campaigns' contacts."""
    erased: list[Erased] = []
    skipped: list[str] = []
    for session_id in sessions_of_number(namespace, number):
        try:
            done = erase_session(session_id, by=by, because="request", namespace=namespace)
        except SessionLive:
            skipped.append(session_id)
            continue
        if done is not None:
            erased.append(done)
    turned_away = database.execute_sql(
        _ERASE_TURNED_AWAY, {"namespace": namespace, "numbers": list(numbers_matching(e164(number)))}
    ).rowcount
    _forget_contacts(namespace, number)
    return CallerErased(number, erased, skipped, int(turned_away))


def _forget_contacts(namespace: str, number: str) -> None:
    """The number as a campaign's contact: its vars and the number go, and a contact not yet
    done is never dialled (`cancelled`). The do-not-call list keeps the number: it is kept so
    that it is never dialled."""
    database.execute_sql(
        "UPDATE campaign_contacts SET number = '', vars = '{}'::jsonb,"
        " state = CASE WHEN state = 'done' THEN state ELSE 'done' END,"
        " outcome = CASE WHEN state = 'done' THEN outcome ELSE 'cancelled' END"
        " WHERE number = ANY(%s) AND state <> 'calling'"
        " AND campaign_id IN (SELECT id FROM campaigns WHERE namespace = %s)",
        (list(numbers_matching(e164(number))), namespace),
    )


def retention_due(namespace: str, deployment_retention_days: int | None, limit: int = 100) -> list[str]:
    """The ended, unerased sessions of a deployment whose retention is over, oldest first."""
    rows = database.execute_sql(
        _RETENTION_DUE, {"namespace": namespace, "days": deployment_retention_days, "limit": limit}
    ).fetchall()
    return [str(row[0]) for row in rows]


def erasures(session_id: str) -> list[dict[str, Any]]:
    """The audit rows of a session's erasures, oldest first."""
    rows = database.execute_sql(
        "SELECT erased_at, by, because, removed FROM erasures WHERE session_id = %s ORDER BY id",
        (session_id,),
    ).fetchall()
    return [
        {"at": rfc3339(at), "by": by, "because": because, "removed": removed}
        for at, by, because, removed in rows
    ]
