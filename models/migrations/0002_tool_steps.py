"""Durable tool steps: one row per function call the model made, with its identity and the
one terminal outcome it may ever have."""

STATEMENTS = [
    """
    CREATE TABLE tool_steps (
        id BIGSERIAL PRIMARY KEY,
        session_id VARCHAR(64) NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        provider_call_id VARCHAR(256) NOT NULL,
        provider_item_id VARCHAR(256),
        provider_response_id VARCHAR(256),
        turn_input_item_id VARCHAR(256),
        sequence INTEGER NOT NULL,
        tool_name VARCHAR(64) NOT NULL,
        tool_version VARCHAR(64) NOT NULL,
        catalog_digest VARCHAR(80) NOT NULL,
        side_effect VARCHAR(16) NOT NULL,
        raw_arguments TEXT NOT NULL,
        argument_digest VARCHAR(80) NOT NULL,
        invocation_key VARCHAR(80) NOT NULL,
        status VARCHAR(16) NOT NULL CHECK (status IN (
            'requested', 'running', 'succeeded', 'failed', 'refused', 'cancelled',
            'unavailable', 'interrupted', 'timed_out')),
        result JSONB,
        error JSONB,
        outcome_digest VARCHAR(80),
        elapsed_ms DOUBLE PRECISION,
        requested_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        started_at TIMESTAMPTZ,
        completed_at TIMESTAMPTZ
    )
    """,
    # A function call is requested once per session: a repeated request finds this row.
    "CREATE UNIQUE INDEX tool_steps_call ON tool_steps (session_id, provider_call_id)",
    "CREATE INDEX tool_steps_active ON tool_steps (session_id) WHERE status IN ('requested', 'running')",
]
