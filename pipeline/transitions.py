"""`apply`: one logged event → one `Step`, whatever concern it belongs to.

Late events are recorded but act on nothing: only their transcripts still land. An event for an
ended or failed session is late. So is an event from a superseded generation of the call (a
sideband that was re-opened, or taken over by another gateway), with two exceptions that a live
session still acts on, because the current sideband will never see them: the caller's final
transcript (a line the caller said is answered by whoever owns the call now, at once or after
the response that is owed), and the `response.done` of exactly the response the current turn
waits on (it settles the turn). Anything else from an old sideband stays late: its
speech_started must not barge in on today's answer, its close must not reconnect today's call.
`disposition_of` says how the log records an event; `apply` decides what it does.
"""

from __future__ import annotations

from typing import Literal, assert_never

from pipeline import admission
from pipeline.api import notify
from pipeline.call.capabilities import Ability, refusal
from pipeline.call.errors import CallReconnected, MalformedFrame
from pipeline.dialects import capabilities_of, dialect_for, dialect_of, is_spoken_by, parse_inbound
from pipeline.keypad import capture, presses
from pipeline.operator import agent, line, prompt
from pipeline.outbound import dialing
from pipeline.session import ending
from pipeline.session.consent import greeting_with_consent
from pipeline.session.refusals import over_for
from pipeline.session.sequencer import GAP_TIMEOUT_MS
from pipeline.session.state import Limits, Phase, Provider, SessionState
from pipeline.session.step import RecordIncident, Step, answering, refused_by, unchanged
from pipeline.session.timers import (
    AdmissionTimeout,
    AttentionWait,
    CompactionDeadline,
    DelegationDeadline,
    DelegationSettle,
    KeypadDeadline,
    OutboundWait,
    ResponseDeadline,
    SeqGap,
    SessionCeiling,
    SidebandReconnect,
    ToolDeadline,
    parse_timer,
)
from pipeline.session.wire import (
    AdmissionBegun,
    AdmissionFailed,
    AgentReplyRequested,
    AgentSayRequested,
    ArrivedLate,
    AttentionRequested,
    CallAttached,
    CollectRequested,
    CompactionRequested,
    CompactionUnsaved,
    DigitsCollected,
    EndRequested,
    EventsDropped,
    GatewayLost,
    HoldRequested,
    InboundEvent,
    InterruptRequested,
    PromptSetRequested,
    ProviderError,
    SeqLost,
    SessionCreated,
    SessionUpdated,
    SidebandClosed,
    SidebandConnected,
    SupervisorRequested,
    TakeOverVerb,
    TextInjected,
    TimerFired,
    ToolFinished,
    ToolsSetRequested,
    TransferFinished,
)

Disposition = Literal["applied", "late", "lost"]

# Requests the app or a person makes: answered whatever the session's state (a refusal is an
# answer too), so never late.
REQUESTS = (
    EndRequested,
    AgentSayRequested,
    AgentReplyRequested,
    PromptSetRequested,
    ToolsSetRequested,
    HoldRequested,
    AttentionRequested,
    SupervisorRequested,
    CollectRequested,
)


def disposition_of(state: SessionState, event: InboundEvent, generation: int) -> Disposition:
    """How the log records an event: applied, or late (recorded, acting on nothing), or — the
    marker of a seq that never came — lost. An end request is never late: ending an ended
    session is an answer, not a stale event."""
    if isinstance(event, SeqLost):
        return "lost"
    if isinstance(event, REQUESTS):
        return "applied"
    return "late" if is_late(state, event, generation) else "applied"


def is_late(state: SessionState, event: InboundEvent, generation: int) -> bool:
    """An event for a finished session is late; so is one from a superseded sideband, unless
    it still counts."""
    if state.is_terminal:
        return True
    return generation < state.generation and not still_counts(state, event)


def still_counts(state: SessionState, event: InboundEvent) -> bool:
    """Whether an event from a superseded sideband of a live call is still acted on: the
    caller's final transcript, a transfer's outcome, and the response.done of exactly the
    response the current turn waits on. (A turn whose response is only asked for — response_id
    None, as after a reconnect's re-ask — accepts no stale response.done: that one ended an
    older response.)"""
    if isinstance(event, TransferFinished):
        return True
    return dialect_of(state).outlives_its_sideband(state, event)


def apply(state: SessionState, event: InboundEvent, generation: int) -> Step:
    """Decide what one event means for the session."""
    step = capture.asked_by_model(_apply(state, event, generation))
    step = capture.ended(state, dialect_of(state).ended(state, step))
    step = dialing.ended(state, step)
    return notify.app_events(state, event, line.answered_by_end(state, step))


