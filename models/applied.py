"""What a locked transaction decided that must leave it (`Applied`), and the effects of a step
carried out inside it.

Under the row lock, each applied event's step is turned into the items for the owning gateway
(`to_gateway`: controls, and the directives a gateway carries out: a sideband to open, a call to
transfer, place or close, digits to collect); its effects on the tables the session owns are
written in the same transaction (`collect`); and what must happen once the transaction is over
(timers to schedule, tools to run, replies, notifications, metrics) is collected in `Applied`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime

from models import campaigns, compactions, timers, tool_steps
from models import outbound as outgoing
from models.data_keys import session_public_key
from models.db import SessionTransaction
from pipeline.dialects import dialect_of
from pipeline.platform.envelope import (
    CloseCall,
    CollectDigits,
    OpenSideband,
    PlaceCall,
    Reply,
    SendControl,
    ToGatewayItem,
    TransferCall,
)
from pipeline.session.state import SessionState, Usage
from pipeline.session.step import (
    AnswerRequest,
    CancelTimer,
    CancelTool,
    FinishCompaction,
    InterruptToolStep,
    NotifyApp,
    OutboundEnded,
    RecordIncident,
    RefuseToolStep,
    RequestToolStep,
    RunTool,
    SaveCompactionSummary,
    ScheduleTimer,
    StartCompaction,
    Step,
    Suppress,
)
from pipeline.session.step import CloseCall as CloseCallEffect
from pipeline.session.step import CollectDigits as CollectDigitsEffect
from pipeline.session.step import OpenSideband as OpenSidebandEffect
from pipeline.session.step import PlaceCall as PlaceCallEffect
from pipeline.session.step import TransferCall as TransferCallEffect
from pipeline.session.wire import control_wire


@dataclass
class Applied:
    """What one locked transaction decided that must leave it."""

    to_gateway: list[ToGatewayItem] = field(default_factory=list)
    timers: list[ScheduleTimer] = field(default_factory=list)
    incidents: list[RecordIncident] = field(default_factory=list)
    # Tool bodies to run on tool_runs, and running ones to stop, once the transaction commits.
    tool_runs: list[RunTool] = field(default_factory=list)
    tool_cancels: list[CancelTool] = field(default_factory=list)
    # Answers to API requests, each for the gateway that is waiting on it.
    replies: list[tuple[str, Reply]] = field(default_factory=list)
    # (seq, disposition) of every event this transaction logged or applied, for tests and logs.
    dispositions: list[tuple[int | None, str]] = field(default_factory=list)
    # How each compaction this transaction finished ended (for the metrics).
    compactions_finished: list[str] = field(default_factory=list)
    # What the app that owns the call is told, once the transaction commits.
    notifications: list[NotifyApp] = field(default_factory=list)
    # The campaigns whose dialer looks again once this commits (a call of theirs ended), and
    # the calls going out that ended, by outcome (for the metrics).
    campaigns: list[str] = field(default_factory=list)
    calls_ended: list[str] = field(default_factory=list)
    # The session's usage before and after this transaction (for the metrics: whatever events
    # it applied, a drained one included).
    usage_before: Usage | None = None
    usage_after: Usage | None = None
    # The session's provider and model (its usage is priced at the model's prices; "" for a
    # session stored before models were chosen per session: the provider's default model).
    provider: str = "realtime"
    model: str = ""
    # The agent the session runs ("" for an inline spec), for the metrics' label.
    agent: str = ""
    # The session streams its call log to the app's broker, and this applied an input of it
    # (its call log may have grown): its stream is swept once this commits.
    streams_events: bool = False

    @classmethod
    def together(cls, parts: list[Applied]) -> Applied:
        """What several deliveries of one transaction decided, in their order."""
        if len(parts) == 1:
            return parts[0]
        merged = cls()
        for part in parts:
            for name in (
                "to_gateway",
                "timers",
                "incidents",
                "tool_runs",
                "tool_cancels",
                "replies",
                "dispositions",
                "compactions_finished",
                "notifications",
                "campaigns",
                "calls_ended",
            ):
                getattr(merged, name).extend(getattr(part, name))
            if merged.usage_before is None:
                merged.usage_before = part.usage_before
            merged.usage_after = part.usage_after or merged.usage_after
            merged.provider = part.provider
            merged.model = part.model
            merged.agent = part.agent
            merged.streams_events = merged.streams_events or part.streams_events
        return merged


def reply(session_id: str, effect: AnswerRequest) -> tuple[str, Reply]:
    """An API request's answer, for the gateway waiting on it."""
    answer = Reply(
        id=f"reply_{effect.request_id}",
        request_id=effect.request_id,
        status=effect.status,
        body={"session_id": session_id, **effect.body},
    )
    return effect.gateway_id, answer


# ── the items for the gateway ───────────────────────────────────────────────────────────


