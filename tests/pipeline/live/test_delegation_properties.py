"""DESIGN invariant 7 on Live, over random sequences (hypothesis): every delegation Switchboard
takes up gets exactly one terminal commentary — whatever its handler's outcome, its settle
window, its deadline, holds, a lost sideband, delegations repeated or out of order — unless the
call ends first, when it gets none and its running step is marked interrupted."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.live import delegation
from pipeline.live.controls import LiveAppend
from pipeline.live.tasks import settle_timer
from pipeline.session.state import DelegationStatus, SessionState
from pipeline.session.step import InterruptToolStep, RefuseToolStep, RequestToolStep, Step
from tests.pipeline import events as ev
from tests.pipeline import live_calls as lc

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)
_IDS = st.sampled_from([f"D{index}" for index in range(4)])
_OFFSETS = st.integers(0, 40).map(lambda words: words * lc.WORD_MS)
_STATUSES = st.sampled_from(["succeeded", "succeeded", "refused", "failed", "timed_out", "cancelled"])

# A lost sideband and its return are resolved against the state they happen in (their timer
# and generation): these markers stand for them.
DROP = {"type": "test.drop"}
BACK = {"type": "test.back"}

_SAID = st.builds(lambda start: lc.said("please check order 4417 now", start), _OFFSETS)
_DELEGATED = st.builds(lc.delegated, _IDS, _OFFSETS)
_FINISHED = st.builds(lc.finished, _IDS, _STATUSES)
# Drawn more often than the rest: delegations and their outcomes are what the property is about.
EVENT = st.one_of(
    _DELEGATED,
    _DELEGATED,
    _FINISHED,
    _FINISHED,
    _SAID,
    st.builds(lambda d: ev.timer_fired(settle_timer(d)), _IDS),
    st.builds(lambda d: ev.timer_fired(f"{delegation.DEADLINE_TIMER}{d}"), _IDS),
    st.builds(lc.hold, st.booleans()),
    st.just(DROP),
    st.just(BACK),
)
# The call's end, when there is one, comes last of the random part.
END = st.one_of(st.none(), st.just(ev.end_requested()), st.just(lc.closed("remote_hangup")))


def _resolved(state: SessionState, raw: dict[str, Any]) -> list[dict[str, Any]]:
    if raw is DROP:
        return [] if state.sideband_down else [ev.sideband_closed(1011)]
    if raw is BACK:
        if not state.sideband_down:
            return []
        return [ev.timer_fired(f"sideband_reconnect:{state.generation}"), ev.sideband_connected(lc.LIVE_ID)]
    return [raw]


def _drain(state: SessionState) -> list[dict[str, Any]]:
    """What settles everything open: the line given back, the sideband back, each waiting task's
    window over, each running handler's outcome in."""
    events: list[dict[str, Any]] = []
    if state.held:
        events.append(lc.hold(False))
    events += _resolved(state, BACK)
    for open_delegation in state.live.open if state.live is not None else ():
        if open_delegation.status is DelegationStatus.SETTLING:
            events.append(ev.timer_fired(settle_timer(open_delegation.id)))
        events.append(lc.finished(open_delegation.id))
    return events


def _commentaries(step: Step) -> list[LiveAppend]:
    return [c for c in step.controls if isinstance(c, LiveAppend) and c.type == "session.commentary.append"]


@PROPERTY_SETTINGS
@given(st.lists(EVENT, min_size=10, max_size=60), END)
# A delegation answered while the line was held, then the line given back twice: said once.
@example(
    tail=[lc.delegated("D1", 0), lc.hold(True), lc.finished("D1"), lc.hold(False), lc.hold(False)],
    end=None,
)
# The same delegation again after its answer (a provider repeating it): not taken up twice.
@example(
    tail=[
        lc.said("check order 4417", 0),
        lc.delegated("D1", 200),
        lc.finished("D1"),
        lc.delegated("D1", 200),
    ],
    end=None,
)
# An answer decided while no sideband listened, then the call ended before it came back.
@example(tail=[lc.delegated("D1", 0), DROP, lc.finished("D1")], end=ev.end_requested())
def test_every_delegation_taken_up_gets_exactly_one_terminal_commentary(
    tail: list[dict[str, Any]], end: dict[str, Any] | None
) -> None:
    # The caller's words cover the first half of the offsets drawn, so some delegations start at
    # once and others wait for words that may come, or not.
    opening = lc.said(" ".join(["word"] * 20), 0)
    state = ev.fold([*lc.listening(), opening])[0]
    said: Counter[str] = Counter()
    thought: Counter[str] = Counter()
    taken_up: set[str] = set()
    # What was open when the call ended, and which of it the end interrupted.
    open_at_end: dict[str, DelegationStatus] = {}
    interrupted_at_end: set[str] = set()
    pending = [*tail, *([end] if end is not None else [])]
    drained = False
    while pending or not drained:
        if not pending:
            drained = True
            pending = _drain(state)
            continue
        for raw in _resolved(state, pending.pop(0)):
            before = state
            step = ev.step_of(state, raw)
            state = step.state
            for control in step.controls:
                if isinstance(control, LiveAppend) and control.type == "session.thinking.append":
                    assert control.delegation_id is not None
                    thought[control.delegation_id] += 1
                    taken_up.add(control.delegation_id)
            for effect in step.effects:
                if isinstance(effect, RefuseToolStep):
                    taken_up.add(effect.call_id)
            if state.is_terminal and not before.is_terminal:
                assert before.live is not None
                open_at_end = {d.id: d.status for d in before.live.open}
                interrupted_at_end = {e.call_id for e in step.effects if isinstance(e, InterruptToolStep)}
            for commentary in _commentaries(step):
                assert commentary.delegation_id in taken_up, commentary
                said[commentary.delegation_id] += 1
                # Said only when the line allows it: the call live, its sideband up, not held.
                assert delegation.is_deliverable(before) or delegation.is_deliverable(state), raw
                assert not state.held and not state.sideband_down
            for effect in step.effects:
                if isinstance(effect, RequestToolStep):
                    # A handler runs only for a delegation taken up, once.
                    assert effect.call_id in taken_up
            assert state.live is not None and len(state.live.open) <= delegation.MAXIMUM_OPEN_DELEGATIONS

    assert all(count == 1 for count in thought.values()), thought
    assert all(count <= 1 for count in said.values()), said
    if not state.is_terminal:
        assert {d: said[d] for d in taken_up} == dict.fromkeys(taken_up, 1)
        return
    # The call's end overtook the delegations it found open: none is said, and each one whose
    # handler was still running has its step marked interrupted.
    assert state.live is not None and state.live.open == ()
    assert {d for d in taken_up if said[d] == 0} == set(open_at_end)
    running = {d for d, status in open_at_end.items() if status is DelegationStatus.RUNNING}
    assert running == interrupted_at_end
