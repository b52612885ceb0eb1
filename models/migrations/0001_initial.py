"""Sessions, their ordered event log, transcripts and incidents."""

STATEMENTS = [
    """
    CREATE TABLE sessions (
        id VARCHAR(64) PRIMARY KEY,
        status VARCHAR(16) NOT NULL,
        generation INTEGER NOT NULL DEFAULT 1,
        applied_seq BIGINT NOT NULL DEFAULT 0,
        logged_seq BIGINT NOT NULL DEFAULT 0,
        applied_count BIGINT NOT NULL DEFAULT 0,
        owning_gateway VARCHAR(128) NOT NULL,
        provider_call_id VARCHAR(256),
        instructions TEXT NOT NULL DEFAULT '',
        state JSONB NOT NULL,
        usage JSONB NOT NULL DEFAULT '{}'::jsonb,
        end_reason VARCHAR(128),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        ended_at TIMESTAMPTZ
    )
    """,
    "CREATE INDEX sessions_status ON sessions (status)",
    "CREATE INDEX sessions_provider_call_id ON sessions (provider_call_id)",
    """
    CREATE TABLE session_events (
        id BIGSERIAL PRIMARY KEY,
        session_id VARCHAR(64) NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq BIGINT,
        provider_event_id VARCHAR(256),
        kind VARCHAR(128) NOT NULL,
        payload JSONB NOT NULL,
        generation INTEGER NOT NULL,
        received_at DOUBLE PRECISION NOT NULL,
        disposition VARCHAR(16) NOT NULL
            CHECK (disposition IN ('applied', 'pending', 'duplicate', 'late')),
        applied_order BIGINT,
        controls JSONB NOT NULL DEFAULT '[]'::jsonb,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    # One row per gateway number: a redelivered message finds its row and changes nothing.
    "CREATE UNIQUE INDEX session_events_seq ON session_events (session_id, seq)",
    # One applied row per provider event: the same provider event under a later number is a
    # duplicate. Pending rows are outside the index, so an early copy cannot claim the id
    # before the copy with the lower seq is applied.
    """
    CREATE UNIQUE INDEX session_events_provider_event
        ON session_events (session_id, provider_event_id)
        WHERE provider_event_id IS NOT NULL AND disposition IN ('applied', 'late')
    """,
    "CREATE INDEX session_events_fold ON session_events (session_id, applied_order)",
    """
    CREATE TABLE transcript_items (
        id BIGSERIAL PRIMARY KEY,
        session_id VARCHAR(64) NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        role VARCHAR(16) NOT NULL CHECK (role IN ('user', 'assistant')),
        text TEXT NOT NULL,
        provider_item_id VARCHAR(256) NOT NULL,
        response_id VARCHAR(256),
        seq BIGINT,
        late BOOLEAN NOT NULL DEFAULT false,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    "CREATE INDEX transcript_items_session ON transcript_items (session_id, id)",
    """
    CREATE TABLE incidents (
        id BIGSERIAL PRIMARY KEY,
        session_id VARCHAR(64) REFERENCES sessions (id) ON DELETE CASCADE,
        code VARCHAR(128) NOT NULL,
        severity VARCHAR(16) NOT NULL,
        summary TEXT NOT NULL,
        context JSONB NOT NULL DEFAULT '{}'::jsonb,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    "CREATE INDEX incidents_session ON incidents (session_id, id)",
    "CREATE INDEX incidents_code ON incidents (code)",
]