def to_gateway(session: SessionTransaction, step: Step, prefix: str) -> list[ToGatewayItem]:
    """The step's controls and directives for the owning gateway, with ids from `prefix`
    (the same on a redelivery, so the gateway drops repeats)."""
    items: list[ToGatewayItem] = []
    for index, control in enumerate(step.controls):
        event_id = f"{prefix}_{index}"
        wire = control_wire(control.model_copy(update={"event_id": event_id}))
        items.append(SendControl(id=event_id, control=wire))
    provider = step.state.provider.value
    for index, effect in enumerate(step.effects):
        if isinstance(effect, OpenSidebandEffect):
            items.append(_open_sideband(session, step.state, f"{prefix}_d{index}", effect.call_id))
        elif isinstance(effect, TransferCallEffect) and step.state.call_id is not None:
            items.append(
                TransferCall(
                    id=f"{prefix}_d{index}", call_id=step.state.call_id, to=effect.to, provider=provider
                )
            )
        elif isinstance(effect, CollectDigitsEffect):
            spec = effect.digits
            items.append(
                CollectDigits(
                    id=f"{prefix}_d{index}",
                    number=effect.number,
                    max=spec.max if spec is not None else 0,
                    end=spec.end if spec is not None else None,
                    stop=spec is None,
                )
            )
        elif isinstance(effect, PlaceCallEffect) and step.state.outbound is not None:
            call = step.state.outbound
            items.append(
                PlaceCall(
                    id=f"{prefix}_d{index}",
                    call=call.id,
                    to=call.to,
                    trunk=outgoing.trunk_for_dial(session.id, call.trunk, session.execute),
                    session=dialect_of(step.state).creation_configuration(step.state) or {},
                    provider=provider,
                    # The call's id is the provider's to give: the gateway fills it in.
                    sideband=_open_sideband(session, step.state, f"{prefix}_d{index}_sideband", ""),
                )
            )
        elif isinstance(effect, CloseCallEffect):
            items.append(
                CloseCall(
                    id=f"{prefix}_d{index}",
                    call_id=effect.call_id or step.state.call_id,
                    reason=effect.reason,
                    hangup=effect.hangup,
                    provider=provider,
                )
            )
    return items


def _open_sideband(
    session: SessionTransaction, state: SessionState, directive_id: str, call_id: str
) -> OpenSideband:
    return OpenSideband(
        id=directive_id,
        call_id=call_id,
        provider=state.provider.value,
        redact=tuple(sorted(state.privacy.kinds)),
        keys=_meaningful_keys(state),
        sealed=state.tool_sensitive,
        sealing_key=_sealing_key(session) if state.tool_sensitive else None,
        route_id=state.phone.route_id if state.phone is not None else "",
        model=state.model.id,
    )


def _sealing_key(session: SessionTransaction) -> str | None:
    public = session_public_key(session.id, execute=session.execute)
    return None if public is None else base64.urlsafe_b64encode(public).decode()


def _meaningful_keys(state: SessionState) -> tuple[str, ...]:
    """The keypad keys that mean something on this call (the route's, and the consent's decline
    key): the only digits the gateway's boundary keeps pressed."""
    keys = set(state.phone.keys) if state.phone is not None else set()
    consent = state.privacy.consent
    if consent is not None and consent.decline_key is not None:
        keys.add(consent.decline_key)
    return tuple(sorted(keys))


# ── the effects carried out inside the transaction ──────────────────────────────────────


def collect(
    session: SessionTransaction,
    before: SessionState,
    step: Step,
    applied: Applied,
    items: list[ToGatewayItem],
) -> list[tuple[int, str]]:
    """Carry out the step's effects on the tables the session owns, and collect in `applied`
    what must leave the transaction (`items` for the gateway among it); `before` is the state
    the step started from. Answers the compaction summaries that could not be stored: (number, why)."""
    unsaved: list[tuple[int, str]] = []
    for effect in step.effects:
        if isinstance(effect, RecordIncident):
            applied.incidents.append(effect)
        elif isinstance(effect, ScheduleTimer):
            timers.schedule(session, effect.name, effect.delay_ms)
            applied.timers.append(effect)
        elif isinstance(effect, CancelTimer):
            timers.cancel(session, effect.name)
        elif isinstance(effect, RequestToolStep | RefuseToolStep):
            tool_steps.record_decided(session, step.state, effect)
        elif isinstance(effect, RunTool):
            applied.tool_runs.append(effect)
        elif isinstance(effect, CancelTool):
            applied.tool_cancels.append(effect)
        elif isinstance(effect, InterruptToolStep):
            tool_steps.interrupt_decided(session, effect)
        elif isinstance(effect, StartCompaction):
            compactions.start(session, effect)
        elif isinstance(effect, SaveCompactionSummary):
            failure = compactions.save_summary(session, effect)
            if failure is not None:
                unsaved.append((effect.number, failure))
        elif isinstance(effect, FinishCompaction):
            compactions.finish(session, effect)
            applied.compactions_finished.append(effect.status)
        elif isinstance(effect, NotifyApp):
            applied.notifications.append(effect)
        elif isinstance(effect, Suppress):
            outgoing.suppress_for_session(session.execute, session.id, effect.number, effect.source)
        elif isinstance(effect, OutboundEnded):
            applied.calls_ended.append(effect.outcome)
            dialled = outgoing.call_ended(session.execute, effect)
            if dialled is not None:
                campaign_id, contact_id = dialled
                campaigns.contact_called(
                    session.execute, campaign_id, contact_id, effect.outcome, datetime.now(UTC)
                )
                applied.campaigns.append(campaign_id)
        elif isinstance(effect, AnswerRequest):
            applied.replies.append(reply(session.id, effect))
    applied.to_gateway += items
    if applied.usage_before is None:
        applied.usage_before = before.usage
    applied.usage_after = step.state.usage
    applied.provider = str(step.state.provider)
    applied.model = step.state.model.id
    applied.agent = step.state.agent.name if step.state.agent is not None else ""
    applied.streams_events = applied.streams_events or step.state.event_stream is not None
    if step.state.is_terminal and not before.is_terminal:
        # Every timer checks a finished session and does nothing: they go with the call, so
        # none outlives it in the table (or is swept, fired and re-claimed for ever).
        timers.cancel_all_but_gaps(session)
    return unsaved
