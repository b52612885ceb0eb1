"""How a call ends, in the terms every call has: finished (the sideband closed, the call hung
up), failed (a durable incident too), or transferred (the caller went on; the provider ends the
leg). What a provider's sideband is told on the way out (`closing`) is its wing's to say: the
neutral rules pass `dialect_of(state).closing(state)`, a wing its own."""

from __future__ import annotations

from pipeline.session.state import Phase, SessionState
from pipeline.session.step import CloseCall, Control, LogEntry, RecordIncident, Step

# The names of endings that more than one place decides (docs/api.md, "Endings"): the record's
# `end_reason`, the call log's `call.ended` reason, `session.ended` webhooks, reports, event
# streams and metrics all say the same word for the same ending.
CALLER_HUNG_UP = "caller_hung_up"
APP_ENDED = "app_ended"
MAX_DURATION = "max_duration"
# What those endings were called before 0.2.0 (the record said one word, the call log another):
# a log written then is read in today's words, and migration 0018 renamed the stored records.
FORMER_NAMES = {
    "provider_call_ended": CALLER_HUNG_UP,
    "ended_by_api": APP_ENDED,
    "session_timeout": MAX_DURATION,
}


def current_name(reason: str | None) -> str | None:
    """An end reason in today's words (one written before 0.2.0 renamed)."""
    return FORMER_NAMES.get(reason, reason) if reason is not None else None


def finish(state: SessionState, reason: str, closing: tuple[Control, ...] = ()) -> Step:
    """End the session normally: the sideband is told `closing`, then closed, and the provider
    call hung up. An end request logged before 0.2.0 ends it in today's words."""
    reason = current_name(reason) or reason
    return Step(
        state=state.evolve(phase=Phase.ENDED, end_reason=reason).with_realtime(turn=None),
        controls=closing,
        effects=(CloseCall(reason=reason, hangup=state.call_id is not None),),
    )


def fail(state: SessionState, code: str, summary: str, closing: tuple[Control, ...] = ()) -> Step:
    """Fail the session: a durable incident, the sideband told `closing` and closed, and the
    call hung up."""
    return Step(
        state=state.evolve(phase=Phase.FAILED, end_reason=code).with_realtime(turn=None),
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
            phase=Phase.ENDED, end_reason=reason, transferring_to=None, transfer_call_id=None
        ).with_realtime(turn=None),
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
