"""Function calls in a spoken turn: request, refuse, finish, continue — and never an orphan.

The rules are the seeds'. One tool runs at a time; a second call while one runs is refused
(`parallel_tool_calls_not_supported`) and answered at once. At most eight run per turn; the
ninth is refused (`tool_call_limit_reached`), recorded as a refused step, and once the response
completes one tool-free response (`tool_choice: "none"`) lets the model report what it has.
When the response has completed and the tool's outcome is in, the host sends the
`function_call_output` and then `response.create` with the turn's response context. If the
caller moved on (barge-in, new input, a cancelled response), the outcome is still delivered —
every function call gets exactly one output (DESIGN invariant 7) — but no response is driven.

A session whose model calls tools in parallel (`tools_in_parallel`, on a model that can) runs
every call of a response at once instead, each its own tool step, still at most eight a turn:
the outputs go together once the response is done and every call's outcome is in, then one
`response.create` (a provider refuses it while a call of the conversation is unanswered). The
built-in tools that hold the call (collect_digits, transfer_call, decline_recording) still run
only alone. When the ninth call was refused among calls that ran, the one response that follows
is the tool-free one.

These transitions are pure; `pipeline.transitions` routes function calls, tool outcomes, new input
and the end of responses to them. A call to a tool the session was not created with is
answered `unavailable`; a call in a response the host did not ask for is refused, and the call
goes on.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pipeline.call.built_in import END_CALL, TRANSFER_CALL
from pipeline.call.catalog import ToolError, ToolOutcome
from pipeline.call.keypad import COLLECT_DIGITS, ask_of_call, tool_refusal
from pipeline.call.limits import MAXIMUM_TOOL_MS, MAXIMUM_TOOL_OUTPUT_BYTES, TOOL_DEADLINE_GRACE_MS
from pipeline.realtime.configuration import offers_collection
from pipeline.realtime.controls import ItemCreate
from pipeline.realtime.events import FunctionCallArgumentsDone, ResponseDone
from pipeline.realtime.turns import ask_for_response, may_respond, owed_next
from pipeline.session.consent import DECLINE_RECORDING, DECLINED_RESULT, declined

# A Realtime call is hung up alone: nothing is said on its sideband on the way out.
from pipeline.session.ending import fail, finish
from pipeline.session.state import Phase, SessionState, ToolCall, ToolChain
from pipeline.session.step import (
    CancelTool,
    InterruptToolStep,
    LogEntry,
    RecordIncident,
    RefuseToolStep,
    RequestToolStep,
    RunTool,
    Step,
    TransferCall,
    schedule_timer,
    unchanged,
)
from pipeline.session.timers import ToolDeadline

# What the model's collect_digits call is answered with, at once.
COLLECTING = {
    "keypad": "collecting",
    "note": "The caller is asked to type on the keypad now. Say nothing more; you will be told the outcome.",
}

# A turn that calls more tools than this is looping; the model is told to report instead.
MAXIMUM_TOOL_CALLS_PER_TURN = 8

# What goes to the provider as one function_call_output (pipeline.call.limits says why).
MAXIMUM_CONTINUATION_BYTES = MAXIMUM_TOOL_OUTPUT_BYTES

# The refusal (and warning) of a function call in a response the host did not ask for.
UNSOLICITED = "response_context_missing"

PARALLEL_REFUSAL = (
    "Only one tool call can run at a time. Call this tool again once the current call has finished."
)
# The built-in tools that hold the call or change it, which run alone even in parallel.
RUN_ALONE = frozenset({COLLECT_DIGITS, DECLINE_RECORDING, TRANSFER_CALL})
ALONE_REFUSAL = (
    "This tool cannot run alongside other tool calls. Call it again once the current calls have finished."
)
LIMIT_REFUSAL = (
    f"This turn has used its {MAXIMUM_TOOL_CALLS_PER_TURN} tool calls. "
    "Do not call tools again in this turn; tell the person what you have found so far."
)
TRUNCATION_NOTE = (
    "The full result was larger than a voice turn can carry and was cut. The beginning of it follows."
)
# What ends an error message cut to fit the bound.
ELLIPSIS = "…"
# Lone surrogates (U+D800 to U+DFFF) to U+FFFD, for str.translate.
_REPLACED_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), "\ufffd")


def request_tool(state: SessionState, event: FunctionCallArgumentsDone) -> Step:
    """The model called a function: run it, or refuse it (one at a time, eight a turn)."""
    turn = state.realtime.turn
    if turn is None:
        return _unsolicited(state, event)
    if turn.response_id != event.response_id:
        return fail(
            state,
            "tool_response_mismatch",
            f"function call {event.call_id} belongs to {event.response_id}, not {turn.response_id}",
        )
    chain = state.realtime.chain
    if event.call_id in chain.seen:
        # The same call again (another event naming it): it was taken up once already.
        return unchanged(state)
    chain = chain.model_copy(update={"seen": (*chain.seen, event.call_id)})
    state = state.with_realtime(chain=chain)
    if event.name == END_CALL and state.hangup_when is not None:
        return _hanging_up(state, event)
    if event.name == DECLINE_RECORDING and state.privacy.consent is not None and chain.pending is None:
        return _declining(state, event)
    if event.name == COLLECT_DIGITS and offers_collection(state) and chain.pending is None:
        return _collecting(state, event)
    if event.name == TRANSFER_CALL and state.phone is not None and state.phone.transfer_targets:
        target = transfer_target(state, event.arguments)
        if target is not None and chain.pending is None:
            return transfer_requested(state, event.call_id, event.arguments, target)
    if chain.pending is not None and not _beside(state, chain, event.name):
        message = ALONE_REFUSAL if in_parallel(state) else PARALLEL_REFUSAL
        return Step(
            state=state,
            controls=(
                _output(event.call_id, refusal(event.call_id, "parallel_tool_calls_not_supported", message)),
            ),
        )
    if chain.calls >= MAXIMUM_TOOL_CALLS_PER_TURN:
        return Step(
            state=state.with_realtime(chain=chain.model_copy(update={"limit_refused": True})),
            controls=(
                _output(event.call_id, refusal(event.call_id, "tool_call_limit_reached", LIMIT_REFUSAL)),
            ),
            effects=(_refused_step(event, "tool_call_limit_reached", LIMIT_REFUSAL),),
        )
    if event.name not in state.tool_versions:
        # Answered like a tool that finished at once: the output goes back when the response
        # completes, and the model is asked to go on without it.
        message = f"There is no tool called {event.name} in this call. Answer without it."
        output = _answer(event.call_id, "unavailable", "tool_unavailable", message)
        return Step(
            state=state.with_realtime(chain=_taken_up(chain, event, output)),
            effects=(_refused_step(event, "tool_unavailable", message, status="unavailable"),),
        )
    deadline = schedule_timer(ToolDeadline(event.call_id), delay_ms=MAXIMUM_TOOL_MS + TOOL_DEADLINE_GRACE_MS)
    return Step(
        state=state.with_realtime(chain=_taken_up(chain, event, None)),
        effects=(
            RequestToolStep(
                call_id=event.call_id,
                item_id=event.item_id,
                response_id=event.response_id,
                name=event.name,
                arguments=event.arguments,
            ),
            RunTool(call_id=event.call_id, name=event.name, arguments=event.arguments),
            deadline,
        ),
    )


def in_parallel(state: SessionState) -> bool:
    """Whether the session runs every function call of a response (its model calls tools in
    parallel and the session asked for it); otherwise one at a time."""
    return state.model.parallel_tool_calls is True


def _beside(state: SessionState, chain: ToolChain, name: str) -> bool:
    """Whether a call to `name` runs beside the calls in flight: only in parallel, and neither
    it nor any of them is a tool that runs alone."""
    return (
        in_parallel(state)
        and name not in RUN_ALONE
        and all(call.name not in RUN_ALONE for call in chain.in_flight)
    )


def _unsolicited(state: SessionState, event: FunctionCallArgumentsDone) -> Step:
    """A function call in a response the host did not ask for (a WebRTC client's data channel can
    send `response.create` itself): a tool never runs without the response context it was asked
    in, so it is refused — answered at once, so the model is not left waiting on it — with a
    warning, and the call goes on. No response is asked for: the response is not the host's."""
    if event.call_id in state.realtime.chain.seen:
        return unchanged(state)
    message = (
        f"{event.name} cannot run here: this response was not asked for by the host of the call. "
        "Answer without it."
    )
    return Step(
        state=state.with_realtime(
            chain=state.realtime.chain.model_copy(
                update={"seen": (*state.realtime.chain.seen, event.call_id)}
            )
        ),
        controls=(_output(event.call_id, refusal(event.call_id, UNSOLICITED, message)),),
        effects=(
            _refused_step(event, UNSOLICITED, message),
            RecordIncident(
                code=UNSOLICITED,
                summary=f"function call {event.call_id} ({event.name}) in response {event.response_id}, "
                "which the host did not ask for: refused, the call goes on",
                severity="warning",
                context={"call_id": event.call_id, "name": event.name, "response_id": event.response_id},
            ),
        ),
    )


