"""Event streams (`docs/events.md`): how far each session's stream to its app's broker got —
the last call-log entry the broker confirmed, and whether the end-of-call report went too. A
session's publisher advances it only after the broker took the message, so a publisher killed
mid-publish leaves it where the next one starts again."""

STATEMENTS = [
    """
    CREATE TABLE event_streams (
        session_id VARCHAR(64) PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
        published_seq INTEGER NOT NULL DEFAULT 0,
        report_published BOOLEAN NOT NULL DEFAULT false,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
]
