"""When each logged event was applied (or logged, while it waits): with the gateway's
received_at, the log then tells where an event's time went — queue and lock, or apply."""

STATEMENTS = [
    "ALTER TABLE session_events ADD COLUMN applied_at DOUBLE PRECISION",
]
