"""A database outage (a restart, a failover to a standby, a maintenance window) as a call's
messages see it: how long one waits for PostgreSQL to answer again, and when it gives up.

A message of a call is worth applying for as long as its call can still be alive. Nothing of any
call moves while the database is away, and everything moves again, in seq order, when it
answers: so the bound of the wait is the call's own ceiling, not a count of retries. Dramatiq's
retries (10, about 6 s) stay for every other failure, which a wait could not cure.

A deadline timer that waited out an outage fires only once the events held up by the same
outage had their turn: those retry at most `OUTAGE_RETRY_MAXIMUM_MS` apart, so the timer waits
`SETTLE_AFTER_OUTAGE_MS` more once the database answers. Without it a response deadline due
during the outage could settle a turn as lost while the response's `response.done` waited in
its queue behind it.
"""

from __future__ import annotations

from pipeline.call.limits import ADMISSION_TIMEOUT_MS, MAXIMUM_SESSION_SECONDS

# The first wait is short (a restart or a promotion takes a second or two), doubling to at most
# a second: a minute-long outage costs each waiting message about one connection attempt a
# second, and the first attempt after the database answers comes within a second.
OUTAGE_FIRST_RETRY_MS = 25
OUTAGE_RETRY_MAXIMUM_MS = 1_000

# A call lives at most its admission and its ceiling after it was created, so no message of it
# sent later can matter after this long (60 minutes and 30 s).
CALL_LIFETIME_MS = ADMISSION_TIMEOUT_MS + MAXIMUM_SESSION_SECONDS * 1_000

SETTLE_AFTER_OUTAGE_MS = 2 * OUTAGE_RETRY_MAXIMUM_MS


def retry_after_outage_ms(*, sent_at_ms: int, attempts: int, now_ms: int) -> int | None:
    """How long a message of a call, sent at `sent_at_ms` and that found the database away
    `attempts` times before this one, waits before its next attempt; None once its call is over
    by its own ceiling (the message then takes the retries of any other failure, and becomes a
    dead letter if the database is still away)."""
    if now_ms - sent_at_ms >= CALL_LIFETIME_MS:
        return None
    backoff_ms: int = OUTAGE_FIRST_RETRY_MS << min(attempts, 16)
    return min(backoff_ms, OUTAGE_RETRY_MAXIMUM_MS)
