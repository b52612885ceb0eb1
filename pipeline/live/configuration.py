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


def live_configuration(state: SessionState) -> dict[str, Any]:
    """A Live session's startup configuration, which a call is created or accepted with (the
    gateway adds the model). A call going out also asks the provider's Decisions, as the callee
    speaks, whether they asked not to be called again."""
    if state.outbound is None:
        return {"instructions": state.instructions, "delegation": live_delegation(state)}
    return {
        "instructions": f"{WAIT_FOR_THE_ANSWER}\n\n{state.instructions}",
        "delegation": live_delegation(state),
        "triggers": [DO_NOT_CALL_TRIGGER],
    }


def live_update(state: SessionState) -> dict[str, Any]:
    """The `session.update` a Live sideband sends: only delegation settings may change."""
    return {"delegation": live_delegation(state)}
