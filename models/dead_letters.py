"""The dead letters' rows (migration 0019): kept once per message id, read oldest first, taken
under a row lock so two replays of one letter send it once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from models.db import database


@dataclass(frozen=True)
class StoredLetter:
    id: str
    queue: str
    body: bytes
    dead_since: datetime


@dataclass(frozen=True)
class Summary:
    """What a dead letter says of itself, kept beside its body for listing and querying."""

    actor: str | None
    session_id: str | None
    seq: int | None
    retries: int | None
    error: str


def keep(namespace: str, queue: str, letter_id: str, body: bytes, summary: Summary) -> None:
    """Store a dead letter, committed before this returns (a second copy of the same message,
    kept again after a crash before its queue forgot it, changes nothing)."""
    with database.atomic():
        database.execute_sql(
            "INSERT INTO dead_letters (namespace, id, queue, actor, session_id, seq, retries, error, body)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, id) DO NOTHING",
            (
                namespace,
                letter_id,
                queue,
                summary.actor,
                summary.session_id,
                summary.seq,
                summary.retries,
                summary.error,
                body,
            ),
        )


def stored(namespace: str) -> list[StoredLetter]:
    """Every dead letter of the namespace, oldest first."""
    rows = database.execute_sql(
        "SELECT id, queue, body, dead_since FROM dead_letters WHERE namespace = %s ORDER BY dead_since, id",
        (namespace,),
    ).fetchall()
    return [
        StoredLetter(str(id_), str(queue), bytes(body), dead_since) for id_, queue, body, dead_since in rows
    ]


@contextmanager
def taking(namespace: str, letter_id: str) -> Iterator[bool]:
    """Hold the letter's row while the block sends it again, then delete it, in one
    transaction: yields whether it was there (another replay or a purge may have taken it). If
    the block raises, the letter stays."""
    with database.atomic():
        found = database.execute_sql(
            "SELECT 1 FROM dead_letters WHERE namespace = %s AND id = %s FOR UPDATE", (namespace, letter_id)
        ).fetchone()
        yield found is not None
        if found is not None:
            database.execute_sql(
                "DELETE FROM dead_letters WHERE namespace = %s AND id = %s", (namespace, letter_id)
            )


def remove(namespace: str, letter_id: str) -> bool:
    """Purge a dead letter; whether it was there."""
    with database.atomic():
        cursor = database.execute_sql(
            "DELETE FROM dead_letters WHERE namespace = %s AND id = %s", (namespace, letter_id)
        )
        return bool(cursor.rowcount)


def counts(namespace: str) -> dict[str, int]:
    """How many dead letters each queue has."""
    rows = database.execute_sql(
        "SELECT queue, count(*) FROM dead_letters WHERE namespace = %s GROUP BY queue", (namespace,)
    ).fetchall()
    return {str(queue): int(count) for queue, count in rows}


def erase_session(namespace: str, session_id: str, *, keep_queue: str | None = None) -> int:
    """Delete the session's dead letters (they hold what was said); how many. `keep_queue`: a
    queue whose letters stay (a call kept as metadata still owes its app the webhook)."""
    with database.atomic():
        cursor = database.execute_sql(
            "DELETE FROM dead_letters WHERE namespace = %s AND session_id = %s AND queue IS DISTINCT FROM %s",
            (namespace, session_id, keep_queue),
        )
        return int(cursor.rowcount)