def _declining(state: SessionState, event: FunctionCallArgumentsDone) -> Step:
    """The model declines recording for the caller: answered at once (the call goes on, the
    model is told), and the call keeps only its metadata from now on."""
    output = _encode(
        {"call_id": event.call_id, "status": "succeeded", "result": DECLINED_RESULT, "error": None}
    )
    call = {"call_id": event.call_id, "name": DECLINE_RECORDING, "arguments": event.arguments}
    taken = Step(
        state=state.with_realtime(chain=_taken_up(state.realtime.chain, event, output)),
        effects=(
            LogEntry(kind="tool.call", data=call),
            LogEntry(
                kind="tool.result", data={"call_id": event.call_id, "status": "succeeded", "error": None}
            ),
        ),
    )
    return taken.then(declined(taken.state, "model"))


def _collecting(state: SessionState, event: FunctionCallArgumentsDone) -> Step:
    """The model has the caller key a number in: answered at once (the model says nothing more;
    it is told the outcome once the tool has run), and handed to the keypad rules, which hold the
    line once this response is over."""
    ask = ask_of_call(event.call_id, event.arguments)
    call = {"call_id": event.call_id, "name": COLLECT_DIGITS, "arguments": event.arguments}
    cannot = None if isinstance(ask, str) else tool_refusal(ask, state.tool_versions, state.tool_sensitive)
    if isinstance(ask, str):
        output = refusal(event.call_id, "invalid_arguments", f"{COLLECT_DIGITS}: {ask}")
        status = "refused"
    elif cannot is not None:
        # Answered so at once: the model may try again with another tool, or tell the caller.
        output = refusal(event.call_id, cannot[0], f"{COLLECT_DIGITS}: {cannot[1]}")
        status = "refused"
    else:
        output = _encode(
            {"call_id": event.call_id, "status": "succeeded", "result": COLLECTING, "error": None}
        )
        status = "succeeded"
    taken = state.with_realtime(chain=_taken_up(state.realtime.chain, event, output))
    return Step(
        state=taken if isinstance(ask, str) or cannot is not None else taken.evolve(collect_asked=ask),
        effects=(
            LogEntry(kind="tool.call", data=call),
            LogEntry(kind="tool.result", data={"call_id": event.call_id, "status": status, "error": None}),
        ),
    )


