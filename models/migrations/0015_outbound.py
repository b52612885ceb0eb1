"""Calls going out (issue 26): the SIP trunks they are placed through (a password encrypted under
the deployment key, never returned), the numbers never to dial, campaigns with their contacts,
and one row per call placed (a dial of `POST /v1/calls` or of a campaign's contact).

A call in progress is one whose `outcome` is still null: the dialer counts them under its lock.
A campaign's call is claimed (its row written, with the id its session will have) before its
session is created in a transaction of its own, so its `session_id` names a row that may not
exist yet. A campaign contact's attempt is unique (`contact_id`, `attempt`), so a dial decided
twice (a worker killed after deciding, the tick run again) is refused by the database.
`next_at` is when a waiting contact may be dialled (its retry, or its window's opening);
`next_tick_at` when the dialer looks at a campaign next if nothing wakes it sooner."""

STATEMENTS = [
    """
    CREATE TABLE trunks (
        namespace VARCHAR(64) NOT NULL,
        name VARCHAR(64) NOT NULL,
        url VARCHAR(300) NOT NULL,
        username VARCHAR(256) NOT NULL,
        password TEXT NOT NULL,
        caller_number VARCHAR(16) NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (namespace, name)
    )
    """,
    """
    CREATE TABLE suppressions (
        namespace VARCHAR(64) NOT NULL,
        number VARCHAR(16) NOT NULL,
        reason VARCHAR(200) NOT NULL DEFAULT '',
        source VARCHAR(16) NOT NULL CHECK (source IN ('api', 'opt_out', 'model')),
        added_by VARCHAR(200) NOT NULL DEFAULT '',
        session_id VARCHAR(64),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (namespace, number)
    )
    """,
    """
    CREATE TABLE campaigns (
        id VARCHAR(64) PRIMARY KEY,
        namespace VARCHAR(64) NOT NULL,
        name VARCHAR(200) NOT NULL,
        spec JSONB NOT NULL,
        status VARCHAR(16) NOT NULL
            CHECK (status IN ('scheduled', 'running', 'paused', 'completed', 'cancelled')),
        contacts INT NOT NULL DEFAULT 0,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        completed_at TIMESTAMPTZ,
        next_tick_at TIMESTAMPTZ
    )
    """,
    "CREATE INDEX campaigns_listed ON campaigns (namespace, created_at DESC, id)",
    """
    CREATE INDEX campaigns_due ON campaigns (namespace, next_tick_at)
        WHERE status IN ('scheduled', 'running')
    """,
    """
    CREATE TABLE campaign_contacts (
        id BIGSERIAL PRIMARY KEY,
        campaign_id VARCHAR(64) NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
        position INT NOT NULL,
        number VARCHAR(16) NOT NULL,
        vars JSONB NOT NULL DEFAULT '{}'::jsonb,
        timezone VARCHAR(64),
        state VARCHAR(16) NOT NULL CHECK (state IN ('waiting', 'calling', 'done')),
        outcome VARCHAR(16),
        attempts INT NOT NULL DEFAULT 0,
        refused VARCHAR(200),
        next_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        UNIQUE (campaign_id, position)
    )
    """,
    "CREATE INDEX campaign_contacts_due ON campaign_contacts (campaign_id, state, next_at, position)",
    "CREATE INDEX campaign_contacts_number ON campaign_contacts (number)",
    """
    CREATE TABLE outbound_calls (
        id VARCHAR(64) PRIMARY KEY,
        namespace VARCHAR(64) NOT NULL,
        session_id VARCHAR(64) NOT NULL,
        to_number VARCHAR(16) NOT NULL,
        trunk VARCHAR(64) NOT NULL,
        campaign_id VARCHAR(64) REFERENCES campaigns (id) ON DELETE CASCADE,
        contact_id BIGINT REFERENCES campaign_contacts (id) ON DELETE CASCADE,
        attempt INT NOT NULL DEFAULT 1,
        outcome VARCHAR(16),
        answered_by VARCHAR(16),
        code VARCHAR(200),
        started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        ended_at TIMESTAMPTZ,
        UNIQUE (contact_id, attempt)
    )
    """,
    """
    CREATE INDEX outbound_calls_in_progress ON outbound_calls (namespace, campaign_id)
        WHERE outcome IS NULL
    """,
    "CREATE INDEX outbound_calls_session ON outbound_calls (session_id)",
    "CREATE INDEX outbound_calls_number ON outbound_calls (to_number)",
]
