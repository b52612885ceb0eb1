"""The cursor of each session's event stream (`docs/events.md`) and the lock that makes its
publisher the only one.

A session's stream is published by one worker at a time, under a PostgreSQL advisory lock held
by the publisher's connection, not under a transaction: the session's row is never held while a
broker is waited on, and a publisher killed mid-publish loses its connection and with it the lock.
The lock is tried, never waited for: a sweep that finds it taken leaves the publishing to its
holder (`workers.event_streams`), instead of holding a worker's thread while a broker that never
answers holds the holder. The cursor is written after every message the broker confirmed, so the
next publisher starts at the first one not confirmed (at least once, in order)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from models.db import database

# The advisory locks' first key, so a stream's lock (second key: the session id's hash) meets no
# other lock of the deployment's (the migrations' takes a single key).
_STREAM_LOCK_CLASS = 0x5B_E7


@dataclass(frozen=True)
class StreamCursor:
    """How far a session's stream got: its last confirmed entry, and whether the report went."""

    published_seq: int
    report_published: bool


@contextmanager
def sole_publisher(session_id: str) -> Iterator[StreamCursor | None]:
    """Become the session's only publisher, and its cursor as the one before left it; None, at
    once, while another publisher holds it."""
    taken = database.execute_sql(
        "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (_STREAM_LOCK_CLASS, session_id)
    ).fetchone()
    if not taken or not taken[0]:
        yield None
        return
    try:
        database.execute_sql(
            "INSERT INTO event_streams (session_id) VALUES (%s) ON CONFLICT (session_id) DO NOTHING",
            (session_id,),
        )
        row = database.execute_sql(
            "SELECT published_seq, report_published FROM event_streams WHERE session_id = %s", (session_id,)
        ).fetchone()
        yield StreamCursor(int(row[0]), bool(row[1])) if row else StreamCursor(0, False)
    finally:
        database.execute_sql("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_STREAM_LOCK_CLASS, session_id))


def entry_published(session_id: str, seq: int) -> None:
    """The broker confirmed the entry `seq`: the stream goes on after it."""
    database.execute_sql(
        "UPDATE event_streams SET published_seq = %s, updated_at = now() WHERE session_id = %s",
        (seq, session_id),
    )


def report_published(session_id: str) -> None:
    """The broker confirmed the end-of-call report: the stream is complete."""
    database.execute_sql(
        "UPDATE event_streams SET report_published = true, updated_at = now() WHERE session_id = %s",
        (session_id,),
    )


def cursor_of(session_id: str) -> StreamCursor | None:
    """How far the session's stream got (None: nothing was published yet)."""
    row = database.execute_sql(
        "SELECT published_seq, report_published FROM event_streams WHERE session_id = %s", (session_id,)
    ).fetchone()
    return StreamCursor(int(row[0]), bool(row[1])) if row else None


def is_erased(session_id: str) -> bool:
    """Whether the session's content was erased (or the session is gone): read before each
    message a sweep publishes, so an erasure that commits during a sweep stops it there."""
    row = database.execute_sql(
        "SELECT erased_at IS NOT NULL FROM sessions WHERE id = %s", (session_id,)
    ).fetchone()
    return row is None or bool(row[0])