def _hanging_up(state: SessionState, event: FunctionCallArgumentsDone) -> Step:
    """The model ends the call: the goodbye it says in this response is heard to its end, then
    the call ends (`agent_hung_up`). The call gets no output: nothing follows it."""
    call = {"call_id": event.call_id, "name": END_CALL, "arguments": event.arguments}
    return Step(
        state=state.with_realtime(hanging_up=True),
        effects=(
            LogEntry(kind="tool.call", data=call),
            LogEntry(
                kind="tool.result", data={"call_id": event.call_id, "status": "succeeded", "error": None}
            ),
        ),
    )


def hung_up_by_agent(state: SessionState) -> Step | None:
    """The response in which the model called end_call is over: the call ends. None when the
    model has not asked to hang up."""
    if not state.realtime.hanging_up or state.is_terminal:
        return None
    return finish(state.with_realtime(hanging_up=False), state.realtime.hangup_reason)


def _taken_up(chain: ToolChain, event: FunctionCallArgumentsDone, output: str | None) -> ToolChain:
    """The chain with this call in flight (its output already known when it runs nothing): the
    first of its response, or one beside those in flight (in parallel), which leaves whether the
    caller moved on as it was."""
    call = ToolCall(
        call_id=event.call_id,
        item_id=event.item_id,
        response_id=event.response_id,
        name=event.name,
        output=output,
    )
    if chain.pending is not None:
        return chain.model_copy(update={"parallel": (*chain.parallel, call), "calls": chain.calls + 1})
    return chain.model_copy(update={"pending": call, "calls": chain.calls + 1, "continuation_allowed": True})


