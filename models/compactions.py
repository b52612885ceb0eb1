"""Compaction records in PostgreSQL, written under their session's row lock.

A compaction's summary is persisted in a savepoint: if it cannot be stored, only that write is
undone, the session's transaction goes on, and the cycle is abandoned (never the call).
"""

from __future__ import annotations

from typing import Any

import psycopg2

from models.db import SessionTransaction, database
from pipeline.platform.timestamps import rfc3339
from pipeline.session.step import FinishCompaction, SaveCompactionSummary, StartCompaction

INSERT_COMPACTION = """
INSERT INTO compactions (session_id, number, status, forced, trigger_input_tokens, items_before)
VALUES (%s, %s, 'started', %s, %s, %s) ON CONFLICT DO NOTHING
"""

SAVE_SUMMARY = """
UPDATE compactions SET summary = %s, response_id = %s, summarized_at = now()
 WHERE session_id = %s AND number = %s AND status = 'started'
"""

FINISH_COMPACTION = """
UPDATE compactions SET status = %s, reason = %s, items_deleted = %s, items_after = %s,
    finished_at = now()
 WHERE session_id = %s AND number = %s AND status = 'started'
"""

_COLUMNS = (
    "number, status, forced, trigger_input_tokens, items_before, items_deleted, items_after,"
    " response_id, summary, reason, started_at, summarized_at, finished_at"
)


def start(session: SessionTransaction, effect: StartCompaction) -> None:
    session.execute(
        INSERT_COMPACTION,
        (session.id, effect.number, effect.forced, effect.trigger_input_tokens, effect.items_before),
    )


def save_summary(session: SessionTransaction, effect: SaveCompactionSummary) -> str | None:
    """Store the summary; answers None, or why it could not be stored. A lost connection is
    not a storage failure: it propagates, and the whole event is retried."""
    session.execute("SAVEPOINT compaction_summary")
    try:
        session.execute(SAVE_SUMMARY, (effect.summary, effect.response_id, session.id, effect.number))
    except psycopg2.Error as error:
        if isinstance(error, psycopg2.OperationalError | psycopg2.InterfaceError):
            raise
        session.execute("ROLLBACK TO SAVEPOINT compaction_summary")
        return f"{type(error).__name__}: {str(error).strip()}"[:500]
    session.execute("RELEASE SAVEPOINT compaction_summary")
    return None


def finish(session: SessionTransaction, effect: FinishCompaction) -> None:
    session.execute(
        FINISH_COMPACTION,
        (
            effect.status,
            effect.reason,
            effect.items_deleted,
            effect.items_after,
            session.id,
            effect.number,
        ),
    )


def for_session(session_id: str) -> list[dict[str, Any]]:
    """Every compaction of a session, oldest first, as the session record shows them."""
    cursor = database.execute_sql(
        f"SELECT {_COLUMNS} FROM compactions WHERE session_id = %s ORDER BY number", (session_id,)
    )
    names = [name.strip() for name in _COLUMNS.split(",")]
    records = []
    for row in cursor.fetchall():
        record = dict(zip(names, row, strict=True))
        for moment in ("started_at", "summarized_at", "finished_at"):
            if record[moment] is not None:
                record[moment] = rfc3339(record[moment])
        records.append(record)
    return records
