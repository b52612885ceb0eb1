"""How long a call's message waits for the database, and when it stops waiting."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.call.limits import ADMISSION_TIMEOUT_MS, MAXIMUM_SESSION_SECONDS
from pipeline.platform.outages import (
    CALL_LIFETIME_MS,
    OUTAGE_FIRST_RETRY_MS,
    OUTAGE_RETRY_MAXIMUM_MS,
    retry_after_outage_ms,
)

SENT = 1_700_000_000_000


def test_the_waits_double_from_the_first_to_a_second() -> None:
    waits = [retry_after_outage_ms(sent_at_ms=SENT, attempts=n, now_ms=SENT + 5_000) for n in range(8)]
    assert waits == [25, 50, 100, 200, 400, 800, 1_000, 1_000]


def test_a_message_waits_a_minute_long_outage_out() -> None:
    # The fixed retries gave up after about 6 s; a failover or a maintenance window lasts longer.
    assert retry_after_outage_ms(sent_at_ms=SENT, attempts=90, now_ms=SENT + 90_000) == 1_000


def test_the_wait_ends_with_the_call_it_belongs_to() -> None:
    assert CALL_LIFETIME_MS == ADMISSION_TIMEOUT_MS + MAXIMUM_SESSION_SECONDS * 1_000
    last = SENT + CALL_LIFETIME_MS
    assert retry_after_outage_ms(sent_at_ms=SENT, attempts=3_000, now_ms=last - 1) == 1_000
    assert retry_after_outage_ms(sent_at_ms=SENT, attempts=3_000, now_ms=last) is None


@given(attempts=st.integers(min_value=0, max_value=10**9), elapsed=st.integers(0, CALL_LIFETIME_MS - 1))
def test_every_wait_is_bounded(attempts: int, elapsed: int) -> None:
    wait = retry_after_outage_ms(sent_at_ms=SENT, attempts=attempts, now_ms=SENT + elapsed)
    assert wait is not None and OUTAGE_FIRST_RETRY_MS <= wait <= OUTAGE_RETRY_MAXIMUM_MS
