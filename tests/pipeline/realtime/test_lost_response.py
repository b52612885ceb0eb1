"""A response whose `response.done` never comes: its deadline settles the turn, and a cancel the
provider finds nothing to act on settles it at once — so no lost event silences a call."""

from __future__ import annotations

import json
from typing import Any

from pipeline.call.limits import RESPONSE_DEADLINE_MS
from pipeline.realtime.controls import ItemCreate, ResponseCreate
from pipeline.realtime.turns import response_deadline_ms
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import CancelTool, RecordIncident, ScheduleTimer, Step
from tests.pipeline import events as ev

LOOKUP = {"type": "function", "name": "lookup_order", "parameters": {"type": "object"}}


def _asked(*raws: dict[str, Any], tools: bool = False) -> SessionState:
    """A listening session (with the lookup tool when asked) after the caller's first line."""
    prefix = ev.listening(tools=[LOOKUP]) if tools else ev.listening()
    return ev.state_after([*prefix, ev.user_final("item_U1", "Where is my order?"), *raws])


def _deadline(state: SessionState) -> dict[str, Any]:
    """The firing of the deadline armed for the request the turn waits on."""
    assert state.realtime.turn is not None
    return ev.timer_fired(f"response_deadline:{state.realtime.turn.asked}")


def _incidents(step: Step) -> list[RecordIncident]:
    return [e for e in step.effects if isinstance(e, RecordIncident)]


def _timers(step: Step) -> list[ScheduleTimer]:
    return [e for e in step.effects if isinstance(e, ScheduleTimer)]


def _tool_finished(call_id: str = "call_1") -> dict[str, Any]:
    outcome = {"status": "succeeded", "result": {"eta": "Friday"}, "error": None, "elapsed_ms": 3.0}
    return {"type": "switchboard.tool_finished", "call_id": call_id, "outcome": outcome}


def _outputs(step: Step) -> list[str]:
    return [
        json.loads(c.item["output"])["call_id"]
        for c in step.controls
        if isinstance(c, ItemCreate) and c.item.get("type") == "function_call_output"
    ]


# ── the response deadline ────────────────────────────────────────────────────────────────


def test_a_response_whose_done_never_comes_is_settled_at_its_deadline() -> None:
    """The deadline of a response still owed closes its turn with a response_lost warning, and
    the session listens again."""
    state = _asked(ev.response_created("resp_1"))

    step = ev.step_of(state, _deadline(state))

    assert step.state.phase is Phase.LISTENING
    assert step.state.realtime.turn is None
    assert step.controls == ()
    [incident] = _incidents(step)
    assert (incident.code, incident.severity) == ("response_lost", "warning")
    assert incident.context["input_item_id"] == "item_U1"
    assert incident.context["response_id"] == "resp_1"


def test_a_response_that_never_even_started_is_settled_too() -> None:
    """A request whose response.created was lost as well is settled by the same deadline."""
    state = _asked()

    step = ev.step_of(state, _deadline(state))

    assert (step.state.phase, step.state.realtime.turn) == (Phase.LISTENING, None)
    assert [i.context["response_id"] for i in _incidents(step)] == [None]


def test_queued_input_is_answered_as_soon_as_the_lost_response_is_settled() -> None:
    """What the caller said while the lost response was owed gets its own response at once,
    under a new deadline."""
    state = _asked(ev.response_created("resp_1"), ev.user_final("item_U2", "Hello? Are you there?"))
    assert state.realtime.queued_input_item_id == "item_U2"

    step = ev.step_of(state, _deadline(state))

    [create] = step.controls
    assert isinstance(create, ResponseCreate)
    assert step.state.phase is Phase.RESPONDING
    assert (
        step.state.realtime.turn is not None and step.state.realtime.turn.context.input_item_id == "item_U2"
    )
    assert step.state.realtime.queued_input_item_id is None
    assert _timers(step) == [
        ScheduleTimer(name="response_deadline:2", delay_ms=RESPONSE_DEADLINE_MS, swept_only=True)
    ]


def test_a_deadline_for_an_earlier_request_changes_nothing() -> None:
    """A deadline whose response came back, or that a later request replaced, finds nothing owed."""
    answered = _asked(ev.response_created("resp_1"), ev.response_done("resp_1"))
    next_turn = ev.step_of(answered, ev.user_final("item_U2", "And my refund?")).state

    for state in (answered, next_turn):
        step = ev.step_of(state, ev.timer_fired("response_deadline:1"))
        assert step.state == state
        assert step.controls == () and step.effects == ()


