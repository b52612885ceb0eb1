"""How a call ends, in the terms every call has: finished (the sideband closed, the call hung
up), failed (a durable incident too), or transferred (the caller went on; the provider ends the
leg). What a provider's sideband is told on the way out (`closing`) is its wing's to say: the
neutral rules pass `dialect_of(state).closing(state)`, a wing its own."""

from __future__ import annotations

from pipeline.state import Phase, SessionState
from pipeline.step import CloseCall, Control, LogEntry, RecordIncident, Step


def finish(state: SessionState, reason: str, closing: tuple[Control, ...] = ()) -> Step:
    """End the session normally: the sideband is told `closing`, then closed, and the provider
    call hung up."""
    return Step(
        state=state.evolve(phase=Phase.ENDED, end_reason=reason, turn=None),
        controls=closing,
        effects=(CloseCall(reason=reason, hangup=state.call_id is not None),),
    )


def fail(state: SessionState, code: str, summary: str, closing: tuple[Control, ...] = ()) -> Step:
    """Fail the session: a durable incident, the sideband told `closing` and closed, and the
    call hung up."""
    return Step(
        state=state.evolve(phase=Phase.FAILED, end_reason=code, turn=None),
        controls=closing,
        effects=(
            RecordIncident(code=code, summary=summary, context={"phase": str(state.phase)}),
            CloseCall(reason=code, hangup=state.call_id is not None),
        ),
    )


def transferred(state: SessionState, *, by_agent: bool = False) -> Step:
    """The caller went on to the transfer's target: the call is over here. The provider ends the
    leg itself (a hangup now could cut the transfer short)."""
    reason = "agent_transferred" if by_agent else "transferred"
    return Step(
        state=state.evolve(
            phase=Phase.ENDED, end_reason=reason, turn=None, transferring_to=None, transfer_call_id=None
        ),
        effects=(CloseCall(reason=reason, hangup=False),),
    )


def closed_while_transferring(state: SessionState) -> Step | None:
    """The provider ended the call while a transfer was under way: the caller went on (the
    outcome may be read after the end, where it changes nothing)."""
    if state.transferring_to is None or state.is_terminal:
        return None
    outcome = {"to": state.transferring_to, "ok": True, "error": None}
    logged = Step(state=state, effects=(LogEntry(kind="call.transferred", data=outcome),))
    return logged.then(transferred(state, by_agent=state.transfer_call_id is not None))
