"""Response deadlines over random, lossy event sequences (hypothesis): whatever the provider's
events that were lost, a response owed is settled by its deadline — the session listens again or
answers the caller's queued input — a deadline for any other request changes nothing, and every
function call is still answered exactly once."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.realtime.controls import ItemCreate, ResponseCreate
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import RecordIncident, RefuseToolStep, RequestToolStep
from tests.pipeline import events as ev
from tests.pipeline.realtime.test_tool_properties import EVENT as TOOL_EVENT
from tests.pipeline.realtime.test_tool_properties import _prefix as tool_prefix
from tests.pipeline.realtime.test_tool_properties import _tool_finished

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)
TURNS = 4


def _turns(turns: int) -> list[dict[str, Any]]:
    """What the provider sends for `turns` spoken turns, in order, nothing lost."""
    events: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        user, response = f"item_U{turn}", f"resp_{turn}"
        events += [
            ev.speech_started(user),
            ev.user_final(user, f"caller line {turn}"),
            ev.response_created(response),
            ev.assistant_final(response, f"item_A{turn}", f"answer {turn}"),
            ev.response_done(response),
        ]
    return events


def _deadline(number: int) -> dict[str, Any]:
    return ev.timer_fired(f"response_deadline:{number}")


# What may also happen at any point: a deadline firing (for any request, current or not), a
# refused cancel or create, a line from the caller the script does not know.
NOISE = st.one_of(
    st.builds(_deadline, st.integers(min_value=1, max_value=TURNS + 2)),
    st.builds(ev.provider_error, st.sampled_from(["response_cancel_not_active"])),
    st.builds(ev.provider_error, st.sampled_from(["conversation_already_has_active_response"])),
    st.builds(ev.user_final, st.just("item_U9"), st.just("Hello?")),
)


@st.composite
def lossy_calls(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A listening session's spoken turns with any of their events lost, and noise anywhere."""
    script = _turns(TURNS)
    kept = draw(st.lists(st.booleans(), min_size=len(script), max_size=len(script)))
    events = [event for event, keep in zip(script, kept, strict=True) if keep]
    for position, noise in draw(st.lists(st.tuples(st.integers(0, len(script)), NOISE), max_size=6)):
        events.insert(min(position, len(events)), noise)
    return [*ev.listening(), *events]


def _is_settled_or_answering(before: SessionState, after: SessionState, controls: tuple[Any, ...]) -> bool:
    """The session listens with nothing owed, or has begun the response its queued input is owed."""
    if after.phase is Phase.LISTENING:
        return after.realtime.turn is None and after.realtime.queued_input_item_id is None
    creates = [c for c in controls if isinstance(c, ResponseCreate)]
    return (
        before.realtime.queued_input_item_id is not None
        and after.realtime.turn is not None
        and after.realtime.turn.context.input_item_id == before.realtime.queued_input_item_id
        and after.realtime.queued_input_item_id is None
        and len(creates) == 1
    )


@PROPERTY_SETTINGS
@given(lossy_calls())
def test_a_deadline_settles_only_the_response_it_was_armed_for(raws: list[dict[str, Any]]) -> None:
    """A deadline for the request a turn still waits on settles it with one response_lost
    incident (listening again, or answering queued input); any other deadline changes nothing."""
    state = SessionState()
    for raw in raws:
        step = ev.step_of(state, raw)
        name = raw.get("name", "") if raw["type"] == "switchboard.timer_fired" else ""
        if name.startswith("response_deadline:"):
            owed = state.realtime.turn is not None and state.realtime.turn.asked == int(name.split(":")[1])
            if owed:
                codes = [e.code for e in step.effects if isinstance(e, RecordIncident)]
                assert codes == ["response_lost"]
                assert _is_settled_or_answering(state, step.state, step.controls)
            else:
                assert step.state == state and step.controls == () and step.effects == ()
        state = step.state


@PROPERTY_SETTINGS
@given(lossy_calls())
def test_a_session_with_a_response_owed_always_gets_back_to_listening(raws: list[dict[str, Any]]) -> None:
    """Whatever was lost, firing the deadline of the response owed (and then of the one begun for
    queued input) brings the session back to listening with nothing owed or queued."""
    state = ev.state_after(raws)
    for _ in range(2):
        if state.realtime.turn is None:
            break
        state = ev.step_of(state, _deadline(state.realtime.turn.asked)).state

    assert state.phase is Phase.LISTENING
    assert state.realtime.turn is None and state.realtime.queued_input_item_id is None


TOOL_TAIL = st.lists(st.one_of(TOOL_EVENT, st.builds(_deadline, st.integers(1, 8))), max_size=40)


@PROPERTY_SETTINGS
@pytest.mark.parametrize("parallel", [False, True], ids=["one_at_a_time", "in_parallel"])
@given(TOOL_TAIL)
def test_every_function_call_is_answered_once_whatever_deadline_passes(
    parallel: bool, tail: list[dict[str, Any]]
) -> None:
    """With response deadlines passing anywhere among calls, outcomes and responses, every call
    taken up gets exactly one output, and the deadlines alone (once each running tool reports)
    bring the session back to listening."""
    state = SessionState()
    answered: Counter[str] = Counter()
    taken_up: set[str] = set()

    def apply(raw: dict[str, Any]) -> SessionState:
        step = ev.step_of(state, raw)
        for effect in step.effects:
            if isinstance(effect, RequestToolStep | RefuseToolStep):
                taken_up.add(effect.call_id)
        for control in step.controls:
            if isinstance(control, ItemCreate) and control.item.get("type") == "function_call_output":
                answered[control.item["call_id"]] += 1
                # A call refused as parallel is answered at once, with no durable step.
                taken_up.add(control.item["call_id"])
                assert json.loads(control.item["output"])["call_id"] == control.item["call_id"]
        return step.state

    for raw in [*tool_prefix(parallel), *tail]:
        state = apply(raw)
    # Drain with deadlines instead of response.done: a lost response must not strand the chain.
    for _ in range(6):
        turn = state.realtime.turn
        if state.is_terminal or turn is None:
            break
        running = [call for call in state.realtime.chain.in_flight if call.output is None]
        if running and state.realtime.chain.response_completed:
            for call in running:
                state = apply(_tool_finished(call.call_id))
        else:
            state = apply(_deadline(turn.asked))

    assert all(count == 1 for count in answered.values()), answered
    if not state.is_terminal:
        assert state.realtime.turn is None and state.phase is Phase.LISTENING
        assert taken_up == set(answered), (taken_up, answered)