def test_a_deadline_after_the_session_ended_changes_nothing() -> None:
    """An ended session's response deadline does nothing."""
    state = _asked(ev.response_created("resp_1"), ev.end_requested())

    step = ev.step_of(state, ev.timer_fired("response_deadline:1"))

    assert step.state == state and step.controls == () and step.effects == ()


def test_the_deadline_grows_with_the_longest_speech_a_response_may_carry() -> None:
    """A response that may speak 4,096 tokens gets that speech's length as its deadline, and the
    default cap gets the floor."""
    unbounded = ev.state_after(
        [
            *ev.listening(limits={"max_output_tokens": "inf", "max_session_seconds": 900}),
            ev.user_final("item_U1", "Tell me everything."),
        ]
    )
    default = _asked()
    assert unbounded.realtime.turn is not None and default.realtime.turn is not None
    assert response_deadline_ms(unbounded.realtime.turn.context) == 204_800
    assert response_deadline_ms(default.realtime.turn.context) == RESPONSE_DEADLINE_MS


# ── every request for a response arms its own deadline ──────────────────────────────────


def test_a_refused_request_asked_again_arms_a_new_deadline() -> None:
    """A response.create refused while another response ran is asked again under a new deadline."""
    state = _asked(ev.provider_error("conversation_already_has_active_response"))

    step = ev.step_of(state, ev.response_done("resp_other", "cancelled"))

    assert [type(c) for c in step.controls] == [ResponseCreate]
    assert _timers(step) == [
        ScheduleTimer(name="response_deadline:2", delay_ms=RESPONSE_DEADLINE_MS, swept_only=True)
    ]
    assert ev.step_of(step.state, ev.timer_fired("response_deadline:1")).state == step.state


def test_a_reconnects_request_asked_again_arms_a_new_deadline() -> None:
    """The response a re-opened sideband asks for again has its own deadline, which settles it."""
    state = _asked(ev.response_created("resp_1"))
    state = ev.step_of(state, ev.sideband_closed(1011, "dropped")).state
    state = ev.step_of(state, ev.timer_fired("sideband_reconnect:2")).state

    back = ev.step_of(state, ev.sideband_connected(), generation=2)

    assert [c.type for c in back.controls] == ["response.cancel", "response.create"]
    assert _timers(back) == [
        ScheduleTimer(name="response_deadline:2", delay_ms=RESPONSE_DEADLINE_MS, swept_only=True)
    ]
    settled = ev.step_of(back.state, ev.timer_fired("response_deadline:2"))
    assert (settled.state.phase, settled.state.realtime.turn) == (Phase.LISTENING, None)


def test_a_tool_continuation_arms_a_new_deadline() -> None:
    """The response that speaks a tool's outcome is a new request, with its own deadline."""
    state = _asked(
        ev.response_created("resp_1"),
        ev.function_call("call_1", "resp_1"),
        ev.response_done("resp_1"),
        tools=True,
    )

    step = ev.step_of(state, _tool_finished())

    assert [type(c) for c in step.controls] == [ItemCreate, ResponseCreate]
    assert _timers(step) == [
        ScheduleTimer(name="response_deadline:2", delay_ms=RESPONSE_DEADLINE_MS, swept_only=True)
    ]


def test_the_limit_report_arms_a_new_deadline() -> None:
    """The tool-free response that reports after the call limit is a new request, with its own
    deadline."""
    state = _asked(ev.response_created("resp_1"))
    assert state.realtime.turn is not None
    limited = state.with_realtime(chain=state.realtime.chain.model_copy(update={"limit_refused": True}))

    step = ev.step_of(limited, ev.response_done("resp_1"))

    [create] = step.controls
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.tool_choice == "none"
    assert _timers(step) == [
        ScheduleTimer(name="response_deadline:2", delay_ms=RESPONSE_DEADLINE_MS, swept_only=True)
    ]


# ── tools: every function call still gets exactly one output ─────────────────────────────


def test_the_deadline_never_settles_a_turn_waiting_on_a_running_tool() -> None:
    """A turn whose response is done and that waits on a running tool (bounded by the tool's own
    deadline) is left alone by the response deadline."""
    state = _asked(
        ev.response_created("resp_1"),
        ev.function_call("call_1", "resp_1"),
        ev.response_done("resp_1"),
        tools=True,
    )

    step = ev.step_of(state, ev.timer_fired("response_deadline:1"))

    assert step.state == state and step.controls == () and step.effects == ()


