"""The order of a session's numbered events (DESIGN invariant 2), decided without a database.

The gateway numbers every durable event of a session (`seq`); queues and retries deliver them in
any order, any number of times. Under the row lock, a worker logs each arriving seq and applies
the logged events from `applied_seq + 1` upward while they are contiguous. These functions say
what an arriving seq is, which logged seqs are applied now, and which seq a session waits for;
`models.sessions` only reads, locks and writes accordingly.

An arriving seq is one of:

NEXT         the seq after `applied_seq`, with nothing logged beyond it: applied at once (the
             hot path, one statement)
FILLS_GAP    the seq after `applied_seq`, with later ones waiting: logged, then the contiguous
             run after `applied_seq` is applied
EARLY        beyond `applied_seq + 1`: logged as pending, and the seq it waits for is watched
             (declared lost if it never comes within the gap timeout)
REDELIVERED  at or below `applied_seq`: applied already, so it changes nothing — unless its gap
             timed out and it was declared lost: then it is recorded where it is, as arrived late

A logged event is applied, or logged as a duplicate when the provider's event id was applied
under another seq (the provider sent it twice); its disposition otherwise is the pipeline's
(`pipeline.transitions.disposition_of`).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pipeline.session.timers import SeqGap, parse_timer, timer_name

# A seq missing this long, with events waiting behind it, is declared lost. Longer than any
# redelivery (a dead worker's messages come back in about 3.5 s; a Redis restart's re-sends in
# about one) and than the event retries (about 6 s).
GAP_TIMEOUT_MS = 20_000


class Arrival(StrEnum):
    """What an arriving seq is to its session (see the module docstring)."""

    NEXT = "next"
    FILLS_GAP = "fills_gap"
    EARLY = "early"
    REDELIVERED = "redelivered"


def arrival(applied_seq: int, logged_seq: int, seq: int) -> Arrival:
    """What `seq` is to a session that applied up to `applied_seq` and logged up to `logged_seq`."""
    if seq <= applied_seq:
        return Arrival.REDELIVERED
    if seq == applied_seq + 1:
        return Arrival.NEXT if logged_seq <= applied_seq else Arrival.FILLS_GAP
    return Arrival.EARLY


def contiguous(applied_seq: int, logged: Iterable[int]) -> list[int]:
    """The logged seqs (ascending) applied now: the unbroken run after `applied_seq`."""
    run: list[int] = []
    expected = applied_seq + 1
    for seq in logged:
        if seq != expected:
            break
        run.append(seq)
        expected += 1
    return run


def awaited(applied_seq: int, logged_seq: int) -> int | None:
    """The seq the session waits for, when events are logged beyond a missing one."""
    return applied_seq + 1 if logged_seq > applied_seq else None


def is_still_missing(applied_seq: int, seq: int) -> bool:
    """Whether a gap timer for `seq` still holds: it is the very next seq to apply (if it came,
    or an earlier gap was skipped meanwhile, the timer changes nothing)."""
    return seq == applied_seq + 1


def declared_lost(missing: int, next_logged: int | None) -> range:
    """The seqs declared lost when the gap timer of `missing` fires, `next_logged` being the lowest
    seq logged beyond it. The whole run of missing seqs below `next_logged` goes at once: each was
    numbered before every event waiting behind the gap, the one that started the timer included,
    so each has been overdue for the whole gap timeout. (One at a time, a failover that lost four
    events of a call in a row held it 80 s.) If `missing` has been logged, nothing is lost."""
    if next_logged is None:
        return range(missing, missing + 1)
    return range(missing, max(missing, next_logged))


def gap_timer(seq: int) -> str:
    """The name of the timer that watches for `seq`."""
    return timer_name(SeqGap(seq))


def gap_of(name: str) -> int | None:
    """The seq a gap timer watches, or None for any other timer."""
    timer = parse_timer(name)
    return timer.seq if isinstance(timer, SeqGap) else None
