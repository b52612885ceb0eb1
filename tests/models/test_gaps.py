"""A seq that never arrives: after the gap timeout it is logged lost and the events waiting
behind it are applied; if it arrives after all, it is applied then. The state stays the fold of
the log in applied order."""

from __future__ import annotations

import time
from typing import Any

from models.records import event_log, session_record
from models.sessions import locked_session
from pipeline.session.sequencer import GAP_TIMEOUT_MS
from pipeline.session.state import Phase
from tests.support.calls import admit, deliver, new_session_id, refold, spoken_turns


def test_a_missing_seq_is_declared_lost_after_the_timeout_and_applied_if_it_comes(database: Any) -> None:
    session_id = new_session_id()
    admit(session_id)
    events = spoken_turns(2)  # connected, updated, then two turns of five events
    for seq, event in enumerate(events[:2], start=1):
        deliver(session_id, seq, event)
    # seq 3 (the caller's speech_started) never comes; the rest of the turn waits behind it.
    waiting = deliver(session_id, 4, events[3])
    assert waiting.dispositions == [(4, "pending")]
    [timer] = waiting.timers
    assert (timer.name, timer.delay_ms) == ("seq_gap:3", GAP_TIMEOUT_MS)
    assert deliver(session_id, 5, events[4]).timers == []  # one timer per gap

    with locked_session(session_id) as session:
        skipped = session.fire_timer("seq_gap:3", time.time())
    assert skipped.dispositions == [(3, "lost"), (4, "applied"), (5, "applied")]
    record = session_record(session_id)
    assert record["applied_seq"] == 5
    assert [i["code"] for i in record["incidents"]] == ["event_lost"]
    with locked_session(session_id) as session:
        assert session.state.phase is Phase.RESPONDING  # the caller's final was answered
        assert session.state == refold(session_id)

    # The lost seq arrives after all: recorded as arrived late, acting on nothing (a stale
    # speech_started must not cancel the answer now running); a second copy changes nothing.
    with locked_session(session_id) as session:
        before = session.state
    late = deliver(session_id, 3, events[2])
    assert late.dispositions == [(3, "applied")] and late.to_gateway == []
    assert deliver(session_id, 3, events[2]).dispositions == []
    with locked_session(session_id) as session:
        assert session.state == before == refold(session_id)
    [row] = [e for e in event_log(session_id) if e["seq"] == 3]
    assert row["kind"] == "switchboard.arrived_late" and row["payload"]["event"] == events[2]


def test_missing_seqs_in_a_row_are_declared_lost_by_one_timeout(database: Any) -> None:
    """Three seqs in a row never come (a failover lost their commits): one gap timeout declares
    all three lost, each with its warning, and the events behind them go on; a later gap is
    watched on its own."""
    session_id = new_session_id()
    admit(session_id)
    events = spoken_turns(2)
    for seq, event in enumerate(events[:2], start=1):
        deliver(session_id, seq, event)
    waiting = deliver(session_id, 6, events[5])  # seqs 3, 4 and 5 never come
    assert [timer.name for timer in waiting.timers] == ["seq_gap:3"]
    deliver(session_id, 9, events[8])  # and 8, after 6 and 7 (7 comes late)
    with locked_session(session_id) as session:
        skipped = session.fire_timer("seq_gap:3", time.time())
    assert skipped.dispositions == [(3, "lost"), (4, "lost"), (5, "lost"), (6, "applied")]
    assert [timer.name for timer in skipped.timers] == ["seq_gap:7"]
    filled = deliver(session_id, 7, events[6])
    assert filled.dispositions == [(7, "applied")], filled
    assert [timer.name for timer in filled.timers] == ["seq_gap:8"], filled
    with locked_session(session_id) as session:
        assert session.fire_timer("seq_gap:8", time.time()).dispositions == [(8, "lost"), (9, "applied")]
    record = session_record(session_id)
    assert record["applied_seq"] == 9
    lost = [i["context"]["seq"] for i in record["incidents"] if i["code"] == "event_lost"]
    assert lost == [3, 4, 5, 8]
    with locked_session(session_id) as session:
        assert session.state == refold(session_id)


def test_a_caller_line_that_arrives_after_its_gap_lands_in_the_transcript(database: Any) -> None:
    session_id = new_session_id()
    admit(session_id)
    events = spoken_turns(1)
    deliver(session_id, 1, events[0])
    deliver(session_id, 2, events[1])
    deliver(session_id, 3, events[2])
    deliver(session_id, 5, events[4])  # the caller's final (seq 4) is missing
    with locked_session(session_id) as session:
        session.fire_timer("seq_gap:4", time.time())
    deliver(session_id, 4, events[3])
    said = [t for t in session_record(session_id)["transcript"] if t["role"] == "user"]
    assert [(t["text"], t["seq"], t["late"]) for t in said] == [("caller line 0", 4, True)]


def test_a_gap_filled_in_time_is_not_skipped(database: Any) -> None:
    session_id = new_session_id()
    admit(session_id)
    events = spoken_turns(1)
    deliver(session_id, 1, events[0])
    deliver(session_id, 3, events[2])
    deliver(session_id, 2, events[1])
    with locked_session(session_id) as session:
        assert session.fire_timer("seq_gap:2", time.time()).dispositions == []
    assert [e["disposition"] for e in event_log(session_id) if e["seq"]] == ["applied"] * 3