def test_a_lost_response_with_its_tool_running_waits_for_the_tool_and_answers_it_once() -> None:
    """A response lost while its tool runs leaves the tool running, and its outcome is delivered
    once and spoken."""
    state = _asked(ev.response_created("resp_1"), ev.function_call("call_1", "resp_1"), tools=True)

    lost = ev.step_of(state, _deadline(state))

    assert [i.code for i in _incidents(lost)] == ["response_lost"]
    assert lost.controls == ()
    assert not any(isinstance(e, CancelTool) for e in lost.effects)
    assert lost.state.phase is Phase.RESPONDING and lost.state.realtime.chain.pending is not None
    finished = ev.step_of(lost.state, _tool_finished())
    assert _outputs(finished) == ["call_1"]
    assert [type(c) for c in finished.controls] == [ItemCreate, ResponseCreate]


def test_a_lost_response_whose_tool_had_finished_delivers_the_outcome_at_once() -> None:
    """An outcome that was waiting for the lost response.done goes out when the deadline passes."""
    state = _asked(
        ev.response_created("resp_1"), ev.function_call("call_1", "resp_1"), _tool_finished(), tools=True
    )

    step = ev.step_of(state, _deadline(state))

    assert _outputs(step) == ["call_1"]
    assert [type(c) for c in step.controls] == [ItemCreate, ResponseCreate]
    assert _timers(step) == [
        ScheduleTimer(name="response_deadline:2", delay_ms=RESPONSE_DEADLINE_MS, swept_only=True)
    ]


# ── a cancel that finds no active response ───────────────────────────────────────────────


def test_a_barge_in_cancel_refused_as_not_active_settles_the_turn_at_once() -> None:
    """Switchboard's barge-in cancel refused as response_cancel_not_active closes the turn at once
    and answers the caller's new line."""
    state = _asked(
        ev.response_created("resp_1"),
        ev.speech_started("item_U2"),
        ev.user_final("item_U2", "Sorry, one more thing"),
    )
    assert state.realtime.turn is not None and state.realtime.turn.cancel_sent

    step = ev.step_of(state, ev.provider_error("response_cancel_not_active"))

    [create] = step.controls
    assert isinstance(create, ResponseCreate)
    assert (
        step.state.realtime.turn is not None and step.state.realtime.turn.context.input_item_id == "item_U2"
    )
    assert not step.state.realtime.turn.cancel_sent
    assert [i.code for i in _incidents(step)] == ["provider_response_cancel_not_active"]


def test_a_refused_cancel_with_nothing_queued_returns_the_session_to_listening() -> None:
    """Without queued input, the settled turn leaves the session listening."""
    state = _asked(ev.response_created("resp_1"), ev.speech_started("item_U2"))

    step = ev.step_of(state, ev.provider_error("response_cancel_not_active"))

    assert (step.state.phase, step.state.realtime.turn, step.controls) == (Phase.LISTENING, None, ())


def test_a_cancel_not_active_that_answers_no_cancel_of_this_turn_changes_nothing() -> None:
    """A response_cancel_not_active that answers no cancel of the current turn's response is only
    recorded."""
    never_cancelled = _asked(ev.response_created("resp_1"))
    earlier_turn = _asked(
        ev.response_created("resp_1"),
        ev.speech_started("item_U2"),
        ev.user_final("item_U2", "Wait"),
        ev.response_done("resp_1", "cancelled"),
    )
    assert (
        earlier_turn.realtime.turn is not None
        and earlier_turn.realtime.turn.context.input_item_id == "item_U2"
    )

    for state in (never_cancelled, earlier_turn):
        step = ev.step_of(state, ev.provider_error("response_cancel_not_active"))
        assert step.state == state
        assert step.controls == ()
        assert [i.code for i in _incidents(step)] == ["provider_response_cancel_not_active"]


def test_a_refused_cancel_during_a_tool_delivers_its_outcome_without_a_response() -> None:
    """A cancel that finds nothing active while a stopped tool runs waits for its outcome, delivers
    it once, then answers the caller."""
    state = _asked(
        ev.response_created("resp_1"),
        ev.function_call("call_1", "resp_1"),
        ev.speech_started("item_U2"),
        ev.user_final("item_U2", "Never mind"),
        tools=True,
    )

    refused = ev.step_of(state, ev.provider_error("response_cancel_not_active"))
    assert refused.controls == ()
    finished = ev.step_of(refused.state, _tool_finished())

    assert _outputs(finished) == ["call_1"]
    assert [type(c) for c in finished.controls] == [ItemCreate, ResponseCreate]
    assert (
        finished.state.realtime.turn is not None
        and finished.state.realtime.turn.context.input_item_id == "item_U2"
    )
