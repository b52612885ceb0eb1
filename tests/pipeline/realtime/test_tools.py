"""The tool-call transitions of a spoken turn (pipeline.realtime.tools), driven without I/O."""

from __future__ import annotations

import json
from typing import Any

from pipeline.call.catalog import ToolError, ToolOutcome
from pipeline.dialects import parse_inbound
from pipeline.realtime import tools
from pipeline.realtime.controls import ItemCreate, ResponseCreate
from pipeline.realtime.events import FunctionCallArgumentsDone, ResponseDone
from pipeline.session.state import SessionState
from pipeline.session.step import (
    CancelTool,
    InterruptToolStep,
    RecordIncident,
    RefuseToolStep,
    RequestToolStep,
    RunTool,
    ScheduleTimer,
)
from simulator.oracle import wire_errors
from tests.pipeline import events as ev

SUCCEEDED = ToolOutcome(status="succeeded", result={"order": "4417", "status": "shipped"}, elapsed_ms=4)


def _call(call_id: str = "call_1", response_id: str = "resp_1") -> FunctionCallArgumentsDone:
    event = parse_inbound(
        {
            "type": "response.function_call_arguments.done",
            "event_id": f"ev_{call_id}",
            "response_id": response_id,
            "item_id": f"item_{call_id}",
            "output_index": 0,
            "call_id": call_id,
            "name": "lookup_order",
            "arguments": '{"order_id": "4417"}',
        }
    )
    assert isinstance(event, FunctionCallArgumentsDone)
    return event


def _done(response_id: str, status: str = "completed") -> ResponseDone:
    event = parse_inbound(ev.response_done(response_id, status))
    assert isinstance(event, ResponseDone)
    return event


LOOKUP = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
}


def _responding(response_id: str = "resp_1") -> SessionState:
    return ev.state_after(
        [
            *ev.listening(tools=[LOOKUP]),
            ev.user_final("item_U1", "Where is 4417?"),
            ev.response_created(response_id),
        ]
    )


