"""When a worker took each logged event (its transaction's start, just before it asked for the
row lock): with received_at and applied_at, the log splits an event's wait into the queue
(received → taken) and the worker (taken → applied: the lock wait and the apply)."""

STATEMENTS = [
    "ALTER TABLE session_events ADD COLUMN taken_at DOUBLE PRECISION",
]
