"""What the app has the agent do: say given words, or reply now as it is told.

Either is a directed turn: a response Switchboard asks for with no caller input behind it, held
to the same rules as any turn (its response deadline, barge-in, its response.done ending it). It
starts only while the line is free — the call is live and no response is owed — so it never
talks over a running answer; otherwise the app is told why (409) and may ask again.
"""

from __future__ import annotations

from typing import Any

from pipeline.call.capabilities import too_long
from pipeline.dialects import capabilities_of, dialect_of
from pipeline.session.refusals import not_in_call_for
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import Step, answering, refused_by, unchanged
from pipeline.session.wire import AgentReplyRequested, AgentSayRequested


def say(state: SessionState, event: AgentSayRequested) -> Step:
    """The agent says the app's words now (202), or the app is told why not (409)."""
    refusal = _busy(state)
    if refusal is not None:
        return answering(unchanged(state), event.request_id, event.gateway_id, 409, refusal)
    cannot = too_long(capabilities_of(state), event.text)
    if cannot is not None:
        return refused_by(state, event.request_id, event.gateway_id, cannot)
    spoken = dialect_of(state).say(state, event.text)
    return answering(spoken, event.request_id, event.gateway_id, 202, {"status": "speaking"})


def reply(state: SessionState, event: AgentReplyRequested) -> Step:
    """The agent replies now, steered by the app's instructions (202), or the app is told why
    not (409)."""
    refusal = _busy(state)
    if refusal is not None:
        return answering(unchanged(state), event.request_id, event.gateway_id, 409, refusal)
    cannot = too_long(capabilities_of(state), event.instructions)
    if cannot is not None:
        return refused_by(state, event.request_id, event.gateway_id, cannot)
    steered = dialect_of(state).steer(state, event.instructions)
    return answering(steered, event.request_id, event.gateway_id, 202, {"status": "replying"})


def _busy(state: SessionState) -> dict[str, Any] | None:
    """Why the agent cannot be directed now, as the API's error body; None when it can."""
    refused = not_in_call_for(state)
    if refused is not None:
        return refused.body()
    if state.line_closed:
        holder = f"{state.taken_by.id} holds the line" if state.taken_by else "the line is held"
        return {"error": {"code": "line_held", "message": f"{holder}; the agent says nothing meanwhile"}}
    if state.realtime.turn is not None or state.phase is not Phase.LISTENING:
        message = "the agent is answering (or still being configured); ask again when it listens"
        return {"error": {"code": "agent_busy", "message": message}}
    return None
