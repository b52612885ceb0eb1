"""Which deployment (broker namespace) a session belongs to: deployments may share a database,
and each one's timer sweeper fires only its own sessions' timers (one fired another's into its
own queues, where nobody held those sessions' sidebands)."""

STATEMENTS = [
    "ALTER TABLE sessions ADD COLUMN namespace VARCHAR(128) NOT NULL DEFAULT ''",
]
