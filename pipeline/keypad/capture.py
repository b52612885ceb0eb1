"""Card capture by keypad: the caller keys a number in for a tool, and nobody hears it.

A collection is asked for by the app (`POST /v1/sessions/{id}/collect`) or by the model (its
built-in `collect_digits` tool, on Realtime). Then, in order:

1. the line is held (the agent neither hears nor answers the caller), and the gateway's boundary
   is told to keep the key presses (`CollectDigits`);
2. the prompt is said in the agent's voice, the one response a held line allows;
3. the caller types; the boundary keeps the presses in memory, and when the end key is pressed
   or `max` digits are in, hands the workers one event with their count and the digits sealed
   with the session's public key (`DigitsCollected`): no press is logged, queued or stored;
4. the tool runs with the sealed digits in its sensitive parameter (the runner opens them in
   memory), as a durable tool step like any other;
5. the line is given back, and the model is told the tool's outcome (never the digits; what
   the tool said is redacted too) and tells the caller.

An entry with too few digits, a caller who does not finish within `timeout_s`, a tool that does
not report back, or a sideband re-opened meanwhile (its boundary's presses went with the old
one) ends the collection with that reason, told to the model the same way. A call that ends
meanwhile stops its tool. Every step writes its call-log entry (`keypad.*`, with counts only).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pipeline.call.catalog import ToolOutcome
from pipeline.call.keypad import (
    DEFAULT_TIMEOUT_S,
    MAXIMUM_TIMEOUT_S,
    KeypadAsk,
    KeypadEntry,
    parameter_for,
    tool_refusal,
)
from pipeline.call.limits import MAXIMUM_TOOL_MS, TOOL_DEADLINE_GRACE_MS
from pipeline.call.messages import Playback
from pipeline.dialects import dialect_of
from pipeline.operator import line
from pipeline.privacy.detect import redact
from pipeline.session.refusals import not_in_call_for
from pipeline.session.state import SessionState
from pipeline.session.step import (
    CancelTool,
    CollectDigits,
    InterruptToolStep,
    LogEntry,
    RequestToolStep,
    RunTool,
    Step,
    answering,
    cancel_timer,
    refused,
    refused_for,
    schedule_timer,
    unchanged,
)
from pipeline.session.timers import KeypadDeadline
from pipeline.session.wire import CollectRequested, DigitsCollected, ToolFinished

# What the model is told once a collection is over (a system note: the caller hears none of it).
TOOL_ANSWERED = (
    "The caller typed {count} digits on the keypad for {tool}, which answered: {outcome}. You are "
    "never told the digits and must not ask the caller to say them. Tell the caller the outcome."
)
NOT_COLLECTED = (
    "The caller's keypad entry for {tool} did not go through: {reason}. Nothing was charged or "
    "sent. Tell the caller, and offer to try again on the keypad."
)
TOO_FEW = "they typed {count} digits, and at least {minimum} are needed"
NOT_FINISHED = "they did not finish typing within {timeout_s:g} seconds"
NOT_SEALED = "this session has no key to seal the digits with, so they were not kept"
LINE_LOST = "the call's connection was re-opened while they typed, and what they had typed went with it"
TOOL_LATE = "the tool did not report back in time; its result is unknown"


def collect(state: SessionState, event: CollectRequested) -> Step:
    """The app asks for a collection: 202 `collecting` once it has begun, or a typed refusal."""
    ask = KeypadAsk(
        call_id="",
        tool=event.tool,
        prompt=event.prompt,
        parameter=event.parameter,
        arguments=event.arguments,
        digits=event.digits,
    )
    not_live = not_in_call_for(state)
    if not_live is not None:
        return refused_for(state, event.request_id, event.gateway_id, not_live)
    refusal = _cannot_collect(state, ask)
    if refusal is not None:
        code, status, message = refusal
        return refused(state, event.request_id, event.gateway_id, status, code, message)
    timeout_s = min(event.timeout_s, MAXIMUM_TIMEOUT_S)
    begun = _begin(state, ask, by="app", timeout_s=timeout_s, cut=True, playback=event.playback)
    assert begun.state.collecting is not None
    body = {"status": "collecting", "collection": begun.state.collecting.number}
    return answering(begun, event.request_id, event.gateway_id, 202, body)


def asked_by_model(step: Step) -> Step:
    """The model's `collect_digits` call, taken up by its wing in this step: begun now (what the
    model is saying is not cut; it ends before the prompt is said), or, when it cannot be, the
    model is told why."""
    ask = step.state.collect_asked
    if ask is None:
        return step
    taken = Step(state=step.state.evolve(collect_asked=None), controls=step.controls, effects=step.effects)
    refusal = _cannot_collect(taken.state, ask)
    if refusal is None:
        begun = _begin(taken.state, ask, by="model", timeout_s=DEFAULT_TIMEOUT_S, cut=False, playback=None)
        return taken.then(begun)
    code, _, message = refusal
    logged = Step(
        state=taken.state,
        effects=(LogEntry(kind="keypad.refused", data={"tool": ask.tool, "by": "model", "code": code}),),
    )
    note = NOT_COLLECTED.format(tool=ask.tool, reason=message)
    return taken.then(logged).then(dialect_of(logged.state).note(logged.state, note))


def typed(state: SessionState, event: DigitsCollected) -> Step:
    """The caller finished typing: the tool runs with the sealed digits, or the collection ends
    (too few digits, or nothing to seal them with)."""
    entry = state.collecting
    if entry is None or entry.number != event.number or entry.phase != "typing" or state.is_terminal:
        return unchanged(state)
    logged = Step(
        state=state.evolve(collecting=entry.model_copy(update={"count": event.count})),
        effects=(
            LogEntry(
                kind="keypad.typed",
                data={"collection": entry.number, "count": event.count, "ended_by": event.ended_by},
            ),
            cancel_timer(KeypadDeadline(entry.number)),
        ),
    )
    if event.count < entry.digits.min:
        reason = TOO_FEW.format(count=event.count, minimum=entry.digits.min)
        return logged.then(_not_collected(logged.state, "too_few_digits", reason))
    if event.digits is None:
        return logged.then(_not_collected(logged.state, "not_sealed", NOT_SEALED))
    arguments = json.dumps({**entry.arguments, entry.parameter: event.digits}, ensure_ascii=False)
    running = logged.state.evolve(
        collecting=entry.model_copy(update={"count": event.count, "phase": "running"})
    )
    return logged.then(
        Step(
            state=running,
            effects=(
                RequestToolStep(
                    call_id=entry.call_id,
                    item_id=entry.call_id,
                    response_id=None,
                    name=entry.tool,
                    arguments=arguments,
                ),
                RunTool(call_id=entry.call_id, name=entry.tool, arguments=arguments),
                schedule_timer(
                    KeypadDeadline(entry.number), delay_ms=MAXIMUM_TOOL_MS + TOOL_DEADLINE_GRACE_MS
                ),
            ),
        )
    )


def owns(state: SessionState, call_id: str) -> bool:
    """Whether this tool call is the running collection's."""
    entry = state.collecting
    return entry is not None and entry.phase == "running" and entry.call_id == call_id


