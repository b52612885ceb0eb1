"""Turns that used to go unanswered, on the real log: a caller line a superseded sideband
delivered is applied and answered, and a response whose response.done was lost is settled when
its deadline fires. The state stays the fold of the log in applied order."""

from __future__ import annotations

import time
from typing import Any

from models.applied import Applied
from models.records import event_log, session_record
from models.sessions import locked_session
from pipeline.platform.envelope import SendControl
from pipeline.session.state import Phase
from tests.support.calls import admit, deliver, new_session_id, refold, spoken_turns


def _sent(applied: Applied) -> list[str]:
    return [item.control["type"] for item in applied.to_gateway if isinstance(item, SendControl)]


def test_a_caller_line_from_a_superseded_generation_is_applied_and_answered(database: Any) -> None:
    session_id = new_session_id()
    admit(session_id)
    events = spoken_turns(1)
    deliver(session_id, 1, events[0])
    deliver(session_id, 2, events[1])
    # A peer takes the call over while the first gateway is frozen (generation 2)...
    with locked_session(session_id) as session:
        session.take_over("gw-peer", time.time())
        assert session.state.generation == 2
    # ...which then wakes and numbers what its socket still held with generation 1.
    stale_speech = deliver(session_id, 3, events[2], generation=1)
    stale_line = deliver(session_id, 4, events[3], generation=1)

    assert stale_speech.dispositions == [(3, "late")]
    assert stale_line.dispositions == [(4, "applied")]
    assert _sent(stale_line) == ["response.create"]
    [said] = [t for t in session_record(session_id)["transcript"] if t["role"] == "user"]
    assert (said["text"], said["late"]) == ("caller line 0", False)
    with locked_session(session_id) as session:
        assert session.state.phase is Phase.RESPONDING
        assert session.state == refold(session_id)


def test_a_lost_response_done_is_settled_when_its_deadline_fires(database: Any) -> None:
    session_id = new_session_id()
    admit(session_id)
    turns = spoken_turns(2)
    # Turn 0's response.done (index 6) never comes; the caller speaks again after it.
    events = [*turns[:6], *turns[7:9]]
    timers = []
    for seq, event in enumerate(events, start=1):
        timers += deliver(session_id, seq, event).timers
    [deadline] = [timer for timer in timers if timer.name.startswith("response_deadline:")]
    with locked_session(session_id) as session:
        assert session.state.realtime.queued_input_item_id == "item_u1"  # the caller's next line waits

    with locked_session(session_id) as session:
        fired = session.fire_timer(deadline.name, time.time())

    assert [i.code for i in fired.incidents] == ["response_lost"]
    assert _sent(fired) == ["response.create"]
    assert [timer.name for timer in fired.timers] == ["response_deadline:2"]
    record = session_record(session_id)
    [lost] = [i for i in record["incidents"] if i["code"] == "response_lost"]
    assert lost["context"]["input_item_id"] == "item_u0"
    assert lost["context"]["response_id"] == "resp_0"
    with locked_session(session_id) as session:
        assert session.state.phase is Phase.RESPONDING
        assert (
            session.state.realtime.turn is not None
            and session.state.realtime.turn.context.input_item_id == "item_u1"
        )
        assert session.state == refold(session_id)
        pending = session.execute(
            "SELECT name FROM session_timers WHERE session_id = %s ORDER BY name", (session_id,)
        ).fetchall()
    assert [row[0] for row in pending if row[0].startswith("response_deadline:")] == ["response_deadline:2"]
    # The same firing again (the sweeper racing its delayed message) changes nothing.
    with locked_session(session_id) as session:
        again = session.fire_timer(deadline.name, time.time())
    assert again.to_gateway == [] and again.incidents == []


def test_a_response_that_came_cancels_its_deadline_and_the_late_firing_logs_nothing(database: Any) -> None:
    """The turn's response.done deletes its deadline's row; the delayed message that fires a
    minute later finds nothing pending, and takes no place in the log."""
    session_id = new_session_id()
    admit(session_id)
    timers = []
    for seq, event in enumerate(spoken_turns(1), start=1):
        timers += deliver(session_id, seq, event).timers
    [deadline] = [timer for timer in timers if timer.name.startswith("response_deadline:")]
    logged_before = len(event_log(session_id))
    with locked_session(session_id) as session:
        pending = session.execute(
            "SELECT count(*) FROM session_timers WHERE session_id = %s AND name = %s",
            (session_id, deadline.name),
        ).fetchone()[0]
        fired = session.fire_timer(deadline.name, time.time())
    assert pending == 0
    assert fired.dispositions == [] and fired.to_gateway == []
    assert len(event_log(session_id)) == logged_before
