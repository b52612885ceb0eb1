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

from collections.abc import Callable
from typing import Literal, assert_never

from pipeline import (
    admission,
    agent,
    ending,
    line,
    notify,
    prompt,
    telephony,
)
from pipeline.call.dialect import Ability, refusal
from pipeline.catalog import ToolOutcome
from pipeline.dialects import capabilities_of, dialect_for, dialect_of, is_spoken_by
from pipeline.errors import MalformedFrame
from pipeline.limits import bounded
from pipeline.live import delegation, reports
from pipeline.live.events import (
    Delegated,
    KeyReceived,
    LiveClosed,
    LiveTranscript,
    UsageUpdated,
)
from pipeline.realtime import budget, compaction, silences, tools, turns
from pipeline.sequencer import GAP_TIMEOUT_MS
from pipeline.state import Limits, Phase, Provider, SessionState
from pipeline.step import PersistTranscript, RecordIncident, Step, answering, refused_by, unchanged
from pipeline.timers import (
    AdmissionTimeout,
    AttentionWait,
    CompactionDeadline,
    DelegationDeadline,
    DelegationSettle,
    ResponseDeadline,
    SeqGap,
    SessionCeiling,
    SidebandReconnect,
    ToolDeadline,
    parse_timer,
)
from pipeline.wire import (
    AdmissionBegun,
    AdmissionFailed,
    AgentReplyRequested,
    AgentSayRequested,
    ArrivedLate,
    AssistantTranscriptFinal,
    AttentionRequested,
    CallAttached,
    CallerSilent,
    CompactionRequested,
    CompactionUnsaved,
    EndRequested,
    EventsDropped,
    FunctionCallArgumentsDone,
    FunctionCallItemDone,
    GatewayLost,
    HoldRequested,
    InboundEvent,
    InterruptRequested,
    ItemDeleted,
    KeyPressed,
    PromptSetRequested,
    ProviderError,
    ResponseCreated,
    ResponseDone,
    SeqLost,
    SessionCreated,
    SessionUpdated,
    SidebandClosed,
    SidebandConnected,
    SpeechStarted,
    SupervisorRequested,
    TextInjected,
    TimerFired,
    ToolFinished,
    ToolsSetRequested,
    TransferFinished,
    UserTranscriptFailed,
    UserTranscriptFinal,
    parse_inbound,
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
    if isinstance(event, UserTranscriptFinal | TransferFinished):
        return True
    if dialect_of(state).outlives_its_sideband(event):
        return True
    if isinstance(event, ResponseDone):
        turn = state.turn
        return turn is not None and turn.response_id is not None and turn.response_id == event.response.id
    return False


def apply(state: SessionState, event: InboundEvent, generation: int) -> Step:
    """Decide what one event means for the session."""
    step = _apply(state, event, generation)
    step = compaction.interrupted_by_end(state, tools.interrupted_by_end(state, step))
    step = delegation.interrupted_by_end(state, step)
    return notify.app_events(state, event, line.answered_by_end(state, step))


def _apply(state: SessionState, event: InboundEvent, generation: int) -> Step:
    match event:
        case SessionCreated() if state.phase is Phase.CREATED and not state.instructions:
            return admission.created(
                state.evolve(
                    instructions=event.instructions,
                    greeting=event.greeting,
                    hangup_when=event.hangup_when,
                    phone=event.phone,
                    app_webhook=event.app_webhook,
                    tools=event.tools,
                    catalog_digest=event.catalog_digest,
                    tool_versions=event.tool_versions,
                    tool_side_effects=event.tool_side_effects,
                    limits=Limits.model_validate(event.limits),
                    provider=Provider(event.provider),
                    live=dialect_for(event.provider).wing_state(event),
                )
            )
        case SessionCreated():
            # A session is created once; a repeated creation changes nothing.
            return unchanged(state)
        case EndRequested():
            return admission.end(state, event)
        case AdmissionBegun():
            return admission.begin_admission(state, event.request_id)
        case CallAttached():
            return admission.attach_call(state, event.call_id, event.medium)
        case AdmissionFailed():
            return admission.fail_admission(state, event.code, event.detail)
        case TimerFired():
            match parse_timer(event.name):
                case DelegationDeadline(delegation_id):
                    if not capabilities_of(state).delegations:
                        return unchanged(state)
                    return delegation.deadline_passed(state, delegation_id)
                case DelegationSettle(delegation_id):
                    if not capabilities_of(state).delegations:
                        return unchanged(state)
                    return delegation.settled(state, delegation_id)
                case ToolDeadline(call_id):
                    if state.is_terminal:
                        return unchanged(state)
                    return tools.deadline_passed(state, call_id)
                case SidebandReconnect(generation):
                    return admission.reconnect_due(state, generation)
                case CompactionDeadline(number):
                    return compaction.deadline_passed(state, number)
                case AttentionWait(number):
                    return line.nobody_came(state, number)
                case ResponseDeadline(number):
                    lost = turns.response_lost(state, number)
                    return unchanged(state) if lost is None else lost.then(_response_given_up(state))
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
        case GatewayLost():
            return admission.taken_over(state, event.gateway_id)
        case CompactionRequested():
            # Answered whatever the session's state, so the API never waits in vain.
            cannot = refusal(capabilities_of(state), Ability.COMPACTION)
            if cannot is not None:
                return refused_by(state, event.request_id, event.gateway_id, cannot)
            return compaction.requested(state, event.request_id, event.gateway_id)
        case CompactionUnsaved():
            return compaction.summary_unsaved(state, event.compaction, event.reason)
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
        case HoldRequested():
            return line.hold(state, event)
        case AttentionRequested():
            return line.attention(state, event)
        case SupervisorRequested():
            return line.supervise(state, event)
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
        message = f"the call moved on (session is {state.phase}) before this was applied"
        late = record_late(state, event)
        error = {"error": {"code": "session_not_live", "message": message}}
        return answering(late, event.request_id, event.gateway_id, 409, error)
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
    if isinstance(event, UserTranscriptFinal):
        text = bounded(event.transcript)
        return Step(state=state, effects=(PersistTranscript(role="user", text=text, item_id=event.item_id),))
    if isinstance(event, AssistantTranscriptFinal):
        return Step(state=state, effects=turns.assistant_said(state, event).effects)
    if isinstance(event, LiveTranscript):
        role = "user" if event.speaker == "caller" else "assistant"
        text = bounded(event.text)
        return Step(state=state, effects=(PersistTranscript(role=role, text=text, item_id=event.item_id),))
    if isinstance(event, LiveClosed):
        return reports.late_close(state, event)
    return unchanged(state)


def _caller_input(state: SessionState, answer: Callable[[SessionState], Step]) -> Step:
    """New input from the caller, spoken or typed. A real turn never waits behind maintenance,
    so a compaction gives way; a tool that runs is cancelled, its output delivered, and the
    input answered after it."""
    superseded = compaction.superseded(state)
    return _tool_stopped(state, superseded.then(answer(superseded.state)), "new_input")


def _tool_stopped(before: SessionState, step: Step, reason: str) -> Step:
    """The caller moved on: a tool running before this step is cancelled."""
    if before.chain.pending is None:
        return step
    return step.then(tools.caller_moved_on(step.state, reason))


def _response_given_up(state: SessionState) -> Step:
    """The response the turn is owed will never report done (lost, or cancelled with nothing
    active): the turn goes on as if it had ended. Without a tool call it closes — the session
    listens, or answers queued input at once. A tool still running keeps the turn: its outcome
    (or its deadline) ends the chain as usual, so the call gets exactly one output and the
    continuation is driven unless the caller moved on. An outcome already in is delivered now."""
    hung_up = tools.hung_up_by_agent(state)
    if hung_up is not None:
        return hung_up
    chain = state.chain
    pending = chain.pending
    if pending is None:
        return turns.listen_again(state)
    if pending.output is None:
        return Step(state=state.evolve(chain=chain.model_copy(update={"response_completed": True})))
    if chain.continuation_allowed:
        return tools.continue_after_tool(state)
    return tools.deliver_without_response(state)


def _response_done(state: SessionState, event: ResponseDone) -> Step:
    """Every response's usage counts against the budget, which may end the session here; a
    maintenance response then finishes its compaction, a spoken one its turn (or tool chain),
    and a completed turn may start a compaction."""
    maintenance = compaction.is_maintenance_done(state, event)
    if maintenance:
        counted = Step(state=turns.count_usage(state, event))
    else:
        counted = turns.count_response(state, event)
    exhausted = budget.exhausted(counted.state)
    if exhausted is not None:
        return counted.then(exhausted)
    warned = counted.then(budget.warn(counted.state))
    if maintenance:
        return warned.then(compaction.maintenance_finished(warned.state, event))
    warned = warned.then(turns.deadline_met(warned.state, event))
    turn = warned.state.turn
    if turn is not None and turn.response_id in (event.response.id, None):
        hung_up = tools.hung_up_by_agent(warned.state)
        if hung_up is not None:
            return warned.then(hung_up)
    chained = tools.response_finished(warned.state, event)
    if chained is not None:
        finished = warned.then(chained)
    else:
        finished = warned.then(turns.end_turn(warned.state, event))
    return finished.then(compaction.after_response(state, finished.state, event))


def _decide(state: SessionState, event: InboundEvent) -> Step:
    match event:
        case SidebandConnected():
            return admission.sideband_connected(state, event)
        case SidebandClosed() if event.code == 1000 and not event.by_host and state.transferring_to:
            return ending.closed_while_transferring(state) or unchanged(state)
        case SidebandClosed():
            return admission.sideband_closed(state, event)
        case TransferFinished():
            return line.transfer_finished(state, event)
        case SessionUpdated():
            return admission.session_updated(state, event)
        case UserTranscriptFinal():
            # The caller spoke: their silences start counting again.
            heard = state.evolve(silences_heard=0) if state.silences_heard else state
            return _caller_input(heard, lambda now: turns.hear(compaction.track(now, event.item_id), event))
        case KeyPressed():
            return telephony.key_pressed(state, event)
        case CallerSilent():
            return silences.caller_silent(state, event)
        case TextInjected():
            return _caller_input(state, lambda now: turns.typed(now, event))
        case InterruptRequested():
            return _tool_stopped(state, turns.barge_in(state, event.playback), "interrupted")
        case UserTranscriptFailed():
            return turns.transcription_failed(state, event)
        case SpeechStarted():
            # Talking over a running tool cancels it (its output is still delivered) and what
            # the caller says is answered instead.
            return _tool_stopped(state, turns.speech_started(state, event), "barge_in")
        case ResponseCreated() if compaction.maintenance_number(event.response) is not None:
            return compaction.maintenance_started(state, event)
        case ResponseCreated():
            return turns.response_started(state, event)
        case AssistantTranscriptFinal() if compaction.is_maintenance_text(state, event):
            return compaction.summary_written(state, event)
        case AssistantTranscriptFinal():
            return turns.assistant_said(compaction.track(state, event.item_id), event)
        case ResponseDone():
            return _response_done(state, event)
        case FunctionCallArgumentsDone():
            return tools.request_tool(compaction.track(state, event.item_id), event)
        case FunctionCallItemDone():
            return tools.request_tool(compaction.track(state, event.item.id), event.as_arguments_done())
        case ItemDeleted():
            return Step(state=compaction.forget(state, event.item_id))
        case ToolFinished() if capabilities_of(state).delegations:
            # A delegation's handler is run as a tool is; its outcome answers the delegation.
            return delegation.finished(state, event.call_id, ToolOutcome.model_validate(event.outcome))
        case ToolFinished():
            return tools.tool_finished(state, event.call_id, ToolOutcome.model_validate(event.outcome))
        case LiveTranscript():
            return delegation.heard(state, event)
        case Delegated():
            return delegation.delegated(state, event)
        case UsageUpdated():
            return reports.usage_updated(state, event)
        case LiveClosed():
            return reports.closed(state, event)
        case KeyReceived():
            return telephony.key_pressed(state, reports.key_press_of(event))
        case ProviderError() if turns.is_cancel_of_nothing(state, event):
            recorded = turns.provider_error(state, event)
            return recorded.then(_response_given_up(recorded.state))
        case ProviderError():
            return turns.provider_error(state, event)
        case _:
            # Truncations and unknown kinds are recorded in the log; the lifecycle
            # and compaction work decide on them.
            return unchanged(state)