def tool_finished(state: SessionState, event: ToolFinished) -> Step:
    """The tool that got the digits reported back: the line is given back and the model told."""
    entry = state.collecting
    if entry is None or not owns(state, event.call_id) or state.is_terminal:
        return unchanged(state)
    outcome = ToolOutcome.model_validate(event.outcome)
    told = TOOL_ANSWERED.format(count=entry.count, tool=entry.tool, outcome=_told(state, outcome))
    error = outcome.error.code if outcome.error is not None else None
    return _over(state, entry, outcome.status, error, told, (cancel_timer(KeypadDeadline(entry.number)),))


def deadline_passed(state: SessionState, number: int) -> Step:
    """The collection is not over in time: the caller stopped typing (the boundary is told to
    forget what it holds), or the tool never reported back (it is stopped, its step interrupted)."""
    entry = state.collecting
    if entry is None or entry.number != number or state.is_terminal:
        return unchanged(state)
    if entry.phase == "typing":
        reason = NOT_FINISHED.format(timeout_s=entry.timeout_s)
        stop = CollectDigits(number=entry.number, digits=None)
        return Step(state=state, effects=(stop,)).then(_not_collected(state, "keypad_timeout", reason))
    stopped = (
        CancelTool(call_id=entry.call_id, reason="tool_deadline_passed"),
        InterruptToolStep(call_id=entry.call_id, code="tool_deadline_passed", message=TOOL_LATE),
    )
    told = NOT_COLLECTED.format(tool=entry.tool, reason=TOOL_LATE)
    return _over(state, entry, "interrupted", "tool_deadline_passed", told, stopped)


def sideband_replaced(state: SessionState) -> Step:
    """A sideband (re-)opened while the caller typed: its boundary holds none of their presses."""
    entry = state.collecting
    if entry is None or entry.phase != "typing" or state.is_terminal:
        return unchanged(state)
    stop = CollectDigits(number=entry.number, digits=None)
    return Step(state=state, effects=(stop,)).then(_not_collected(state, "line_lost", LINE_LOST))


def ended(before: SessionState, step: Step) -> Step:
    """A call that ends during a collection: its tool is stopped, and the log says so."""
    entry = before.collecting
    if entry is None or before.is_terminal or not step.state.is_terminal:
        return step
    reason = step.state.end_reason or "session_ended"
    stopped = _stopped(entry, reason, f"The call ended ({reason}) while the tool ran.")
    return Step(
        state=step.state.evolve(collecting=None),
        controls=step.controls,
        effects=(*step.effects, *stopped),
    )


def refusing_while_collecting(
    state: SessionState, request_id: str | None, gateway_id: str | None
) -> Step | None:
    """The refusal of a line verb (hold, unhold, attention) while the caller types, or None."""
    if state.collecting is None:
        return None
    message = f"the caller is keying in for {state.collecting.tool}; the line is given back when that is over"
    return refused(state, request_id, gateway_id, 409, "collecting", message)