def _running(chain: ToolChain, call_id: str) -> ToolCall | None:
    """The call in flight with this id whose outcome is not in yet, if any."""
    return next((call for call in chain.in_flight if call.call_id == call_id and call.output is None), None)


def _with_output(chain: ToolChain, call_id: str, output: str) -> ToolChain:
    """The chain with this call's output set."""
    if chain.pending is not None and chain.pending.call_id == call_id:
        return chain.model_copy(update={"pending": chain.pending.model_copy(update={"output": output})})
    answered = tuple(
        call.model_copy(update={"output": output}) if call.call_id == call_id else call
        for call in chain.parallel
    )
    return chain.model_copy(update={"parallel": answered})


def _cancels(chain: ToolChain, reason: str) -> tuple[CancelTool, ...]:
    """A cancel for each call in flight whose outcome is not in yet."""
    return tuple(
        CancelTool(call_id=call.call_id, reason=reason) for call in chain.in_flight if call.output is None
    )


def _outputs(chain: ToolChain) -> tuple[ItemCreate, ...]:
    """The function_call_output of each call in flight, in the order the calls came."""
    outputs = []
    for call in chain.in_flight:
        assert call.output is not None
        outputs.append(_output(call.call_id, call.output))
    return tuple(outputs)


def _refused_step(
    event: FunctionCallArgumentsDone,
    code: str,
    message: str,
    status: Literal["refused", "unavailable"] = "refused",
) -> RefuseToolStep:
    return RefuseToolStep(
        call_id=event.call_id,
        item_id=event.item_id,
        response_id=event.response_id,
        name=event.name,
        arguments=event.arguments,
        code=code,
        message=message,
        status=status,
    )


def deadline_passed(state: SessionState, call_id: str) -> Step:
    """The tool's outcome never came back: answer the call as interrupted so the turn goes on
    (and the durable step says why)."""
    if _running(state.realtime.chain, call_id) is None:
        return unchanged(state)
    message = "The tool did not report back in time; its result is unknown."
    interrupted = ToolOutcome(
        status="interrupted",
        error=ToolError(code="tool_deadline_passed", message=message),
        elapsed_ms=MAXIMUM_TOOL_MS + TOOL_DEADLINE_GRACE_MS,
    )
    recorded = Step(
        state=state,
        effects=(
            CancelTool(call_id=call_id, reason="tool_deadline_passed"),
            InterruptToolStep(call_id=call_id, code="tool_deadline_passed", message=message),
        ),
    )
    return recorded.then(tool_finished(state, call_id, interrupted))


def interrupted_by_end(before: SessionState, step: Step) -> Step:
    """A session that ends while tools run stops each and records why."""
    running = [call for call in before.realtime.chain.in_flight if call.output is None]
    if before.is_terminal or not step.state.is_terminal or not running:
        return step
    reason = step.state.end_reason or "session_ended"
    stopped: list[CancelTool | InterruptToolStep] = []
    for call in running:
        stopped.append(CancelTool(call_id=call.call_id, reason=reason))
        stopped.append(
            InterruptToolStep(
                call_id=call.call_id, code=reason, message=f"The call ended ({reason}) while the tool ran."
            )
        )
    return Step(
        state=step.state.with_realtime(chain=step.state.realtime.chain.next_turn()),
        controls=step.controls,
        effects=(*step.effects, *stopped),
    )


