"""Idempotency-Key (issue 28): one row per key an API key sent, claimed `running` by the first
request (an INSERT … ON CONFLICT DO NOTHING, so of concurrent duplicates one acts) and `done`
with its answer stored. `claim` names the request holding it: a stale claim taken over gets a
new one, so the old request's late answer cannot overwrite the new one's. Rows past a day are
swept (`models.idempotency.sweep_expired`, by the retention sweeper)."""

STATEMENTS = [
    """
    CREATE TABLE idempotency_keys (
        namespace VARCHAR(128) NOT NULL,
        owner VARCHAR(64) NOT NULL,
        key VARCHAR(255) NOT NULL,
        fingerprint CHAR(64) NOT NULL,
        claim VARCHAR(64) NOT NULL,
        state VARCHAR(8) NOT NULL CHECK (state IN ('running', 'done')),
        status SMALLINT,
        body BYTEA,
        headers JSONB,
        created_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (namespace, owner, key)
    )
    """,
    "CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)",
]
