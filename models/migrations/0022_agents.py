"""Agents (issue 47): a name per deployment with immutable numbered versions (each a session
spec), the one published, and who published which when (a rollback is a publication too)."""

STATEMENTS = [
    """CREATE TABLE agents (
        namespace VARCHAR(128) NOT NULL,
        name VARCHAR(64) NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        archived_at TIMESTAMPTZ,
        published_version INTEGER,
        -- Versions ever made: the next one's number (a deleted version's is never given again).
        versions_made INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (namespace, name)
    )""",
    """CREATE TABLE agent_versions (
        namespace VARCHAR(128) NOT NULL,
        agent VARCHAR(64) NOT NULL,
        version INTEGER NOT NULL CHECK (version >= 1),
        spec JSONB NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        created_by VARCHAR(128) NOT NULL DEFAULT '',
        PRIMARY KEY (namespace, agent, version),
        FOREIGN KEY (namespace, agent) REFERENCES agents (namespace, name)
    )""",
    """CREATE TABLE agent_publications (
        id BIGSERIAL PRIMARY KEY,
        namespace VARCHAR(128) NOT NULL,
        agent VARCHAR(64) NOT NULL,
        version INTEGER NOT NULL,
        published_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        published_by VARCHAR(128) NOT NULL DEFAULT '',
        FOREIGN KEY (namespace, agent) REFERENCES agents (namespace, name)
    )""",
    "CREATE INDEX agent_publications_by_agent ON agent_publications (namespace, agent, id)",
    # The calls a version served (and whether one still runs it) are found by the agent their
    # state names.
    "CREATE INDEX sessions_by_agent ON sessions"
    " (namespace, (state->'agent'->>'name'), ((state->'agent'->>'version')::int))",
]
