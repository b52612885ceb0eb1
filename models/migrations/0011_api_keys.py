"""API keys with roles: each key is stored as the SHA-256 of its secret (the secret is shown
once, when the key is made), with its role, and revoked by date rather than deleted (the log of
who acted keeps naming it)."""

STATEMENTS = [
    """
    CREATE TABLE api_keys (
        id VARCHAR(40) PRIMARY KEY,
        namespace VARCHAR(128) NOT NULL,
        name VARCHAR(128) NOT NULL,
        role VARCHAR(16) NOT NULL,
        secret_sha256 CHAR(64) NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        revoked_at TIMESTAMPTZ
    )
    """,
]
