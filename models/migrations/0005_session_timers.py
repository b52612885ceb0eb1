"""Durable timers: every timer a session schedules, until it fires. The delayed message on the
broker is the fast path; this row lets a sweeper fire a timer whose message was lost (Redis
keeps nothing on disk here)."""

STATEMENTS = [
    """
    CREATE TABLE session_timers (
        session_id VARCHAR(64) NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        name VARCHAR(160) NOT NULL,
        due_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (session_id, name)
    )
    """,
    "CREATE INDEX session_timers_due ON session_timers (due_at)",
]