def _apply(state: SessionState, event: InboundEvent, generation: int) -> Step:
    match event:
        case SessionCreated() if state.phase is Phase.CREATED and not state.instructions:
            return admission.created(
                state.evolve(
                    instructions=event.instructions,
                    greeting=greeting_with_consent(event.greeting, event.privacy.consent),
                    hangup_when=event.hangup_when,
                    phone=event.phone,
                    app_webhook=event.app_webhook,
                    event_stream=event.event_stream,
                    tools=event.tools,
                    catalog_digest=event.catalog_digest,
                    tool_versions=event.tool_versions,
                    tool_side_effects=event.tool_side_effects,
                    tool_sensitive=event.tool_sensitive,
                    limits=Limits.model_validate(event.limits),
                    provider=Provider(event.provider),
                    live=dialect_for(event.provider).wing_state(event),
                    privacy=event.privacy,
                    storage=event.storage,
                    outbound=event.outbound,
                    model=event.model,
                    agent=event.agent,
                )
            )
        case SessionCreated():
            # A session is created once; a repeated creation changes nothing.
            return unchanged(state)
        case EndRequested():
            return admission.end(state, event)
        case AdmissionBegun():
            begun = admission.begin_admission(state, event.request_id)
            if state.phase is Phase.CREATED and state.outbound is not None:
                # A call going out is admitted by dialling it.
                return begun.then(dialing.dial(begun.state))
            return begun
        case CallAttached():
            return admission.attach_call(state, event.call_id, event.medium)
        case AdmissionFailed():
            return admission.fail_admission(state, event.code, event.detail)
        case TimerFired():
            match parse_timer(event.name):
                case (
                    DelegationDeadline() | DelegationSettle() | ToolDeadline() | CompactionDeadline()
                ) as timer:
                    # A provider's own work (a delegation, a tool, a compaction) times out in its wing.
                    return dialect_of(state).timer_fired(state, timer) or unchanged(state)
                case ResponseDeadline() as timer:
                    return dialect_of(state).timer_fired(state, timer) or unchanged(state)
                case SidebandReconnect(generation):
                    return admission.reconnect_due(state, generation)
                case AttentionWait(number):
                    return line.nobody_came(state, number)
                case KeypadDeadline(number):
                    return capture.deadline_passed(state, number)
                case OutboundWait() as wait:
                    return dialing.waited(state, wait)
                case AdmissionTimeout() | SessionCeiling() as timer:
                    return admission.timer_fired(state, timer)
                case SeqGap() | None:
                    # A gap's timer is the record's to act on (`models.sessions` skips the seq);
                    # a name no timer owns changes nothing.
                    return unchanged(state)
                case unreachable:
                    assert_never(unreachable)
        case ArrivedLate():
            try:
                return record_late(state, parse_inbound(event.event))
            except MalformedFrame:
                return unchanged(state)
        case GatewayLost() if dialing.is_being_dialled(state):
            return dialing.dial_again(state, event.gateway_id)
        case GatewayLost():
            return admission.taken_over(state, event.gateway_id, handed_over=event.handed_over)
        case CompactionRequested():
            # Answered whatever the session's state, so the API never waits in vain.
            cannot = refusal(capabilities_of(state), Ability.COMPACTION)
            if cannot is not None:
                return refused_by(state, event.request_id, event.gateway_id, cannot)
            return dialect_of(state).decide(state, event) or unchanged(state)
        case CompactionUnsaved():
            return dialect_of(state).decide(state, event) or unchanged(state)
        case EventsDropped():
            return events_dropped(state, event)
        case SeqLost():
            return seq_lost(state, event)
        case AgentSayRequested():
            # Answered whatever the session's state (a refusal is an answer too).
            return agent.say(state, event)
        case AgentReplyRequested():
            return agent.reply(state, event)
        case PromptSetRequested():
            return prompt.set_prompt(state, event)
        case ToolsSetRequested():
            return prompt.set_tools(state, event)
        case HoldRequested() | AttentionRequested() if state.collecting is not None:
            # The line is the collection's until it is over.
            return capture.refusing_while_collecting(state, event.request_id, event.gateway_id) or unchanged(
                state
            )
        case HoldRequested():
            return line.hold(state, event)
        case AttentionRequested():
            return line.attention(state, event)
        case SupervisorRequested(verb=TakeOverVerb()) if (
            state.collecting is not None and not state.is_terminal
        ):
            # A person who takes the line ends the collection: nothing the caller typed is kept.
            taken = line.supervise(state, event)
            if taken.state.taken_by is None:
                return taken
            cancelled = capture.cancelled_by(state, "taken_over")
            return cancelled.then(line.supervise(cancelled.state, event))
        case SupervisorRequested():
            return line.supervise(state, event)
        case CollectRequested():
            return capture.collect(state, event)
        case DigitsCollected():
            return capture.typed(state, event)
        case ToolFinished() if capture.owns(state, event.call_id):
            return capture.tool_finished(state, event)
        case TextInjected() | InterruptRequested():
            return _into_the_conversation(state, event, generation)
    if not is_spoken_by(state, event):
        return unchanged(state)
    if is_late(state, event, generation):
        return record_late(state, event)
    return _decide(state, event)


