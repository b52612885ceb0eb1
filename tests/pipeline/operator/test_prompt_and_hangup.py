"""What the model is given mid-call (named prompt blocks, the tools), the greeting, and the
built-in end_call with which the model hangs up after its goodbye."""

from __future__ import annotations

from typing import Any

from pipeline.call.built_in import END_CALL
from pipeline.call.limits import MAXIMUM_INSTRUCTIONS_BYTES
from pipeline.operator.prompt import block_hash
from pipeline.realtime.controls import ResponseCreate
from pipeline.realtime.turns import SAY_EXACTLY
from pipeline.session.state import Phase
from pipeline.session.step import AnswerRequest, CloseCall, LogEntry, Step
from pipeline.session.wire import SessionUpdate
from tests.pipeline import events as ev
from tests.pipeline import line_events as op

TOOL = {"type": "function", "name": "lookup_order", "description": "d", "parameters": {"type": "object"}}


def _answer(step: Step) -> tuple[int, dict[str, Any]]:
    [answer] = [effect for effect in step.effects if isinstance(effect, AnswerRequest)]
    return answer.status, answer.body


def _entries(step: Step) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data) for e in step.effects if isinstance(e, LogEntry)]


def test_a_new_block_is_added_last_and_sent_and_the_log_keeps_only_its_hash() -> None:
    state = ev.state_after(ev.listening())

    step = ev.step_of(state, op.prompt_set("faq", "Opening hours are 9 to 5."))

    assert step.state.instructions == f"{ev.INSTRUCTIONS}\n\nOpening hours are 9 to 5."
    [update] = step.controls
    assert isinstance(update, SessionUpdate) and update.session["instructions"] == step.state.instructions
    entry = {"name": "faq", "hash": block_hash("Opening hours are 9 to 5."), "chars": 25, "changed": True}
    assert _entries(step) == [("prompt.changed", entry)]
    assert "Opening" not in str(_entries(step))
    assert _answer(step) == (200, {"status": "changed", **entry})


def test_only_a_change_of_bytes_sends_session_update() -> None:
    state = ev.state_after([*ev.listening(), op.prompt_set("faq", "A.")])

    same = ev.step_of(state, op.prompt_set("faq", "A."))

    assert same.controls == () and _answer(same)[1]["status"] == "unchanged"
    assert _entries(same)[0][1]["changed"] is False


def test_a_block_is_replaced_in_place_and_empty_text_removes_it() -> None:
    state = ev.state_after([*ev.listening(), op.prompt_set("a", "A."), op.prompt_set("b", "B.")])
    replaced = ev.step_of(state, op.prompt_set("a", "AA."))
    assert replaced.state.instructions == f"{ev.INSTRUCTIONS}\n\nAA.\n\nB."
    removed = ev.step_of(replaced.state, op.prompt_set("instructions", ""))
    assert removed.state.instructions == "AA.\n\nB."


def test_instructions_past_their_bound_are_refused_and_nothing_changes() -> None:
    state = ev.state_after(ev.listening())
    step = ev.step_of(state, op.prompt_set("big", "x" * MAXIMUM_INSTRUCTIONS_BYTES))
    assert _answer(step)[0] == 422 and _answer(step)[1]["error"]["code"] == "prompt_too_long"
    assert step.state == state and step.controls == ()


def test_the_tools_change_mid_call_but_not_while_one_runs() -> None:
    state = ev.state_after(ev.listening(tools=[TOOL]))
    other = {**TOOL, "name": "book_table"}

    changed = ev.step_of(state, op.tools_set(other))

    [update] = changed.controls
    assert isinstance(update, SessionUpdate) and [t["name"] for t in update.session["tools"]] == [
        "book_table"
    ]
    assert changed.state.tool_versions == {"book_table": "2"}
    assert _entries(changed) == [("tools.changed", {"tools": ["book_table"]})]

    running = ev.state_after(
        [
            *ev.listening(tools=[TOOL]),
            ev.user_final("item_u1", "Order?"),
            ev.response_created("resp_1"),
            ev.function_call("call_1", "resp_1"),
        ]
    )
    refused = ev.step_of(running, op.tools_set(other))
    assert _answer(refused)[1]["error"]["code"] == "tool_running" and refused.state == running


def _greeted(greeting: dict[str, str]) -> Step:
    created = {**ev.session_created(), "greeting": greeting}
    state = ev.state_after([created, ev.admission_begun(), ev.call_attached(), ev.sideband_connected()])
    return ev.step_of(state, ev.session_updated())


def test_the_greeting_is_spoken_once_when_the_call_connects_without_tools() -> None:
    step = _greeted({"say": "Thanks for calling Acme."})
    [create] = step.controls
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.instructions == SAY_EXACTLY.format(text="Thanks for calling Acme.")
    assert create.response.tool_choice == "none" and step.state.greeted
    # A second session.updated (a prompt change) greets nobody again.
    done = ev.fold([ev.response_created("resp_g"), ev.response_done("resp_g")], step.state)[0]
    assert ev.step_of(done, ev.session_updated()).controls == ()

    reply = _greeted({"reply": "Greet the caller by the time of day."})
    [create] = reply.controls
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.instructions.endswith("Greet the caller by the time of day.")


def _hangup_call() -> list[dict[str, Any]]:
    created = {**ev.session_created(tools=[TOOL]), "hangup_when": "when the caller says goodbye"}
    return [created, ev.admission_begun(), ev.call_attached(), ev.sideband_connected(), ev.session_updated()]


def test_a_session_with_hangup_offers_end_call_and_the_model_ends_the_call_after_its_goodbye() -> None:
    state, steps = ev.fold(_hangup_call()[:4])
    [configure] = steps[-1].controls
    assert isinstance(configure, SessionUpdate)
    assert [t["name"] for t in configure.session["tools"]] == ["lookup_order", END_CALL]
    state = ev.state_after(
        [*_hangup_call(), ev.user_final("item_u1", "That's all, bye."), ev.response_created("resp_1")]
    )

    called = ev.step_of(state, ev.function_call("call_end", "resp_1", name=END_CALL))

    assert called.state.realtime.hanging_up and called.state.phase is Phase.RESPONDING
    assert [kind for kind, _ in _entries(called)] == ["tool.call", "tool.result"]
    assert called.controls == ()
    said = ev.step_of(called.state, ev.assistant_final("resp_1", "item_a1", "Goodbye!"))
    ended = ev.step_of(said.state, ev.response_done("resp_1"))
    assert ended.state.phase is Phase.ENDED and ended.state.end_reason == "agent_hung_up"
    assert any(isinstance(e, CloseCall) and e.hangup for e in ended.effects)


def test_end_call_is_no_tool_of_a_session_without_hangup() -> None:
    state = ev.state_after([*ev.listening(), ev.user_final("item_u1", "Bye."), ev.response_created("resp_1")])
    called = ev.step_of(state, ev.function_call("call_end", "resp_1", name=END_CALL))
    assert not called.state.realtime.hanging_up
    ended = ev.step_of(called.state, ev.response_done("resp_1"))
    assert ended.state.phase is not Phase.ENDED
