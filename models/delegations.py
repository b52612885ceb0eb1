"""What a Live delegation's handler is given from PostgreSQL: the session's state and the
call's transcript so far. Read without the row lock: both are what the last committed
transaction wrote, and a handler must never hold a session up."""

from __future__ import annotations

from models.db import database
from models.releases import read_across
from pipeline.call.errors import SessionNotFound
from pipeline.session.state import SessionState

# The transcript lines a handler is given at most, the latest: a long call's whole transcript
# would travel with every delegation.
MAXIMUM_TRANSCRIPT_LINES = 200

STATE = "SELECT state FROM sessions WHERE id = %s"
TRANSCRIPT = """
SELECT role, text FROM (
    SELECT id, role, text FROM transcript_items WHERE session_id = %s AND NOT late
     ORDER BY id DESC LIMIT %s) AS latest
 ORDER BY id
"""


def delegation_context(session_id: str) -> tuple[SessionState, tuple[tuple[str, str], ...]]:
    """The session's state and its transcript so far (role, text), oldest first."""
    row = database.execute_sql(STATE, (session_id,)).fetchone()
    if row is None:
        raise SessionNotFound(f"no session {session_id!r}")
    lines = database.execute_sql(TRANSCRIPT, (session_id, MAXIMUM_TRANSCRIPT_LINES)).fetchall()
    return read_across(SessionState, row[0], "stored session state"), tuple(
        (str(role), str(text)) for role, text in lines
    )
