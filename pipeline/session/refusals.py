"""Why a request is refused for the state of its session: one error code per state, whatever
the verb or the layer that sees it first (the gateway reading the record, or the worker
applying the request in the call's order). docs/api.md, "One code per state":

- over (ended or failed)              409 `session_ended`, with `status` and `end_reason`
- no call yet (created, admitting)    409 `session_not_connected`, with `status`

The status is the record's `status`; the end reason is the record's `end_reason`, in the
vocabulary of docs/api.md, "Endings"."""

from __future__ import annotations

from pipeline.call.errors import SessionEnded, SessionNotConnected
from pipeline.session.state import IN_CALL, TERMINAL_PHASES, SessionState


def over(status: str, end_reason: str | None) -> SessionEnded | None:
    """The refusal of a request to a session that is over, or None while it is not."""
    if status not in TERMINAL_PHASES:
        return None
    said = f" ({end_reason})" if end_reason else ""
    return SessionEnded(f"session is {status}{said}", status=status, end_reason=end_reason)


def not_in_call(status: str, end_reason: str | None) -> SessionEnded | SessionNotConnected | None:
    """The refusal of a request that needs the call in progress, or None when it is."""
    ended = over(status, end_reason)
    if ended is not None:
        return ended
    if status in IN_CALL:
        return None
    return SessionNotConnected(f"session is {status}: its call is not connected yet", status=status)


def over_for(state: SessionState) -> SessionEnded | None:
    """`over` for a session's state."""
    return over(str(state.phase), state.end_reason)


def not_in_call_for(state: SessionState) -> SessionEnded | SessionNotConnected | None:
    """`not_in_call` for a session's state."""
    return not_in_call(str(state.phase), state.end_reason)
