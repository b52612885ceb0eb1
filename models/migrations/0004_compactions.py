"""Compactions: one row per compaction cycle of a session — why it started, how it ended, and
the summary that replaced the pruned items."""

STATEMENTS = [
    """
    CREATE TABLE compactions (
        session_id VARCHAR(64) NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        number INTEGER NOT NULL,
        status VARCHAR(16) NOT NULL CHECK (status IN ('started', 'completed', 'abandoned')),
        forced BOOLEAN NOT NULL,
        trigger_input_tokens INTEGER NOT NULL,
        items_before INTEGER NOT NULL,
        items_deleted INTEGER NOT NULL DEFAULT 0,
        items_after INTEGER,
        response_id VARCHAR(256),
        summary TEXT,
        reason VARCHAR(128),
        started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        summarized_at TIMESTAMPTZ,
        finished_at TIMESTAMPTZ,
        PRIMARY KEY (session_id, number),
        -- Nothing is pruned without a persisted summary: a completed cycle always has one.
        CHECK (status <> 'completed' OR summary IS NOT NULL)
    )
    """,
]
