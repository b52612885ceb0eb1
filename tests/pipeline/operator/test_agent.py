"""The app directs the agent: it says given words, or replies as it is told — only while the
line is free, and always answered."""

from __future__ import annotations

from typing import Any

from pipeline.realtime.controls import ResponseCreate
from pipeline.realtime.turns import SAY_EXACTLY
from pipeline.session.state import Phase
from pipeline.session.step import AnswerRequest, ScheduleTimer
from tests.pipeline import events as ev


def _say(text: str = "Your order ships on Friday.") -> dict[str, Any]:
    return {"type": "switchboard.agent_say", "text": text, "request_id": "req_1", "gateway_id": "gw1"}


def _reply(instructions: str = "Offer a callback.") -> dict[str, Any]:
    return {
        "type": "switchboard.agent_reply",
        "instructions": instructions,
        "request_id": "req_2",
        "gateway_id": "gw1",
    }


def _answer(step: Any) -> AnswerRequest:
    [answer] = [effect for effect in step.effects if isinstance(effect, AnswerRequest)]
    return answer


def test_agent_say_asks_for_a_tool_free_response_saying_exactly_the_words() -> None:
    """On a free line, the agent's words become a response asked to say exactly them, with no
    tool, armed with its deadline like any turn; the app gets 202."""
    state = ev.state_after(ev.listening())

    step = ev.step_of(state, _say())

    [create] = step.controls
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.instructions == SAY_EXACTLY.format(text="Your order ships on Friday.")
    assert create.response.tool_choice == "none"
    assert step.state.phase is Phase.RESPONDING and step.state.realtime.turn is not None
    assert any(isinstance(e, ScheduleTimer) and e.name.startswith("response_deadline:") for e in step.effects)
    assert (_answer(step).status, _answer(step).body) == (202, {"status": "speaking"})


def test_agent_reply_is_steered_by_the_session_and_the_apps_instructions() -> None:
    """A directed reply keeps the session's instructions, adds the app's, and may use tools."""
    state = ev.state_after(ev.listening())

    step = ev.step_of(state, _reply())

    [create] = step.controls
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.instructions == f"{ev.INSTRUCTIONS}\n\nOffer a callback."
    assert create.response.tool_choice == "auto"
    assert _answer(step).status == 202


def test_the_agent_is_not_directed_over_a_running_answer_or_a_call_that_is_over() -> None:
    """While a response is owed the app is told agent_busy; before the call is connected
    session_not_connected, after it ended session_ended (with the end reason); nothing is sent
    either way."""
    answering = ev.state_after([*ev.listening(), ev.user_final("item_u1", "Hi.")])
    busy = ev.step_of(answering, _say())
    assert busy.controls == () and busy.state == answering
    assert (_answer(busy).status, _answer(busy).body["error"]["code"]) == (409, "agent_busy")

    not_connected = ev.step_of(ev.state_after([ev.session_created()]), _reply())
    assert not_connected.controls == ()
    assert (_answer(not_connected).status, _answer(not_connected).body["error"]) == (
        409,
        {
            "code": "session_not_connected",
            "message": "session is created: its call is not connected yet",
            "status": "created",
        },
    )
    ended = ev.step_of(ev.state_after([*ev.listening(), ev.end_requested()]), _reply())
    assert ended.controls == ()
    assert (_answer(ended).status, _answer(ended).body["error"]) == (
        409,
        {
            "code": "session_ended",
            "message": "session is ended (app_ended)",
            "status": "ended",
            "end_reason": "app_ended",
        },
    )


def test_a_directed_turn_ends_like_any_and_the_caller_is_answered_after_it() -> None:
    """The caller speaking during the agent's directed words is answered once they are done."""
    state = ev.state_after([*ev.listening(), _say(), ev.response_created("resp_say")])
    state = ev.step_of(state, ev.user_final("item_u1", "Thanks, and the refund?")).state
    assert state.realtime.queued_input_item_id == "item_u1"

    done = ev.step_of(state, ev.response_done("resp_say"))

    assert done.state.phase is Phase.RESPONDING
    assert (
        done.state.realtime.turn is not None and done.state.realtime.turn.context.input_item_id == "item_u1"
    )
    [create] = done.controls
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.tool_choice == "auto"
