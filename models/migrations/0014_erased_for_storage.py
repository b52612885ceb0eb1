"""A session kept as metadata (`storage: "metadata"`, or the caller declined recording) has its
content erased once its call is over: `erased_because` and an erasure's `because` may say
`storage` too."""

STATEMENTS = [
    "ALTER TABLE sessions DROP CONSTRAINT sessions_erased_because_check",
    """
    ALTER TABLE sessions ADD CONSTRAINT sessions_erased_because_check
        CHECK (erased_because IN ('request', 'retention', 'storage'))
    """,
    "ALTER TABLE erasures DROP CONSTRAINT erasures_because_check",
    """
    ALTER TABLE erasures ADD CONSTRAINT erasures_because_check
        CHECK (because IN ('request', 'retention', 'storage'))
    """,
]
