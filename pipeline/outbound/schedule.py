"""When a contact is dialled: the retry policy, the calling window and the campaign's expiry
taken together.

A contact not yet dialled is dialled at the window's next opening (now, when it is open); a
contact whose last attempt asks for a retry, at the window's first opening at or after the
retry's time. A dial that would fall at or after the campaign's expiry is not made: a contact
never dialled is then `expired`, and one dialled before keeps its last attempt's outcome. A
suppressed number is never dialled again; a contact never dialled is then `suppressed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pipeline.outbound.outcomes import Outcome
from pipeline.outbound.retry import Final, RetryPolicy, after_attempt
from pipeline.outbound.window import Window, next_open, utc_instant


@dataclass(frozen=True, slots=True)
class Dial:
    """Dial the contact at `at` (an aware UTC instant, inside the window)."""

    at: datetime


def dial_time(not_before: datetime, window: Window | None, zone: str | None) -> datetime:
    """The earliest instant at or after `not_before` the contact may be dialled (UTC)."""
    return next_open(window, zone, not_before) if window is not None else utc_instant(not_before)


def first_dial(
    window: Window | None,
    zone: str | None,
    now: datetime,
    *,
    expires_at: datetime | None = None,
    is_suppressed: bool = False,
) -> Dial | Final:
    """When a contact not yet dialled is dialled, or why it never will be."""
    if is_suppressed:
        return Final(Outcome.SUPPRESSED)
    at = dial_time(now, window, zone)
    if expires_at is not None and at >= expires_at:
        return Final(Outcome.EXPIRED)
    return Dial(at)


def next_dial(
    policy: RetryPolicy,
    outcome: Outcome,
    attempts_made: int,
    window: Window | None,
    zone: str | None,
    now: datetime,
    *,
    expires_at: datetime | None = None,
    is_suppressed: bool = False,
) -> Dial | Final:
    """After attempt number `attempts_made` ended in `outcome` at `now`: when the contact is
    dialled again, or its final outcome."""
    decided = after_attempt(policy, outcome, attempts_made, now)
    if isinstance(decided, Final) or is_suppressed:
        return Final(outcome)
    at = dial_time(decided.at, window, zone)
    if expires_at is not None and at >= expires_at:
        return Final(outcome)
    return Dial(at)


def activity(
    status: str,
    calling: int,
    soonest: datetime | None,
    window: Window | None,
    zone: str | None,
    now: datetime,
) -> str | None:
    """What a campaign that is under way is doing now, as a person would say it: "calling" (a
    call is up), "dialing" (a contact is due), "waiting for its window" (its next contact is due
    when the window opens: a campaign outside its hours is not running as far as anyone can
    tell), "waiting to retry". None when its status says it all (paused, completed, cancelled).
    `soonest` is when its next waiting contact is due, `zone` that contact's time zone."""
    if status not in ("scheduled", "running"):
        return None
    if calling > 0:
        return "calling"
    if soonest is None or soonest <= now:
        return "dialing"
    if window is not None and next_open(window, zone, now) >= soonest:
        return "waiting for its window"
    return "waiting to retry"