def _outputs(controls: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [json.loads(c.item["output"]) for c in controls if isinstance(c, ItemCreate)]


def test_a_function_call_is_requested_and_run() -> None:
    """A call in the current response becomes a requested step and a run on tool_runs."""
    step = tools.request_tool(_responding(), _call())
    assert [type(e) for e in step.effects] == [RequestToolStep, RunTool, ScheduleTimer]
    assert step.effects[2].name == "tool_deadline:call_1"  # type: ignore[union-attr]
    assert step.controls == ()
    assert step.state.realtime.chain.pending is not None and step.state.realtime.chain.calls == 1


def test_a_call_for_another_response_fails_the_session() -> None:
    """A function call that is not the current response's is tool_response_mismatch."""
    step = tools.request_tool(_responding(), _call(response_id="resp_other"))
    assert step.state.phase == "failed" and step.state.end_reason == "tool_response_mismatch"
    assert any(isinstance(e, RecordIncident) for e in step.effects)


def test_a_second_call_while_one_runs_is_refused_and_answered() -> None:
    """A parallel call gets a refused output at once and leaves the running call alone."""
    running = tools.request_tool(_responding(), _call()).state
    step = tools.request_tool(running, _call("call_2"))
    assert step.state.realtime.chain.pending == running.realtime.chain.pending
    assert step.state.realtime.chain.calls == running.realtime.chain.calls
    (output,) = _outputs(step.controls)
    assert (output["call_id"], output["status"], output["error"]["code"]) == (
        "call_2",
        "refused",
        "parallel_tool_calls_not_supported",
    )


def test_the_ninth_call_of_a_turn_is_refused_recorded_and_then_reported() -> None:
    """After eight calls the next is refused as a terminal step, and the completed response is
    followed by exactly one tool-free response."""
    state = _responding()
    for index in range(tools.MAXIMUM_TOOL_CALLS_PER_TURN):
        call_id = f"call_{index}"
        state = tools.request_tool(state, _call(call_id)).state
        state = tools.tool_finished(state, call_id, SUCCEEDED).state
        state = tools.response_finished(state, _done("resp_1")).state  # type: ignore[union-attr]
        state = state.with_realtime(turn=state.realtime.turn.model_copy(update={"response_id": "resp_1"}))  # type: ignore[union-attr]
    refused = tools.request_tool(state, _call("call_9"))
    assert [type(e) for e in refused.effects] == [RefuseToolStep]
    assert _outputs(refused.controls)[0]["error"]["code"] == "tool_call_limit_reached"
    report = tools.response_finished(refused.state, _done("resp_1"))
    assert report is not None
    (create,) = report.controls
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.tool_choice == "none"
    assert tools.response_finished(report.state, _done("resp_2")) is None


def test_an_outcome_after_the_response_completed_continues_the_turn() -> None:
    """function_call_output then response.create with the same context, in that order."""
    state = tools.request_tool(_responding(), _call()).state
    waiting = tools.response_finished(state, _done("resp_1"))
    assert waiting is not None and waiting.controls == () and waiting.state.realtime.chain.response_completed
    step = tools.tool_finished(waiting.state, "call_1", SUCCEEDED)
    output, create = step.controls
    assert isinstance(output, ItemCreate) and isinstance(create, ResponseCreate)
    assert json.loads(output.item["output"])["result"] == SUCCEEDED.result
    assert (
        create.response is not None
        and create.response.instructions == state.realtime.turn.context.instructions
    )  # type: ignore[union-attr]
    assert (
        step.state.realtime.chain.pending is None
        and step.state.realtime.turn is not None
        and step.state.realtime.turn.response_id is None
    )


def test_an_outcome_before_the_response_completed_waits_for_it() -> None:
    """The output is held until response.done, then sent with the next response.create."""
    state = tools.request_tool(_responding(), _call()).state
    held = tools.tool_finished(state, "call_1", SUCCEEDED)
    assert held.controls == ()
    step = tools.response_finished(held.state, _done("resp_1"))
    assert step is not None
    assert [type(c) for c in step.controls] == [ItemCreate, ResponseCreate]


def test_a_cancelled_response_cancels_the_tool_and_still_answers_the_call() -> None:
    """Barge-in cancels the running tool; its outcome is delivered without a response."""
    state = tools.request_tool(_responding(), _call()).state
    cancelled = tools.response_finished(state, _done("resp_1", "cancelled"))
    assert cancelled is not None
    assert [type(e) for e in cancelled.effects] == [CancelTool]
    outcome = ToolOutcome(
        status="cancelled", error=ToolError(code="cancelled", message="stopped"), elapsed_ms=2
    )
    step = tools.tool_finished(cancelled.state, "call_1", outcome)
    assert [type(c) for c in step.controls] == [ItemCreate]
    assert _outputs(step.controls)[0]["status"] == "cancelled"
    assert step.state.phase == "listening" and step.state.realtime.turn is None


def test_input_during_a_tool_is_answered_after_the_output() -> None:
    """New input cancels the tool; the output goes first, then the queued input's response."""
    state = tools.request_tool(_responding(), _call()).state
    moved_on = tools.caller_moved_on(state.with_realtime(queued_input_item_id="item_U2"), "new_input")
    assert [type(e) for e in moved_on.effects] == [CancelTool]
    done = tools.response_finished(moved_on.state, _done("resp_1"))
    assert done is not None and done.controls == ()
    step = tools.tool_finished(done.state, "call_1", SUCCEEDED)
    assert [type(c) for c in step.controls] == [ItemCreate, ResponseCreate]
    assert (
        step.state.realtime.turn is not None and step.state.realtime.turn.context.input_item_id == "item_U2"
    )


def test_a_large_result_is_bounded_and_stays_valid_utf8() -> None:
    """A 1 MB result becomes a truncation note with a preview, within 16,000 bytes."""
    big = ToolOutcome(status="succeeded", result={"data": "é" * 500_000}, elapsed_ms=1)
    output = tools.continuation_output("call_1", big)
    assert len(output.encode()) <= tools.MAXIMUM_CONTINUATION_BYTES
    decoded = json.loads(output)
    assert decoded["result"]["truncated"] is True and decoded["result"]["preview"].startswith('{"data":"é')


def test_every_tool_control_passes_the_wire_oracle() -> None:
    """Outputs, refusals and the continuation validate as openai client events."""
    state = tools.request_tool(_responding(), _call()).state
    refused = tools.request_tool(state, _call("call_2")).controls
    waiting = tools.response_finished(state, _done("resp_1"))
    assert waiting is not None
    continued = tools.tool_finished(waiting.state, "call_1", SUCCEEDED).controls
    for control in (*refused, *continued):
        wire = control.model_dump(mode="json", exclude_none=True)
        assert wire_errors(wire, direction="client") == [], wire


def test_a_tool_the_session_lacks_is_answered_unavailable_and_continued() -> None:
    """An unknown function is recorded unavailable, runs nothing, and its output leads the
    continuation once the response completes."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])
    step = tools.request_tool(state, _call())
    assert [type(e) for e in step.effects] == [RefuseToolStep]
    assert step.effects[0].status == "unavailable"  # type: ignore[union-attr]
    continued = tools.response_finished(step.state, _done("resp_1"))
    assert continued is not None
    assert [type(c) for c in continued.controls] == [ItemCreate, ResponseCreate]
    assert _outputs(continued.controls)[0]["error"]["code"] == "tool_unavailable"


def test_a_tool_that_never_reports_back_is_answered_interrupted_at_its_deadline() -> None:
    """The deadline timer answers a lost tool run as interrupted and the turn goes on."""
    state = tools.request_tool(_responding(), _call()).state
    waiting = tools.response_finished(state, _done("resp_1"))
    assert waiting is not None
    step = ev.step_of(waiting.state, ev.timer_fired("tool_deadline:call_1"))
    # The continuation is a new request for a response, with its own response deadline.
    assert [type(e) for e in step.effects] == [CancelTool, InterruptToolStep, ScheduleTimer]
    assert [type(c) for c in step.controls] == [ItemCreate, ResponseCreate]
    assert _outputs(step.controls)[0]["error"]["code"] == "tool_deadline_passed"
    later = ev.step_of(step.state, ev.timer_fired("tool_deadline:call_1"))
    assert later.controls == () and later.effects == ()


def test_ending_the_session_while_a_tool_runs_stops_it_and_records_why() -> None:
    """An end request during a tool cancels it and marks its step interrupted."""
    state = tools.request_tool(_responding(), _call()).state
    step = ev.step_of(state, ev.end_requested())
    interrupt = [e for e in step.effects if isinstance(e, InterruptToolStep)]
    assert [e.code for e in interrupt] == ["app_ended"]
    assert any(isinstance(e, CancelTool) for e in step.effects)
    assert step.state.realtime.chain.pending is None


def test_the_same_call_arriving_twice_is_taken_up_once() -> None:
    """A second event naming a call id already taken up this turn changes nothing."""
    running = tools.request_tool(_responding(), _call()).state
    again = tools.request_tool(running, _call())
    assert again.state == running and again.controls == () and again.effects == ()


def test_an_outcome_held_when_the_caller_moved_on_is_delivered_when_the_response_completes() -> None:
    """Outcome in, then new input, then response.done: the output goes, then the queued
    input's response (the seed left this call without an output)."""
    state = tools.request_tool(_responding(), _call()).state
    held = tools.tool_finished(state, "call_1", SUCCEEDED).state
    moved_on = tools.caller_moved_on(held.with_realtime(queued_input_item_id="item_U2"), "new_input").state
    step = tools.response_finished(moved_on, _done("resp_1"))
    assert step is not None
    assert [type(c) for c in step.controls] == [ItemCreate, ResponseCreate]
    assert (
        step.state.realtime.turn is not None and step.state.realtime.turn.context.input_item_id == "item_U2"
    )


def _item_done(call_id: str = "call_1", response_id: str = "resp_1") -> dict[str, Any]:
    return {
        "type": "response.output_item.done",
        "event_id": f"ev_item_{call_id}",
        "response_id": response_id,
        "output_index": 0,
        "item": {
            "id": f"item_{call_id}",
            "object": "realtime.item",
            "type": "function_call",
            "status": "completed",
            "name": "lookup_order",
            "call_id": call_id,
            "arguments": '{"order_id": "4417"}',
        },
    }


def test_a_function_call_item_done_is_the_same_call_and_is_taken_up_once() -> None:
    """output_item.done for a function_call requests the call when it comes alone, and changes
    nothing after function_call_arguments.done named the same call."""
    from pipeline.realtime.frames import classify_frame
    from pipeline.session.wire import FrameKind

    assert classify_frame(json.dumps(_item_done())).kind is FrameKind.DURABLE
    message = {
        **_item_done(),
        "item": {"id": "item_m", "type": "message", "role": "assistant", "content": []},
    }
    assert classify_frame(json.dumps(message)).kind is FrameKind.IGNORED

    alone = ev.step_of(_responding(), _item_done())
    assert [type(e) for e in alone.effects] == [RequestToolStep, RunTool, ScheduleTimer]
    after_arguments = tools.request_tool(_responding(), _call()).state
    repeated = ev.step_of(after_arguments, _item_done())
    assert repeated.effects == () and repeated.controls == ()


def test_a_function_call_in_a_response_the_host_did_not_ask_for_is_refused_and_the_call_goes_on() -> None:
    """A WebRTC client's own response.create, and the model calls a tool in it: the tool does not
    run (no response context of the host's), the call is answered with a refusal at once and a
    warning recorded; the same call named again is not answered twice; the caller's next line is
    answered as ever."""
    state, steps = ev.fold(
        [
            *ev.listening(tools=[LOOKUP]),
            ev.response_created("resp_client"),
            ev.function_call("call_c", "resp_client", arguments='{"order_id": "4417"}'),
            ev.function_call("call_c", "resp_client", arguments='{"order_id": "4417"}'),
            ev.response_done("resp_client"),
        ]
    )
    assert state.phase != "failed" and state.end_reason is None
    outputs = [json.loads(c.item["output"]) for c in ev.controls_of(steps) if isinstance(c, ItemCreate)]
    assert [(o["call_id"], o["status"], o["error"]["code"]) for o in outputs] == [
        ("call_c", "refused", "response_context_missing")
    ]
    assert ev.effects_of(steps, RunTool) == [] and ev.effects_of(steps, RequestToolStep) == []
    [refused] = ev.effects_of(steps, RefuseToolStep)
    assert (refused.call_id, refused.code) == ("call_c", "response_context_missing")
    [incident] = ev.effects_of(steps, RecordIncident)
    assert (incident.code, incident.severity) == ("response_context_missing", "warning")
    for control in ev.controls_of(steps):
        wire = control.model_dump(mode="json", exclude_none=True)
        assert wire_errors(wire, direction="client") == [], wire

    after, more = ev.fold([ev.speech_started("item_U2"), ev.user_final("item_U2", "Where is 4417?")], state)
    assert [type(c) for c in ev.controls_of(more)] == [ResponseCreate]
    assert after.phase != "failed"
