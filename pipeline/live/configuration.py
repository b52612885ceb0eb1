"""How a Live session is configured (LIVE_PROTOCOL.md §2.1): its instructions are fixed at
startup (changes are appended), and its delegations come to Switchboard."""

from __future__ import annotations

from typing import Any

from pipeline.session.state import SessionState


def live_delegation(state: SessionState) -> dict[str, Any]:
    """Client delegation: the tasks come to Switchboard, and the provider acknowledges each
    aloud after the session's delay unless Switchboard's progress note comes first."""
    setup = state.live.setup if state.live is not None else None
    delay = setup.acknowledgement_delay_ms if setup is not None else 0
    return {"type": "client", "acknowledgement_delay_ms": delay}


# A call going out is answered by a person or a machine, which Switchboard decides from the first
# words; a Live model's speech cannot be cut, so it is asked to wait for the verdict.
WAIT_FOR_THE_ANSWER = (
    "You are placing this phone call. Say nothing until you are told who answered it: a person, "
    "or an answering machine. Then do as you are told."
)


# The name of the question Switchboard has the provider's Decisions ask of the callee's words on a
# call going out: a "yes" puts their number on the do-not-call list (`pipeline.outbound.dialing`).
DO_NOT_CALL = "do_not_call"
DO_NOT_CALL_TRIGGER = {
    "type": "decisions",
    "event_type": "session.input_transcript.delta",
    "decisions": {
        "questions": [
            {
                "type": "predicate",
                "name": DO_NOT_CALL,
                "instructions": (
                    "Has the person asked not to be called again: to stop calling them, to be taken "
                    "off the list, or not to be contacted any more?"
                ),
            }
        ]
    },
}


# When to hand a task to Switchboard, in the plain words gpt-live-1.1 takes ("Describe in plain
# language when the model should hand a task to your backend"); added for a session with a
# delegation handler on a model whose catalog entry says it takes a plain-language policy.
DELEGATION_POLICY = (
    "Delegation policy: when the caller asks for something that needs information or an action "
    "you do not have in this conversation (an account, an order, a booking, a change to any of "
    "them), hand the task to the backend instead of answering from memory or guessing. Tell the "
    "caller briefly that you are checking, keep talking with them while the backend works, and "
    "give them its answer when it arrives. Answer everything else yourself."
)


def live_instructions(state: SessionState) -> str:
    """The instructions a Live session starts with: the session's, the delegation policy its
    model needs, and on a call going out the order to wait for who answers."""
    parts = [state.instructions]
    setup = state.live.setup if state.live is not None else None
    if setup is not None and setup.handler is not None and state.model.delegation_policy == "plain":
        parts.append(DELEGATION_POLICY)
    if state.outbound is not None:
        parts.insert(0, WAIT_FOR_THE_ANSWER)
    return "\n\n".join(parts)


def live_configuration(state: SessionState) -> dict[str, Any]:
    """A Live session's startup configuration, which a call is created or accepted with: its
    model (the gateway's default for a session stored before models were chosen per session),
    voice and instructions. A call going out also asks the provider's Decisions, as the callee
    speaks, whether they asked not to be called again."""
    configuration: dict[str, Any] = {
        "instructions": live_instructions(state),
        "delegation": live_delegation(state),
    }
    if state.model.id:
        configuration["model"] = state.model.id
    if state.model.voice is not None:
        configuration["audio"] = {"output": {"voice": voice_on_the_wire(state.model.voice)}}
    if state.outbound is not None:
        configuration["triggers"] = [DO_NOT_CALL_TRIGGER]
    return configuration


def voice_on_the_wire(voice: str) -> str | dict[str, str]:
    """A built-in voice by its name; a custom one (`voice_…`) as `{"id": …}`."""
    return {"id": voice} if voice.startswith("voice_") else voice


def live_update(state: SessionState) -> dict[str, Any]:
    """The `session.update` a Live sideband sends: only delegation settings may change."""
    return {"delegation": live_delegation(state)}
