"""Erasure and retention (issue 25): a session whose content was erased keeps its row, marked
with when and why (`request` or `retention`); every erasure that removed something leaves an
audit row saying who asked, when, why and how much of what was removed. The partial index is
the retention sweep's: the ended sessions not yet erased, oldest first."""

STATEMENTS = [
    "ALTER TABLE sessions ADD COLUMN erased_at TIMESTAMPTZ",
    """
    ALTER TABLE sessions ADD COLUMN erased_because VARCHAR(16)
        CHECK (erased_because IN ('request', 'retention'))
    """,
    """
    CREATE TABLE erasures (
        id BIGSERIAL PRIMARY KEY,
        session_id VARCHAR(64) NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        erased_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        by VARCHAR(200) NOT NULL,
        because VARCHAR(16) NOT NULL CHECK (because IN ('request', 'retention')),
        removed JSONB NOT NULL DEFAULT '{}'::jsonb
    )
    """,
    "CREATE INDEX erasures_session ON erasures (session_id, id)",
    """
    CREATE INDEX sessions_retention ON sessions (namespace, ended_at)
        WHERE erased_at IS NULL AND ended_at IS NOT NULL
    """,
]
