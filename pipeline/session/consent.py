"""Recording consent: the notice said before the greeting, and the caller's "no".

A session whose policy has `consent` says its notice first: before the greeting's words, or as
the greeting when it has none. The caller declines with the policy's `decline_key` on the keypad,
or by telling the model, which has the built-in `decline_recording` tool for it. Declined, the
call's storage is `metadata` from that moment: once it is over, only what it did is kept, not
what was said (`consent.declined` in the call log says when and how).
"""

from __future__ import annotations

from typing import Any, Literal

from pipeline.privacy.policy import Consent
from pipeline.session.state import Greeting, SessionState
from pipeline.session.step import LogEntry, Step, unchanged

DECLINE_RECORDING = "decline_recording"

# The words a notice is said with when the greeting is a reply the model composes.
SAY_FIRST = 'First say exactly these words, word for word: "{notice}" Then: {reply}'

DECLINED_RESULT = {
    "recording": "declined",
    "note": "Nothing the caller says from now on is kept after the call. Tell them so briefly and go on.",
}


def greeting_with_consent(greeting: Greeting | None, consent: Consent | None) -> Greeting | None:
    """The greeting a session says, its consent notice first."""
    if consent is None:
        return greeting
    if greeting is None:
        return Greeting(say=consent.say)
    if greeting.say is not None:
        return Greeting(say=f"{consent.say} {greeting.say}")
    assert greeting.reply is not None
    return Greeting(reply=SAY_FIRST.format(notice=consent.say, reply=greeting.reply))


def declines_by_key(state: SessionState, key: str) -> bool:
    """Whether this keypad press is the caller declining to be recorded."""
    consent = state.privacy.consent
    return consent is not None and consent.decline_key is not None and key == consent.decline_key


def declined(state: SessionState, by: Literal["key", "model"]) -> Step:
    """The caller declined: the call keeps only its metadata from now on (once)."""
    if state.storage == "metadata":
        return unchanged(state)
    return Step(
        state=state.evolve(storage="metadata"),
        effects=(LogEntry(kind="consent.declined", data={"by": by}),),
    )


def decline_recording_tool() -> dict[str, Any]:
    """The built-in tool with which the model declines recording for the caller."""
    return {
        "type": "function",
        "name": DECLINE_RECORDING,
        "description": (
            "The caller does not want this call recorded or kept. Call this as soon as they say so; "
            "the call goes on."
        ),
        "parameters": {"type": "object", "properties": {}},
    }
