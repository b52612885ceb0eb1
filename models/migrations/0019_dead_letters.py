"""Dead letters in PostgreSQL: each message the workers gave up on, kept in the same step that
takes it off its queue, so a Redis restart or flush (Redis keeps nothing on disk here) loses none.
`body` is the message as the queue held it (with its last traceback), or the raw bytes of one
that was not a message; the other columns are read from it, for listing."""

STATEMENTS = [
    """
    CREATE TABLE dead_letters (
        namespace VARCHAR(100) NOT NULL,
        id VARCHAR(200) NOT NULL,
        queue VARCHAR(100) NOT NULL,
        actor VARCHAR(100),
        session_id VARCHAR(64),
        seq BIGINT,
        retries INTEGER,
        error TEXT NOT NULL,
        body BYTEA NOT NULL,
        dead_since TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (namespace, id)
    )
    """,
    "CREATE INDEX dead_letters_by_age ON dead_letters (namespace, dead_since, id)",
]