def cancelled_by(state: SessionState, reason: str) -> Step:
    """A person takes the line during a collection: it ends (the boundary forgets the presses,
    a running tool is stopped), and the line stays the person's."""
    entry = state.collecting
    if entry is None:
        return unchanged(state)
    stopped = _stopped(entry, reason, f"A person took the line ({reason}).")
    return Step(state=state.evolve(collecting=None), effects=stopped)


def _stopped(entry: KeypadEntry, reason: str, message: str) -> tuple[Any, ...]:
    """What ends a collection cut short: its log entry, its timer, and the boundary's presses
    forgotten or its running tool stopped."""
    finished = LogEntry(
        kind="keypad.finished",
        data={"collection": entry.number, "status": "cancelled", "code": reason, "count": entry.count},
    )
    if entry.phase == "typing":
        stop: tuple[Any, ...] = (CollectDigits(number=entry.number, digits=None),)
    else:
        stop = (
            CancelTool(call_id=entry.call_id, reason=reason),
            InterruptToolStep(call_id=entry.call_id, code=reason, message=message),
        )
    return (finished, cancel_timer(KeypadDeadline(entry.number)), *stop)


# ── the steps of a collection ─────────────────────────────────────────────────────────────


def _cannot_collect(state: SessionState, ask: KeypadAsk) -> tuple[str, int, str] | None:
    """Why this collection cannot begin now: (code, status, message), or None."""
    not_live = not_in_call_for(state)
    if not_live is not None:
        return not_live.code, 409, str(not_live)
    if state.medium != "sip":
        return "no_keypad", 409, "only a phone call has a keypad; this call came through WebRTC"
    if state.collecting is not None:
        return "already_collecting", 409, f"the caller is already keying in for {state.collecting.tool}"
    if state.taken_by is not None:
        return "already_held", 409, f"{state.taken_by.id} holds the line"
    if state.held or state.attention is not None:
        return "line_held", 409, "the line is held; give it back before asking the caller to type"
    refusal = tool_refusal(ask, state.tool_versions, state.tool_sensitive)
    if refusal is not None:
        code, message = refusal
        return code, 422, message
    return None


def _begin(
    state: SessionState,
    ask: KeypadAsk,
    *,
    by: Literal["app", "model"],
    timeout_s: float,
    cut: bool,
    playback: Playback | None,
) -> Step:
    parameter, _ = parameter_for(state.tool_sensitive, ask.tool, ask.parameter)
    assert parameter is not None
    number = state.collections + 1
    entry = KeypadEntry(
        number=number,
        tool=ask.tool,
        parameter=parameter,
        arguments=ask.arguments,
        digits=ask.digits,
        timeout_s=timeout_s,
        by=by,
    )
    started = Step(
        state=state.evolve(collecting=entry, collections=number),
        effects=(
            LogEntry(
                kind="keypad.collecting",
                data={"collection": number, "tool": ask.tool, "by": by, "digits": ask.digits.model_dump()},
            ),
            CollectDigits(number=number, digits=ask.digits),
            schedule_timer(KeypadDeadline(number), delay_ms=round(timeout_s * 1000)),
        ),
    )
    if cut:
        held = started.then(line.hold_line(started.state, playback))
    else:
        # The model's own response asked for this: it ends as it would, then the prompt is said.
        held = started.then(line.hold_quietly(started.state))
    said = LogEntry(kind="keypad.prompted", data={"collection": number, "text": ask.prompt})
    return held.then(dialect_of(held.state).person_says(held.state, ask.prompt, said, None, None))


def _not_collected(state: SessionState, code: str, reason: str) -> Step:
    entry = state.collecting
    assert entry is not None
    told = NOT_COLLECTED.format(tool=entry.tool, reason=reason)
    return _over(state, entry, "failed", code, told, (cancel_timer(KeypadDeadline(entry.number)),))


def _over(
    state: SessionState,
    entry: KeypadEntry,
    status: str,
    code: str | None,
    told: str,
    effects: tuple[Any, ...],
) -> Step:
    """The collection is over: logged, the line given back, and the model told."""
    finished = LogEntry(
        kind="keypad.finished",
        data={"collection": entry.number, "status": status, "code": code, "count": entry.count},
    )
    over = Step(state=state.evolve(collecting=None), effects=(*effects, finished))
    given = over.then(line.give_back(over.state))
    return given.then(dialect_of(given.state).note(given.state, told))


def _told(state: SessionState, outcome: ToolOutcome) -> str:
    """The tool's outcome as the model is told it, redacted like anything the caller said (a tool
    that echoes the card would otherwise hand it to the model)."""
    error = outcome.error.model_dump(mode="json") if outcome.error is not None else None
    text = json.dumps(
        {"status": outcome.status, "result": outcome.result, "error": error}, ensure_ascii=False
    )
    return redact(text, state.privacy.kinds)
