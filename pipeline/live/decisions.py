"""What a Live call's own inputs and timers decide: the caller's and the agent's words, the
model's delegations and their outcomes, the provider's reports of usage and of the end."""

from __future__ import annotations

from pipeline.call.catalog import ToolOutcome
from pipeline.call.limits import bounded
from pipeline.live import delegation, reports
from pipeline.live.events import (
    BackendCalled,
    Delegated,
    KeyReceived,
    LiveClosed,
    LiveTranscript,
    UsageUpdated,
)
from pipeline.session.state import SessionState
from pipeline.session.step import PersistTranscript, Step
from pipeline.session.timers import DelegationDeadline, DelegationSettle, Timer
from pipeline.session.wire import InboundEvent, KeyPressed, ToolFinished


def decide(state: SessionState, event: InboundEvent) -> Step | None:
    """What a Live input decides, or None when it is not one this wing decides."""
    match event:
        case ToolFinished():
            # A delegation's handler is run as a tool is; its outcome answers the delegation.
            return delegation.finished(state, event.call_id, ToolOutcome.model_validate(event.outcome))
        case LiveTranscript():
            return delegation.heard(state, event)
        case Delegated():
            return delegation.delegated(state, event)
        case BackendCalled():
            return delegation.backend_called(state, event)
        case UsageUpdated():
            return reports.usage_updated(state, event)
        case LiveClosed():
            return reports.closed(state, event)
    return None


def timer_fired(state: SessionState, timer: Timer) -> Step | None:
    """What a Live timer decides, or None when the timer is not this wing's."""
    match timer:
        case DelegationDeadline(delegation_id):
            return delegation.deadline_passed(state, delegation_id)
        case DelegationSettle(delegation_id):
            return delegation.settled(state, delegation_id)
    return None


def key_press(event: InboundEvent) -> KeyPressed | None:
    """A keypad press on a Live phone call, as the press every phone call has."""
    return reports.key_press_of(event) if isinstance(event, KeyReceived) else None


def record_late(state: SessionState, event: InboundEvent) -> Step | None:
    """A late Live input's transcript, or its final usage, which the record still gets."""
    if isinstance(event, LiveTranscript):
        role = "user" if event.speaker == "caller" else "assistant"
        text = bounded(event.text)
        return Step(state=state, effects=(PersistTranscript(role=role, text=text, item_id=event.item_id),))
    if isinstance(event, LiveClosed):
        return reports.late_close(state, event)
    return None
