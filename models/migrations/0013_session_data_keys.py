"""Each session's data key pair: the public half in the clear (the gateway seals a sensitive
value with it), the private half wrapped by the deployment key (`SWITCHBOARD_DATA_KEY`, whose id
`key_id` names). Erasing a session sets `wrapped_private` to NULL and `destroyed_at`: every value
sealed for it is unreadable from then on, wherever a copy lies (crypto-shredding)."""

STATEMENTS = [
    """
    CREATE TABLE session_data_keys (
        session_id VARCHAR(64) PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
        public_key BYTEA NOT NULL,
        wrapped_private TEXT,
        key_id VARCHAR(16) NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        destroyed_at TIMESTAMPTZ,
        CHECK ((wrapped_private IS NULL) = (destroyed_at IS NOT NULL))
    )
    """,
    # A rotation looks for the live keys still under an old deployment key.
    "CREATE INDEX session_data_keys_live ON session_data_keys (key_id) WHERE wrapped_private IS NOT NULL",
]
