"""Idempotency-Key (issue 44): a claim let go leaves a `released` row under its claim id, so a
claim whose message a worker takes after its gateway gave up (and released it) finds the release
and keeps nothing; any other request treats a released key as free."""

STATEMENTS = [
    "ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_state_check",
    "ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_state_check"
    " CHECK (state IN ('running', 'done', 'released'))",
]