def tool_finished(state: SessionState, call_id: str, outcome: ToolOutcome) -> Step:
    """The tool's outcome is in. Continue if the response already completed; deliver the
    output without a response if the caller moved on; otherwise wait for the response (and, in
    parallel, for the outcomes of the response's other calls)."""
    if _running(state.realtime.chain, call_id) is None:
        return unchanged(state)
    chain = _with_output(state.realtime.chain, call_id, continuation_output(call_id, outcome))
    waiting = state.with_realtime(chain=chain)
    if not chain.response_completed or not chain.outcomes_in:
        return Step(state=waiting)
    if chain.continuation_allowed:
        return continue_after_tool(waiting)
    return deliver_without_response(waiting)


def response_finished(state: SessionState, event: ResponseDone) -> Step | None:
    """The tool chain's part in a response ending, or None when it has none (the turn then
    ends as usual)."""
    turn = state.realtime.turn
    chain = state.realtime.chain
    if turn is None or turn.response_id not in (event.response.id, None):
        return None
    completed = event.response.status == "completed"
    pending = chain.pending
    if pending is None:
        if completed and chain.limit_refused and may_respond(state, turn.context):
            reported = state.with_realtime(chain=chain.model_copy(update={"limit_refused": False}))
            return ask_for_response(reported, turn, tool_choice="none")
        return None
    if completed:
        if chain.outcomes_in and chain.continuation_allowed:
            return continue_after_tool(state)
        if chain.outcomes_in:
            # The outcome came in, then the caller moved on: the output still goes (the seed
            # waited here for an outcome that had already arrived, leaving an orphan call).
            return deliver_without_response(state)
        return Step(state=state.with_realtime(chain=chain.model_copy(update={"response_completed": True})))
    # Cancelled, failed or incomplete: nothing will continue from this response.
    if chain.outcomes_in:
        return deliver_without_response(state)
    return Step(
        state=state.with_realtime(
            chain=chain.model_copy(update={"response_completed": True, "continuation_allowed": False})
        ),
        effects=_cancels(chain, f"response_{event.response.status}"),
    )


def caller_moved_on(state: SessionState, reason: str) -> Step:
    """Barge-in or new input while tools run: cancel them; their outcomes will be delivered
    without driving a response."""
    if state.realtime.chain.pending is None:
        return unchanged(state)
    chain = state.realtime.chain.model_copy(update={"continuation_allowed": False})
    return Step(state=state.with_realtime(chain=chain), effects=_cancels(chain, reason))


def continue_after_tool(state: SessionState) -> Step:
    """Send the outputs, then ask for the one response that speaks them, with the turn's
    context (tool-free when a call of them was refused for the turn's limit)."""
    chain = state.realtime.chain
    turn = state.realtime.turn
    assert chain.pending is not None and turn is not None
    if not may_respond(state, turn.context):
        # The line closed while the tool ran: its output is stored, no response is asked for.
        return deliver_without_response(state)
    outputs = _outputs(chain)
    # In parallel, a call refused for the limit came beside these: the response after their
    # outputs is the report the refusal promised (one at a time it follows the next response).
    reported = chain.limit_refused and in_parallel(state)
    update: dict[str, object] = {"pending": None, "parallel": (), "response_completed": False}
    if reported:
        update["limit_refused"] = False
    chain = chain.model_copy(update=update)
    delivered = Step(state=state.with_realtime(chain=chain), controls=outputs)
    return delivered.then(ask_for_response(delivered.state, turn, tool_choice="none" if reported else None))


def deliver_without_response(state: SessionState) -> Step:
    """The chain will not continue, but each function call still gets its output; the turn
    then ends, and input queued meanwhile is answered."""
    outputs = _outputs(state.realtime.chain)
    released = state.evolve(phase=Phase.LISTENING).with_realtime(
        turn=None, chain=state.realtime.chain.next_turn()
    )
    step = Step(state=released, controls=outputs)
    return step.then(owed_next(released))


def refusal(call_id: str, code: str, message: str) -> str:
    """The output that answers a refused function call."""
    return _answer(call_id, "refused", code, message)


def _answer(call_id: str, status: str, code: str, message: str) -> str:
    error = {"code": code, "message": message}
    return _encode({"call_id": call_id, "status": status, "result": None, "error": error})


