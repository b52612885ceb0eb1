"""What only a Live call reports: its end (`session.closed`), its usage in seconds, and keypad
presses on a Live phone call (LIVE_PROTOCOL.md §2.4, §4).

- **The end.** `session.closed` ends the call with the provider's reason and its final usage:
  the caller hanging up or the session being closed is `caller_hung_up` (as a Realtime
  sideband's normal close), an expired session `provider_session_expired`, a close for the
  provider's content policy `provider_content_closed`; a lost connection fails the call
  `provider_connection_lost`. A close while a transfer runs is the transfer going through.
  Arriving after the call ended (Switchboard closed it), it still brings the final usage.
- **Usage** is cumulative seconds (never summed); the session's `usage_budget_seconds`, when it
  has one, is checked against the active seconds as each report arrives: one notice at 80 %
  (instructions the model heeds), the end at 100 % (`usage_budget_reached`).
- **Compaction** is the provider's on Live; its share of the context window is kept as
  telemetry, and nothing acts on it.
"""

from __future__ import annotations

from pipeline.call.limits import BUDGET_NOTICE, BUDGET_WARNING_PERCENT
from pipeline.live.controls import SessionClose, instructions
from pipeline.live.events import KeyReceived, LiveClosed, LiveUsage, UsageUpdated
from pipeline.session import ending
from pipeline.session.state import IN_CALL, Phase, SessionState, Usage
from pipeline.session.step import CloseCall, Step
from pipeline.session.wire import KeyPressed

# How the provider's close reasons end a call (any other reason is the call ending normally).
ENDED_BY_PROVIDER = {
    "remote_hangup": ending.CALLER_HUNG_UP,
    "close_requested": ending.CALLER_HUNG_UP,
    "expired": "provider_session_expired",
    "content": "provider_content_closed",
}
FAILED_BY_PROVIDER = {"connection_lost": "provider_connection_lost"}


def with_usage(state: SessionState, reported: LiveUsage) -> SessionState:
    """The state with the provider's cumulative usage (never lower than what it reported before:
    the values only grow, and a report applied late must not lower them)."""
    active = reported.active_seconds if reported.active_seconds is not None else reported.seconds
    usage: Usage = state.usage.model_copy(
        update={
            "seconds": max(state.usage.seconds, reported.seconds),
            "active_seconds": max(state.usage.active_seconds, active),
        }
    )
    return state.evolve(usage=usage)


def closed(state: SessionState, event: LiveClosed) -> Step:
    """The provider closed the session: the call ends (or fails) with its reason, and its final
    usage is kept."""
    counted = with_usage(state, event.usage)
    if state.is_terminal:
        return Step(state=counted)
    transferred = ending.closed_while_transferring(counted)
    if transferred is not None:
        return transferred
    failure = FAILED_BY_PROVIDER.get(event.reason)
    if failure is not None:
        # Nothing is sent on the way out: the session is closed already.
        return ending.fail(counted, failure, f"the provider closed the session: {event.reason}")
    reason = ENDED_BY_PROVIDER.get(event.reason, ending.CALLER_HUNG_UP)
    return Step(
        state=counted.evolve(phase=Phase.ENDED, end_reason=reason),
        effects=(CloseCall(reason=reason, hangup=False),),
    )


def closing(state: SessionState) -> tuple[SessionClose, ...]:
    """What a Live call ending is told on its sideband: `session.close`, whose answer carries the
    final usage (without it, finalization is unconfirmed, LIVE_PROTOCOL.md §2.4); a sideband
    that is down hears nothing."""
    if state.phase in IN_CALL and not state.sideband_down:
        return (SessionClose(),)
    return ()


def usage_updated(state: SessionState, event: UsageUpdated) -> Step:
    """A usage report: kept, and checked against the session's budget of active seconds."""
    counted = with_usage(state, event.usage)
    if event.context_window is not None and counted.live is not None:
        ratio = event.context_window.usage_ratio
        counted = counted.evolve(live=counted.live.model_copy(update={"context_ratio": ratio}))
    budget = state.limits.usage_budget_seconds
    if budget is None or counted.phase not in IN_CALL:
        return Step(state=counted)
    used = counted.usage.active_seconds
    if used >= budget:
        return ending.finish(counted, "usage_budget_reached", closing(counted))
    if counted.budget_warning_sent or used * 100 < budget * BUDGET_WARNING_PERCENT:
        return Step(state=counted)
    return Step(state=counted.evolve(budget_warning_sent=True), controls=(instructions(BUDGET_NOTICE),))


def key_press_of(event: KeyReceived) -> KeyPressed:
    """A keypad press on a Live phone call, as the press every phone call has (what the route
    maps the key to is done alike on both providers)."""
    return KeyPressed(type="input_audio_buffer.dtmf_event_received", event=event.event, received_at=0)


def late_close(state: SessionState, event: LiveClosed) -> Step:
    """`session.closed` after the call ended here: nothing acts on it, but its final usage is
    the call's, and is kept."""
    return Step(state=with_usage(state, event.usage))