def _into_the_conversation(
    state: SessionState, event: TextInjected | InterruptRequested, generation: int
) -> Step:
    """Typed caller text, or an interrupt: refused where the provider cannot take it, decided
    like the caller's own input where it can, and answered either way (202 once decided)."""
    ability = Ability.TYPED_CALLER_TEXT if isinstance(event, TextInjected) else Ability.INTERRUPT
    cannot = refusal(capabilities_of(state), ability)
    if cannot is not None:
        return refused_by(state, event.request_id, event.gateway_id, cannot)
    if is_late(state, event, generation):
        # Over, or its sideband opened again since the request was checked: each its own code.
        moved_on = over_for(state) or CallReconnected(
            "the call's sideband was opened again before this was applied; ask again"
        )
        return answering(record_late(state, event), event.request_id, event.gateway_id, 409, moved_on.body())
    if isinstance(event, TextInjected):
        body = {"item_id": event.item_id, "status": "queued"}
    else:
        body = {"status": "interrupting"}
    return answering(_decide(state, event), event.request_id, event.gateway_id, 202, body)


def seq_lost(state: SessionState, event: SeqLost) -> Step:
    """A seq never came within the gap timeout: a warning in its place, and the events after it
    go on (if it comes after all, it is recorded as arrived late)."""
    incident = RecordIncident(
        code="event_lost",
        summary=f"seq {event.seq} never came in {GAP_TIMEOUT_MS // 1000} s; the events after it go on",
        severity="warning",
        context={"seq": event.seq},
    )
    return Step(state=state, effects=(incident,))


def events_dropped(state: SessionState, event: EventsDropped) -> Step:
    """The gateway could not keep some of the call's events (Redis was away too long, or one
    could not be encoded): a warning where they would have been in the log. Nothing else is
    decided on them; a turn whose response.done was among them is settled by its deadline."""
    incident = RecordIncident(
        code="events_dropped",
        summary=f"{event.count} events of the call were dropped by the gateway ({event.reason})",
        severity="warning",
        context={"count": event.count, "types": event.types, "reason": event.reason},
    )
    return Step(state=state, effects=(incident,))


def record_late(state: SessionState, event: InboundEvent) -> Step:
    """A late event changes nothing, but the durable record still gets its transcript."""
    return dialect_of(state).record_late(state, event) or unchanged(state)


def _decide(state: SessionState, event: InboundEvent) -> Step:
    dialect = dialect_of(state)
    match event:
        case SidebandConnected():
            replaced = capture.sideband_replaced(state)
            return replaced.then(admission.sideband_connected(replaced.state, event))
        case SidebandClosed() if event.code == 1000 and not event.by_host and state.transferring_to:
            return ending.closed_while_transferring(state) or unchanged(state)
        case SidebandClosed():
            return admission.sideband_closed(state, event)
        case TransferFinished():
            return line.transfer_finished(state, event)
        case SessionUpdated():
            return admission.session_updated(state, event)
        case ProviderError():
            recorded = Step(state=state, effects=(provider_incident(event),))
            return recorded.then(dialect.provider_error(state, event))
    pressed = dialect.key_press(event)
    if pressed is not None:
        return presses.key_pressed(state, pressed)
    # Truncations and unknown kinds are recorded in the log; the lifecycle and compaction work
    # decide on them.
    decided = dialect.decide(state, event) or unchanged(state)
    progress = dialect.call_progress(event) if state.outbound is not None else None
    if progress is None:
        return decided
    return decided.then(dialing.progressed(decided.state, progress))


def provider_incident(event: ProviderError) -> RecordIncident:
    """A provider error answers one control; most are recoverable, so it is a warning."""
    return RecordIncident(
        code=f"provider_{event.error.code or event.error.type}",
        summary=event.error.message or event.error.type,
        severity="warning",
        context=event.error.model_dump(),
    )