def continuation_output(call_id: str, outcome: ToolOutcome) -> str:
    """The function_call_output for an outcome, at most 16,000 bytes of UTF-8 JSON: a longer
    one keeps its status and error and replaces the result with a note and a preview."""

    def output(result: Any, error: dict[str, Any] | None) -> str:
        return _encode({"call_id": call_id, "status": outcome.status, "result": result, "error": error})

    def truncated(preview: str, error: dict[str, Any] | None) -> str:
        return output({"truncated": True, "note": TRUNCATION_NOTE, "preview": preview}, error)

    error = outcome.error.model_dump(mode="json") if outcome.error else None
    whole = output(outcome.result, error)
    if _utf8_bytes(whole) <= MAXIMUM_CONTINUATION_BYTES:
        return whole

    # The room is measured on the output as it will be sent, because escaping makes the
    # preview longer once it sits inside it: a quote or backslash takes two bytes there and a
    # control character up to seven (measured: a preview cut to 8,000 bytes before escaping
    # gave outputs of 16,201 bytes).
    if error is not None and _utf8_bytes(truncated("", error)) > MAXIMUM_CONTINUATION_BYTES:
        # The runner cuts error messages to 2,000 characters, but an outcome does not enforce
        # it; an error too long for the bound is cut too, the code kept whole.
        room = MAXIMUM_CONTINUATION_BYTES - _utf8_bytes(truncated("", {**error, "message": ELLIPSIS}))
        error = {**error, "message": _escaped_prefix(error["message"], room) + ELLIPSIS}
    room = MAXIMUM_CONTINUATION_BYTES - _utf8_bytes(truncated("", error))
    return truncated(_escaped_prefix(_encode(outcome.result), room), error)


def _output(call_id: str, output: str) -> ItemCreate:
    return ItemCreate(item={"type": "function_call_output", "call_id": call_id, "output": output})


def _encode(value: Any) -> str:
    """Compact JSON that is always valid UTF-8."""
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        encoded.encode()
    except UnicodeEncodeError:
        # A str built in Python can hold a lone surrogate, which UTF-8 cannot carry (nor a
        # strict JSON parser take as an escape); it goes as U+FFFD, what a decoder shows for it.
        return encoded.translate(_REPLACED_SURROGATES)
    return encoded


def _utf8_bytes(text: str) -> int:
    return len(text.encode())


def _escaped_prefix(text: str, maximum_bytes: int) -> str:
    """The longest prefix of ``text`` whose JSON string escape takes at most ``maximum_bytes``
    of UTF-8 (quotes excluded); cut between characters, so it is always valid UTF-8."""

    def escaped_bytes(length: int) -> int:
        return _utf8_bytes(_encode(text[:length])) - len('""')

    # Every character escapes to at least one byte, and a longer prefix never escapes
    # shorter, so the longest fitting length can be searched for.
    fitting, too_long = 0, min(len(text), max(maximum_bytes, 0)) + 1
    while too_long - fitting > 1:
        middle = (fitting + too_long) // 2
        if escaped_bytes(middle) <= maximum_bytes:
            fitting = middle
        else:
            too_long = middle
    return text[:fitting]


def transfer_target(state: SessionState, arguments: str) -> str | None:
    """The target a transfer_call names, if the route allows it (else None: the call is
    answered as an unavailable tool, never sent)."""
    try:
        target = json.loads(arguments).get("target")
    except (ValueError, AttributeError):
        return None
    allowed = state.phone.transfer_targets if state.phone is not None else ()
    if not isinstance(target, str) or target not in allowed or state.transferring_to is not None:
        return None
    if state.medium != "sip":
        return None
    return target


def transfer_requested(state: SessionState, call_id: str, arguments: str, target: str) -> Step:
    """The model hands the call on: the refer is asked for now; the call ends `transferred`
    when it goes through, or the model is told it failed (the call's output)."""
    called = {"call_id": call_id, "name": "transfer_call", "arguments": arguments}
    return Step(
        state=state.evolve(transferring_to=target, transfer_call_id=call_id),
        effects=(LogEntry(kind="tool.call", data=called), TransferCall(to=target)),
    )
