"""The order of a session's numbered events, decided without a database (DESIGN invariant 2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.session import sequencer
from pipeline.session.sequencer import Arrival
from pipeline.session.state import Phase, SessionState


def test_the_next_seq_with_nothing_waiting_is_applied_at_once() -> None:
    """applied 4, logged 4: seq 5 is NEXT."""
    assert sequencer.arrival(4, 4, 5) is Arrival.NEXT


def test_the_next_seq_with_later_ones_logged_fills_the_gap() -> None:
    """applied 4, logged 7: seq 5 fills the gap and the run after it is drained."""
    assert sequencer.arrival(4, 7, 5) is Arrival.FILLS_GAP


def test_a_seq_beyond_the_next_is_early() -> None:
    """applied 4: seq 6 (or 40) waits for 5."""
    assert sequencer.arrival(4, 4, 6) is Arrival.EARLY
    assert sequencer.arrival(4, 9, 40) is Arrival.EARLY


@pytest.mark.parametrize("seq", [1, 3, 4])
def test_a_seq_at_or_below_applied_is_redelivered(seq: int) -> None:
    """A seq already applied (or declared lost) changes nothing on arrival."""
    assert sequencer.arrival(4, 9, seq) is Arrival.REDELIVERED


def test_the_contiguous_run_after_applied_is_applied_and_stops_at_a_hole() -> None:
    """Logged 5, 6, 8 after applied 4: 5 and 6 are applied; 8 waits for 7."""
    assert sequencer.contiguous(4, [5, 6, 8]) == [5, 6]
    assert sequencer.contiguous(4, [6, 7]) == []


def test_the_awaited_seq_is_the_one_after_applied_while_later_ones_wait() -> None:
    """With events logged beyond applied, the session waits for applied + 1; else for none."""
    assert sequencer.awaited(4, 8) == 5
    assert sequencer.awaited(4, 4) is None


def test_a_gap_timer_holds_only_for_the_seq_still_awaited() -> None:
    """The gap of seq 5 fires into a session at 4 (still missing), not one at 5 or 6."""
    assert sequencer.is_still_missing(4, 5)
    assert not sequencer.is_still_missing(5, 5)
    assert not sequencer.is_still_missing(6, 5)


def test_a_run_of_missing_seqs_is_declared_lost_together() -> None:
    """Seqs 5, 6 and 7 missing with 8 waiting: all three go when the gap of 5 fires (each was
    numbered before 8, which started the timer); 5 logged meanwhile loses nothing."""
    assert list(sequencer.declared_lost(5, 8)) == [5, 6, 7]
    assert list(sequencer.declared_lost(5, 6)) == [5]
    assert list(sequencer.declared_lost(5, 5)) == []
    assert list(sequencer.declared_lost(5, None)) == [5]


def test_gap_timers_are_named_by_their_seq() -> None:
    """The timer name carries the seq it watches; other timers are no gap."""
    assert sequencer.gap_of(sequencer.gap_timer(12)) == 12
    assert sequencer.gap_of("admission_timeout") is None


@given(st.permutations(list(range(1, 21))), st.lists(st.integers(1, 20), max_size=20))
def test_any_arrival_order_with_redeliveries_applies_each_seq_once_in_order(
    order: list[int], redelivered: list[int]
) -> None:
    """Driving the sequencer with the seqs 1..20 in any order, some delivered again, applies
    every seq exactly once and in ascending order — what the log does with them."""
    applied_seq = logged_seq = 0
    logged: set[int] = set()
    applied: list[int] = []
    for seq in [*order, *redelivered]:
        where = sequencer.arrival(applied_seq, logged_seq, seq)
        if where is Arrival.REDELIVERED:
            continue
        logged.add(seq)
        logged_seq = max(logged_seq, seq)
        run = sequencer.contiguous(applied_seq, sorted(s for s in logged if s > applied_seq))
        applied += run
        if run:
            applied_seq = run[-1]
    assert applied == list(range(1, 21))


def test_evolve_refuses_a_field_that_does_not_exist() -> None:
    """A misspelt field raises at once (it used to keep the old value silently)."""
    with pytest.raises(ValueError, match="phse"):
        SessionState().evolve(phse=Phase.ENDED)


def test_evolve_refuses_a_value_of_the_wrong_type() -> None:
    """A value that is not of the field's type raises at once (it used to be stored, and the
    next load of the session failed)."""
    with pytest.raises(ValueError):
        SessionState().evolve(generation="second")
    with pytest.raises(ValueError):
        SessionState().with_realtime(turn=5)
    assert SessionState().evolve(phase=Phase.LISTENING).phase is Phase.LISTENING
