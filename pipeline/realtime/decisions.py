"""What a Realtime call's own inputs and timers decide: the caller's turn (spoken or typed),
barge-in, responses (their usage, the budget, the tool chain, hangup), function calls, the
caller's silences, Switchboard's compaction, and the provider's errors about them."""

from __future__ import annotations

from collections.abc import Callable

from pipeline.call.catalog import ToolOutcome
from pipeline.call.limits import bounded
from pipeline.realtime import budget, compaction, silences, tools, turns
from pipeline.realtime.events import (
    AssistantTranscriptFinal,
    CallerSilent,
    FunctionCallArgumentsDone,
    FunctionCallItemDone,
    ItemDeleted,
    ItemTyped,
    ResponseCreated,
    ResponseDone,
    SpeechStarted,
    UserTranscriptFailed,
    UserTranscriptFinal,
)
from pipeline.session.state import SessionState
from pipeline.session.step import PersistTranscript, Step, unchanged
from pipeline.session.timers import CompactionDeadline, ResponseDeadline, Timer, ToolDeadline
from pipeline.session.wire import (
    CompactionRequested,
    CompactionUnsaved,
    InboundEvent,
    InterruptRequested,
    ProviderError,
    TextInjected,
    ToolFinished,
)


def decide(state: SessionState, event: InboundEvent) -> Step | None:
    """What a Realtime input decides, or None when it is not one this wing decides."""
    match event:
        case UserTranscriptFinal():
            # The caller spoke: their silences start counting again.
            heard = state.with_realtime(silences_heard=0) if state.realtime.silences_heard else state
            return _caller_input(heard, lambda now: turns.hear(compaction.track(now, event.item_id), event))
        case CallerSilent():
            return silences.caller_silent(state, event)
        case TextInjected():
            return _caller_input(state, lambda now: turns.typed(now, event))
        case ItemTyped():
            return turns.typed_by_another(compaction.track(state, event.item.id), event)
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
        case ToolFinished():
            return tools.tool_finished(state, event.call_id, ToolOutcome.model_validate(event.outcome))
        case CompactionRequested():
            return compaction.requested(state, event.request_id, event.gateway_id)
        case CompactionUnsaved():
            return compaction.summary_unsaved(state, event.compaction, event.reason)
    return None


def timer_fired(state: SessionState, timer: Timer) -> Step | None:
    """What a Realtime timer decides, or None when the timer is not this wing's."""
    match timer:
        case ToolDeadline(call_id):
            if state.is_terminal:
                return unchanged(state)
            return tools.deadline_passed(state, call_id)
        case CompactionDeadline(number):
            return compaction.deadline_passed(state, number)
        case ResponseDeadline(number):
            lost = turns.response_lost(state, number)
            return unchanged(state) if lost is None else lost.then(_response_given_up(state))
    return None


def provider_error(state: SessionState, event: ProviderError) -> Step:
    """What a provider error means for the turn (its incident is recorded whatever the wing)."""
    if turns.is_cancel_of_nothing(state, event):
        return _response_given_up(state)
    return turns.refused_response(state, event)


def ended(before: SessionState, step: Step) -> Step:
    """A call that ends stops its running tool and abandons its compaction."""
    return compaction.interrupted_by_end(before, tools.interrupted_by_end(before, step))


def record_late(state: SessionState, event: InboundEvent) -> Step | None:
    """A late Realtime input's transcript, which the durable record still gets."""
    if isinstance(event, UserTranscriptFinal):
        text = bounded(event.transcript)
        return Step(state=state, effects=(PersistTranscript(role="user", text=text, item_id=event.item_id),))
    if isinstance(event, AssistantTranscriptFinal):
        return Step(state=state, effects=turns.assistant_said(state, event).effects)
    if isinstance(event, ItemTyped):
        return Step(state=state, effects=turns.typed_by_another(state, event).effects)
    return None


def outlives_its_sideband(state: SessionState, event: InboundEvent) -> bool:
    """The caller's final transcript, and the `response.done` of exactly the response the
    current turn waits on (a turn whose response is only asked for — response_id None, as after
    a reconnect's re-ask — accepts no stale response.done: that one ended an older response)."""
    if isinstance(event, UserTranscriptFinal):
        return True
    if isinstance(event, ResponseDone):
        turn = state.realtime.turn
        return turn is not None and turn.response_id is not None and turn.response_id == event.response.id
    return False


def _caller_input(state: SessionState, answer: Callable[[SessionState], Step]) -> Step:
    """New input from the caller, spoken or typed. A real turn never waits behind maintenance,
    so a compaction gives way; a tool that runs is cancelled, its output delivered, and the
    input answered after it."""
    superseded = compaction.superseded(state)
    return _tool_stopped(state, superseded.then(answer(superseded.state)), "new_input")


def _tool_stopped(before: SessionState, step: Step, reason: str) -> Step:
    """The caller moved on: a tool running before this step is cancelled."""
    if before.realtime.chain.pending is None:
        return step
    return step.then(tools.caller_moved_on(step.state, reason))


def _response_given_up(state: SessionState) -> Step:
    """The response the turn is owed will never report done (lost, or cancelled with nothing
    active): the turn goes on as if it had ended. Without a tool call it closes — the session
    listens, or answers queued input at once. A tool still running keeps the turn: its outcome
    (or its deadline) ends the chain as usual, so the call gets exactly one output and the
    continuation is driven unless the caller moved on. Outcomes all in are delivered now."""
    hung_up = tools.hung_up_by_agent(state)
    if hung_up is not None:
        return hung_up
    chain = state.realtime.chain
    if chain.pending is None:
        return turns.listen_again(state)
    if not chain.outcomes_in:
        return Step(state=state.with_realtime(chain=chain.model_copy(update={"response_completed": True})))
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
    turn = warned.state.realtime.turn
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
