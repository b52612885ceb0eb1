"""What the app that owns a call is told, as signed webhooks to the URL its session (or route)
names: `call.started`, `call.ended` (with the end-of-call report), `attention.requested`,
`tool.failed`, and for a call Switchboard placed `call.attempted` (its outcome). Decided here
from each transition (a `NotifyApp` effect); delivered after the transaction commits, with
retries, by the workers. Each notification's id is stable (the session, the kind and what makes
it unique), so a retried or replayed delivery is recognisably the same one.
"""

from __future__ import annotations

from pipeline.session.state import TERMINAL_PHASES, Phase, SessionState
from pipeline.session.step import LogEntry, NotifyApp, Step
from pipeline.session.wire import InboundEvent, SidebandConnected, ToolFinished


def app_events(before: SessionState, event: InboundEvent, step: Step) -> Step:
    """`step`, with what the app is to be told of it."""
    after = step.state
    if after.app_webhook is None:
        return step
    told: list[NotifyApp] = []
    first_connect = before.phase in (Phase.CREATED, Phase.ADMITTING) and after.phase is Phase.CONNECTED
    if isinstance(event, SidebandConnected) and first_connect:
        told.append(NotifyApp(kind="call.started", key="1", data=_started(event.call_id, after)))
    for effect in step.effects:
        if isinstance(effect, LogEntry) and effect.kind == "attention.requested":
            told.append(NotifyApp(kind="attention.requested", key=str(after.attentions), data=effect.data))
        elif isinstance(effect, LogEntry) and effect.kind == "call.attempted":
            # A call going out is over: what it came to, once per call.
            told.append(NotifyApp(kind="call.attempted", key=str(effect.data["call"]), data=effect.data))
    if isinstance(event, ToolFinished) and event.outcome.get("status") != "succeeded":
        data = {
            "call_id": event.call_id,
            "status": event.outcome.get("status"),
            "error": event.outcome.get("error"),
        }
        told.append(NotifyApp(kind="tool.failed", key=event.call_id, data=data))
    if after.phase in TERMINAL_PHASES and before.phase not in TERMINAL_PHASES:
        # The report itself (transcript, tool steps, usage, cost) is read when it is sent.
        told.append(NotifyApp(kind="call.ended", key="1", data={"reason": after.end_reason}))
    if not told:
        return step
    return Step(state=after, controls=step.controls, effects=(*step.effects, *told))


def _started(call_id: str, state: SessionState) -> dict[str, object]:
    phone = state.phone
    started: dict[str, object] = {"call_id": call_id, "medium": "sip" if phone is not None else "webrtc"}
    if state.model.id:
        started["model"] = state.model.id
    if state.agent is not None:
        started["agent"] = state.agent.model_dump()
    if phone is not None:
        started.update(caller=phone.caller, dialled=phone.dialled, route_id=phone.route_id)
    return started


def is_withheld(erased: bool, erased_because: str | None) -> bool:
    """Whether a notification of a session is withheld when its delivery is attempted: its
    session was erased since it was decided (on request, or by retention). What the app would be
    told (a caller's number, why a person was asked for, the report's transcript) went with the
    erasure, so nothing of it is sent, however long the delivery waited for its retry. A session
    kept as metadata (`storage`) is erased by design once its call is over, and still owes the app
    its notifications (docs/privacy.md): those go."""
    return erased and erased_because != "storage"
