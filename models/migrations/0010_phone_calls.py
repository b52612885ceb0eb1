"""The SIP front door: the routes that say which agent answers which number, every webhook
delivery received, and one row per phone call (its id is the provider's call id, so one call
is one session, however often and however concurrently it is announced)."""

STATEMENTS = [
    """
    CREATE TABLE routes (
        id VARCHAR(64) PRIMARY KEY,
        namespace VARCHAR(128) NOT NULL,
        number VARCHAR(40) NOT NULL,
        spec JSONB NOT NULL,
        terms JSONB NOT NULL DEFAULT '{}',
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        UNIQUE (namespace, number)
    )
    """,
    """
    CREATE TABLE webhook_deliveries (
        webhook_id VARCHAR(200) PRIMARY KEY,
        call_id VARCHAR(200),
        event_type VARCHAR(100) NOT NULL,
        deliveries INTEGER NOT NULL DEFAULT 1,
        first_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        last_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE phone_calls (
        call_id VARCHAR(200) PRIMARY KEY,
        namespace VARCHAR(128) NOT NULL,
        session_id VARCHAR(64) REFERENCES sessions (id) ON DELETE CASCADE,
        route_id VARCHAR(64),
        number VARCHAR(200) NOT NULL DEFAULT '',
        caller VARCHAR(400) NOT NULL DEFAULT '',
        action VARCHAR(16) NOT NULL,
        sip_status INTEGER,
        reason VARCHAR(64),
        claimed_by VARCHAR(64),
        claimed_at TIMESTAMPTZ,
        answered_at TIMESTAMPTZ,
        outcome VARCHAR(32),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    "CREATE INDEX phone_calls_route ON phone_calls (route_id) WHERE session_id IS NOT NULL",
]
