"""What only a phone call has: keypad presses (the caller's silences and the model's transfer
are Realtime's: `pipeline/realtime/silences.py`, and `transfer_call` in its tools).

A key press (DTMF) is logged (`call.key`) and does what the call's route (or, for a call going
out, its `keys`) maps it to: ask for a person, end the call, or opt out — the other party's
number goes on the do-not-call list and the call ends; or, when it is the session's consent
`decline_key`, declines recording.
"""

from __future__ import annotations

from typing import Literal

from pipeline import admission
from pipeline.call.errors import MalformedNumber
from pipeline.operator import line
from pipeline.phone.numbers import e164
from pipeline.session.consent import declined, declines_by_key
from pipeline.session.state import IN_CALL, SessionState
from pipeline.session.step import LogEntry, Step, Suppress, unchanged
from pipeline.session.wire import AttentionRequested, KeyPressed

# How long a caller who pressed the key for a person waits for one.
KEY_WAIT_S = 120.0


def key_pressed(state: SessionState, event: KeyPressed) -> Step:
    """A keypad press: logged, then what the route maps the key to."""
    if state.phase not in IN_CALL:
        return unchanged(state)
    key = event.event
    pressed = Step(state=state, effects=(LogEntry(kind="call.key", data={"key": key}),))
    if declines_by_key(state, key):
        return pressed.then(declined(state, "key"))
    action = state.phone.keys.get(key) if state.phone is not None else None
    if action == "attention" and state.attention is None and state.taken_by is None:
        wanted = AttentionRequested(reason=f"the caller pressed {key}", wait_s=KEY_WAIT_S, by="caller")
        return pressed.then(line.attention(state, wanted))
    if action == "end":
        return pressed.then(admission.finish(state, "caller_pressed_end"))
    if action == "opt_out":
        return pressed.then(opted_out(state, "key"))
    return pressed


def opted_out(state: SessionState, by: Literal["key", "model"], *, ends: bool = True) -> Step:
    """The other party asked never to be called again: their number goes on the do-not-call
    list (logged, with how they asked); a key press ends the call, words the model heard leave
    it to the model to say it will not call again and goodbye (`ends` False)."""
    try:
        number = e164(the_other_party(state))
    except MalformedNumber:
        # A caller who gave no number (`anonymous`, or none a caller can be dialled back on)
        # has nothing to put on the list: as if no key were mapped.
        return unchanged(state)
    logged = Step(
        state=state,
        effects=(
            LogEntry(kind="call.opted_out", data={"by": by}),
            Suppress(number=number, source="opt_out" if by == "key" else "model"),
        ),
    )
    return logged.then(admission.finish(state, "opted_out")) if ends else logged


def the_other_party(state: SessionState) -> str:
    """The number of whoever Switchboard talks to: the callee of a call it placed, else the caller."""
    if state.outbound is not None:
        return state.outbound.to
    return state.phone.caller if state.phone is not None else ""
