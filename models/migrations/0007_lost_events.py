"""A seq that never arrived within the gap timeout is logged as 'lost', so the events after it
are applied instead of waiting for ever; if it comes after all, it is applied then."""

STATEMENTS = [
    "ALTER TABLE session_events DROP CONSTRAINT session_events_disposition_check",
    """
    ALTER TABLE session_events ADD CONSTRAINT session_events_disposition_check
        CHECK (disposition IN ('applied', 'pending', 'duplicate', 'late', 'lost'))
    """,
]
