"""Durable session timers: written with the transition that schedules them, deleted when they
fire, and swept when their delayed message never came (it was lost with Redis)."""

from __future__ import annotations

from models.db import SessionTransaction, database

SCHEDULE = """
INSERT INTO session_timers (session_id, name, due_at)
VALUES (%s, %s, now() + %s * interval '1 millisecond')
ON CONFLICT (session_id, name) DO UPDATE SET due_at = EXCLUDED.due_at
"""

SCHEDULE_ONCE = """
INSERT INTO session_timers (session_id, name, due_at)
VALUES (%s, %s, now() + %s * interval '1 millisecond')
ON CONFLICT (session_id, name) DO NOTHING RETURNING 1
"""

FIRED = "DELETE FROM session_timers WHERE session_id = %s AND name = %s"

# Claims a deployment's overdue timers for one sweep: each is pushed a lease into the future, so
# one sweeper fires it, and if that firing is lost too, a later sweep tries again.
CLAIM_OVERDUE = """
UPDATE session_timers SET due_at = now() + %s * interval '1 millisecond'
 WHERE (session_id, name) IN (
    SELECT timer.session_id, timer.name FROM session_timers timer
      JOIN sessions session ON session.id = timer.session_id
     WHERE session.namespace = %s AND timer.due_at < now() - %s * interval '1 millisecond'
     ORDER BY timer.due_at LIMIT %s FOR UPDATE OF timer SKIP LOCKED)
RETURNING session_id, name
"""


def schedule(session: SessionTransaction, name: str, delay_ms: int) -> None:
    session.defer(SCHEDULE, (session.id, name, delay_ms))


def schedule_once(session: SessionTransaction, name: str, delay_ms: int) -> bool:
    """Schedule a timer unless it is already pending; answers whether it was scheduled now."""
    return session.execute(SCHEDULE_ONCE, (session.id, name, delay_ms)).fetchone() is not None


def fired(session: SessionTransaction, name: str) -> bool:
    """The timer fired: its row goes. Answers whether it was still pending (a cancelled timer,
    or one fired already by the sweeper or its delayed message, is not)."""
    return bool(session.execute(FIRED, (session.id, name)).rowcount)


PENDING = "SELECT 1 FROM session_timers WHERE session_id = %s AND name = %s"


def is_pending(session_id: str, name: str) -> bool:
    """Whether the timer's row is still there (read without the session's lock)."""
    return database.execute_sql(PENDING, (session_id, name)).fetchone() is not None


def cancel_all_but_gaps(session: SessionTransaction) -> None:
    """The session is over: its timers go, but for a gap's (events behind a missing seq still
    land in the record when it is skipped)."""
    session.defer(
        "DELETE FROM session_timers WHERE session_id = %s AND name NOT LIKE 'seq\\_gap:%%'", (session.id,)
    )


def cancel(session: SessionTransaction, name: str) -> None:
    session.defer(FIRED, (session.id, name))


def claim_overdue(namespace: str, grace_ms: int, lease_ms: int, limit: int = 200) -> list[tuple[str, str]]:
    """The deployment's timers overdue by more than `grace_ms` (their delayed message was lost),
    claimed for `lease_ms`; answers (session id, timer name) pairs."""
    with database.atomic():
        cursor = database.execute_sql(CLAIM_OVERDUE, (lease_ms, namespace, grace_ms, limit))
        return [(str(session_id), str(name)) for session_id, name in cursor.fetchall()]
