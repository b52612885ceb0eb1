"""What only a phone call has: keypad presses, the caller's silences, and the model's transfer.

A key press (DTMF) is logged (`call.key`) and does what the call's route maps it to: ask for a
person, or end the call. A silence (the provider's idle timeout, configured from the route) is
counted: the agent asks whether the caller is still there, and after the route's number of them
says goodbye and hangs up (`caller_silent`). The model may hand the call on with the built-in
`transfer_call`, but only to one of the route's targets.
"""

from __future__ import annotations

import json

from pipeline import admission, line
from pipeline.realtime.turns import SAY_EXACTLY, begin_directed
from pipeline.state import IN_CALL, Phase, ResponseContext, SessionState
from pipeline.step import LogEntry, Step, TransferCall, unchanged
from pipeline.wire import AttentionRequested, CallerSilent, KeyPressed

# How long a caller who pressed the key for a person waits for one.
KEY_WAIT_S = 120.0
ARE_YOU_THERE = "The caller has said nothing for a while. Ask them, briefly, whether they are still there."
GOODBYE_SILENT = "I can't hear anyone on the line, so I'll end the call now. Goodbye!"


def key_pressed(state: SessionState, event: KeyPressed) -> Step:
    """A keypad press: logged, then what the route maps the key to."""
    if state.phase not in IN_CALL:
        return unchanged(state)
    key = event.event
    pressed = Step(state=state, effects=(LogEntry(kind="call.key", data={"key": key}),))
    action = state.phone.keys.get(key) if state.phone is not None else None
    if action == "attention" and state.attention is None and state.taken_by is None:
        wanted = AttentionRequested(reason=f"the caller pressed {key}", wait_s=KEY_WAIT_S)
        return pressed.then(line.attention(state, wanted))
    if action == "end":
        return pressed.then(admission.finish(state, "caller_pressed_end"))
    return pressed


def caller_silent(state: SessionState, event: CallerSilent) -> Step:
    """The caller said nothing for the idle timeout: counted; the agent asks whether they are
    there, or, at the route's limit, says goodbye and hangs up when that is said."""
    if state.phase not in IN_CALL:
        return unchanged(state)
    heard = state.silences_heard + 1
    counted = Step(
        state=state.evolve(silences_heard=heard),
        effects=(LogEntry(kind="call.silence", data={"count": heard}),),
    )
    now = counted.state
    if now.line_closed or now.hanging_up or now.turn is not None or now.phase is not Phase.LISTENING:
        return counted
    limit = state.phone.silences if state.phone is not None else None
    if limit is not None and heard >= limit:
        goodbye = ResponseContext(
            instructions=SAY_EXACTLY.format(text=GOODBYE_SILENT),
            max_output_tokens=state.limits.max_output_tokens,
            input_item_id="",
            tool_choice="none",
        )
        leaving = now.evolve(hanging_up=True, hangup_reason="caller_silent")
        return counted.then(begin_directed(leaving, goodbye))
    prompt = ResponseContext(
        instructions=f"{state.instructions}\n\n{ARE_YOU_THERE}",
        max_output_tokens=state.limits.max_output_tokens,
        input_item_id="",
        tool_choice="none",
    )
    return counted.then(begin_directed(now, prompt))


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
