"""Compaction invariants over random event sequences (hypothesis): a cycle never starts while a
tool runs, input is queued or a response is owed; never twice without the cooldown; never
prunes without a persisted summary; and every cycle that starts ends exactly once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.realtime.controls import ItemCreate, ItemDelete
from pipeline.session.state import SessionState
from pipeline.session.step import FinishCompaction, SaveCompactionSummary, StartCompaction
from tests.pipeline import events as ev

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)
THRESHOLD = 500
LOOKUP = {"type": "function", "name": "lookup_order", "parameters": {"type": "object", "properties": {}}}

_SPOKEN = st.sampled_from(["resp_1", "resp_2", "resp_3"])
_MAINTENANCE = st.sampled_from(["resp_m1", "resp_m2"])
_NUMBERS = st.sampled_from([1, 1, 2, 3])
_ITEMS = st.sampled_from([f"item_{index}" for index in range(20)])
_TOKENS = st.sampled_from([100, THRESHOLD, 5_000])


def _tool_finished(call_id: str) -> dict[str, Any]:
    outcome = {"status": "succeeded", "result": {"ok": True}, "error": None, "elapsed_ms": 3}
    return {"type": "switchboard.tool_finished", "call_id": call_id, "outcome": outcome}


_CALLS = st.sampled_from(["call_1", "call_2", "call_3"])

EVENT = st.one_of(
    st.builds(ev.user_final, _ITEMS, st.just("Something else.")),
    st.builds(ev.speech_started, _ITEMS),
    st.builds(ev.response_created, _SPOKEN),
    st.builds(lambda r, i: ev.assistant_final(r, i, "Sure."), _SPOKEN, _ITEMS),
    st.builds(
        lambda r, s, t: ev.response_done(r, s, input_tokens=t),
        _SPOKEN,
        st.sampled_from(["completed", "completed", "cancelled"]),
        _TOKENS,
    ),
    st.builds(ev.function_call, _CALLS, _SPOKEN),
    st.builds(_tool_finished, _CALLS),
    st.builds(lambda r, n: ev.response_created(r, metadata=ev.maintenance(n)), _MAINTENANCE, _NUMBERS),
    st.builds(
        lambda r, text: ev.assistant_text_final(r, "item_summary", text),
        _MAINTENANCE,
        st.sampled_from(["Notes: order 4417 shipped.", ""]),
    ),
    st.builds(
        lambda r, n, s: ev.response_done(r, s, metadata=ev.maintenance(n)),
        _MAINTENANCE,
        _NUMBERS,
        st.sampled_from(["completed", "completed", "cancelled", "incomplete"]),
    ),
    st.builds(ev.compaction_requested, st.sampled_from(["req_1", "req_2"])),
    st.builds(ev.compaction_unsaved, _NUMBERS),
    st.builds(lambda n: ev.timer_fired(f"compaction_deadline:{n}"), _NUMBERS),
    st.builds(ev.item_deleted, _ITEMS),
)


def _maintenance_cycle(response_id: str, number: int, status: str) -> list[dict[str, Any]]:
    """A whole maintenance response in order, so that random runs also complete cycles."""
    return [
        ev.response_created(response_id, metadata=ev.maintenance(number)),
        ev.assistant_text_final(response_id, "item_summary", "Notes: order 4417 shipped."),
        ev.response_done(response_id, status, metadata=ev.maintenance(number)),
    ]


def _spoken_turn(item_id: str, response_id: str, tokens: int) -> list[dict[str, Any]]:
    return [
        ev.user_final(item_id, "And then?"),
        ev.response_created(response_id),
        ev.assistant_final(response_id, f"{item_id}_answer", "Then this."),
        ev.response_done(response_id, input_tokens=tokens),
    ]


GROUP = st.one_of(
    st.builds(lambda event: [event], EVENT),
    st.builds(
        _maintenance_cycle,
        _MAINTENANCE,
        _NUMBERS,
        st.sampled_from(["completed", "completed", "completed", "cancelled"]),
    ),
    st.builds(_spoken_turn, _ITEMS, _SPOKEN, _TOKENS),
)


def _prefix(parallel: bool) -> list[dict[str, Any]]:
    """A listening session with five turns behind it: ten known items, over the threshold (its
    model calling tools in parallel, or one at a time)."""
    model = ev.IN_PARALLEL if parallel else None
    events = [*ev.listening(tools=[LOOKUP], limits={"compaction_input_tokens": THRESHOLD}, model=model)]
    for index in range(5):
        events += [
            ev.user_final(f"item_U{index}", "Hello?"),
            ev.response_created(f"resp_p{index}"),
            ev.assistant_final(f"resp_p{index}", f"item_A{index}", "Hi."),
            ev.response_done(f"resp_p{index}", input_tokens=THRESHOLD * 2),
        ]
    return events


def _is_spoken_done(before: SessionState, raw: dict[str, Any]) -> bool:
    response = raw.get("response") or {}
    return (
        raw["type"] == "response.done"
        and not response.get("metadata")
        and response.get("id") not in before.realtime.maintenance_responses
    )


@pytest.mark.parametrize("parallel", [False, True], ids=["one_at_a_time", "in_parallel"])
@PROPERTY_SETTINGS
@given(st.lists(GROUP, max_size=25))
def test_compaction_keeps_its_guards_cooldown_and_summary_rule(
    parallel: bool, groups: list[list[dict[str, Any]]]
) -> None:
    state = SessionState()
    raws = [*_prefix(parallel), *(event for group in groups for event in group)]
    started: Counter[int] = Counter()
    finished: Counter[int] = Counter()
    persisted: set[int] = set()
    spoken_since_finish: int | None = None
    index = 0
    while True:
        if index == len(raws):
            if state.realtime.compaction is None:
                break
            # Drain: the deadline ends whatever cycle is still open.
            raws.append(ev.timer_fired(f"compaction_deadline:{state.realtime.compaction.number}"))
        raw = raws[index]
        index += 1
        before = state
        step = ev.step_of(state, raw)
        state = step.state
        if _is_spoken_done(before, raw) and spoken_since_finish is not None:
            spoken_since_finish += 1
        for effect in step.effects:
            if isinstance(effect, StartCompaction):
                # Never while a tool runs, input is queued, a response is owed, or a cycle runs.
                assert before.realtime.compaction is None
                assert state.realtime.chain.in_flight == ()
                assert state.realtime.queued_input_item_id is None
                assert state.realtime.turn is None
                # Never again before three spoken responses have ended since the last cycle.
                assert spoken_since_finish is None or spoken_since_finish >= 3, spoken_since_finish
                started[effect.number] += 1
            elif isinstance(effect, SaveCompactionSummary):
                persisted.add(effect.number)
            elif isinstance(effect, FinishCompaction):
                finished[effect.number] += 1
                spoken_since_finish = 0
                if effect.reason == "summary_not_persisted":
                    persisted.discard(effect.number)
        prunes = [
            c
            for c in step.controls
            if isinstance(c, ItemDelete) or (isinstance(c, ItemCreate) and c.item.get("role") == "system")
        ]
        if prunes:
            [completed] = [e for e in step.effects if isinstance(e, FinishCompaction)]
            assert completed.status == "completed"
            assert completed.number in persisted, "pruned without a persisted summary"
            assert len([c for c in prunes if isinstance(c, ItemCreate)]) == 1
    assert all(count == 1 for count in started.values()), started
    assert finished == started, (started, finished)
