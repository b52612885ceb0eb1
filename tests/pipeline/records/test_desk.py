"""The supervisor's desk, decided without a database: who waits for a person and in what order,
what a line is doing, and what a call that never connected reads as."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from pipeline.call.errors import MalformedRequest
from pipeline.records.desk import (
    QueuedCall,
    activity,
    call_queue,
    checked_status,
    outcome,
    slow_answers_ms,
)


def _call(
    session_id: str, state: dict[str, Any], *, since: float | None = None, troubles: int = 0
) -> QueuedCall:
    return QueuedCall(
        session_id=session_id,
        status="listening",
        state=state,
        created_at=1_000.0,
        caller="+15550100",
        route_id=None,
        attention_since=since,
        troubles=troubles,
        last_trouble="response_lost" if troubles else None,
    )


def test_the_caller_who_has_waited_longest_is_first_and_a_taken_line_is_not_waiting() -> None:
    """Waiting callers come longest first, with reason, wait and limit; a line a person holds is
    held, not waiting."""
    asking = {"attention": {"number": 1, "reason": "wants a refund", "wait_s": 120.0}, "taken_by": None}
    queue = call_queue(
        [
            _call("sess_recent", asking, since=1_090.0),
            _call("sess_long", asking, since=1_030.0),
            _call("sess_taken", {**asking, "taken_by": {"id": "dana", "name": "Dana"}}),
            _call("sess_held", {"held": True, "taken_by": None}),
        ],
        now=1_100.0,
    )
    assert [w["session_id"] for w in queue["waiting"]] == ["sess_long", "sess_recent"]
    longest = queue["waiting"][0]
    assert (longest["reason"], longest["waited_s"], longest["wait_limit_s"]) == (
        "wants a refund",
        70.0,
        120.0,
    )
    assert {h["session_id"]: h["activity"]["what"] for h in queue["held"]} == {
        "sess_taken": "taken over",
        "sess_held": "held",
    }
    assert queue["struggling"] == []


def test_calls_in_trouble_come_most_troubled_first() -> None:
    """A call with incidents lately is struggling; the most troubled is first."""
    queue = call_queue([_call("sess_one", {}, troubles=1), _call("sess_three", {}, troubles=3)], now=1_100.0)
    assert [s["session_id"] for s in queue["struggling"]] == ["sess_three", "sess_one"]
    assert queue["struggling"][0]["last_trouble"] == "response_lost"


def test_a_line_reads_as_what_is_happening_on_it() -> None:
    """The line's activity names the person who holds it, a running tool, the agent speaking."""
    assert activity("listening", {"taken_by": {"id": "d1", "name": "Dana"}}) == {
        "what": "taken over",
        "by": "Dana",
    }
    assert activity("responding", {"chain": {"pending": {"call_id": "c"}}})["what"] == "running a tool"
    assert activity("responding", {"chain": {"pending": None}})["what"] == "agent speaking"
    assert activity("listening", {"held": True})["what"] == "held"
    assert activity("failed", {"held": True})["what"] == "ended"


def test_a_line_reads_the_same_whichever_release_stored_its_state() -> None:
    """The Realtime part of a stored state, at the top (as this release and the one before store
    it) or under `realtime` (as the release after does), says the same of the line."""
    running = {"pending": {"call_id": "c"}}
    turn = {"context": {"instructions": "Be brief.", "max_output_tokens": 100, "input_item_id": "i"}}
    assert activity("responding", {"realtime": {"chain": running}})["what"] == "running a tool"
    assert (
        activity("listening", {"realtime": {"turn": turn, "chain": {"pending": None}}})["what"]
        == "agent speaking"
    )
    assert activity("listening", {"turn": turn})["what"] == "agent speaking"
    assert (
        activity("listening", {"realtime": {"turn": None, "chain": {"pending": None}}})["what"] == "listening"
    )


def test_a_session_no_call_reached_reads_as_not_connected_not_as_a_failure() -> None:
    """Nobody connected it in time: "not connected"; a connected call keeps its end reason."""
    assert outcome("failed", "admission_timeout", None) == "not connected"
    assert outcome("ended", "caller_hung_up", "rtc_1") == "caller_hung_up"
    assert outcome("listening", None, "rtc_1") is None


def test_a_call_whose_callers_wait_too_long_for_its_answers_struggles_and_says_how_long() -> None:
    """The median of the last three measured turns over 1.5 s makes a call struggle, slowest
    first after the troubled; one slow answer among quick ones does not, nor do old slow ones."""

    def measured(session_id: str, *waits: int, troubles: int = 0) -> QueuedCall:
        return replace(_call(session_id, {}, troubles=troubles), recent_heard_ms=waits)

    queue = call_queue(
        [
            measured("sess_slow", 450, 2_100, 2_300),
            measured("sess_slower", 3_200, 2_900, 400),
            measured("sess_one_slow", 450, 5_000, 500),
            measured("sess_recovered", 4_000, 4_000, 600, 500, 450),
            measured("sess_quick", 450, 470, 520),
            measured("sess_troubled", 450, troubles=1),
        ],
        now=1_100.0,
    )
    struggling = {s["session_id"]: s for s in queue["struggling"]}
    assert [s["session_id"] for s in queue["struggling"]] == ["sess_troubled", "sess_slower", "sess_slow"]
    assert (struggling["sess_slow"]["slow_answers_ms"], struggling["sess_slow"]["why"]) == (
        2_100,
        ["slow answers: 2.1 s"],
    )
    assert struggling["sess_troubled"]["why"] == ["response lost"]
    assert struggling["sess_troubled"]["slow_answers_ms"] is None
    assert (
        slow_answers_ms([]) is None and slow_answers_ms([1_500]) is None and slow_answers_ms([1_501]) == 1_501
    )


@pytest.mark.parametrize("asked", ["", "live", "not_connected", "listening", "ended", "failed"])
def test_a_known_status_filter_is_taken(asked: str) -> None:
    assert checked_status(asked) == asked


@pytest.mark.parametrize("asked", ["bogus", "LIVE", "end", "ended,failed"])
def test_an_unknown_status_filter_is_refused_naming_the_known_ones(asked: str) -> None:
    """An empty page would read as "no such calls": a status nobody has is a typed 422."""
    with pytest.raises(MalformedRequest, match=r"status must be one of .*listening.*not_connected"):
        checked_status(asked)
