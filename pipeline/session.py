"""`apply`: one logged event → one `Step`, whatever concern it belongs to.

Late events (for an ended or failed session, or from an older generation) are recorded but
act on nothing: only their transcripts still land.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline import admission, budget, compaction, tools, transcript
from pipeline.catalog import ToolOutcome
from pipeline.errors import MalformedFrame
from pipeline.state import Limits, Phase, SessionState
from pipeline.step import PersistTranscript, Step, unchanged
from pipeline.wire import (
    AdmissionBegun,
    AdmissionFailed,
    ArrivedLate,
    AssistantTranscriptFinal,
    CallAttached,
    CompactionRequested,
    CompactionUnsaved,
    EndRequested,
    FunctionCallArgumentsDone,
    FunctionCallItemDone,
    GatewayLost,
    InboundEvent,
    InterruptRequested,
    ItemDeleted,
    ProviderError,
    ResponseCreated,
    ResponseDone,
    SessionCreated,
    SessionUpdated,
    SidebandClosed,
    SidebandConnected,
    SpeechStarted,
    TextInjected,
    TimerFired,
    ToolFinished,
    UserTranscriptFailed,
    UserTranscriptFinal,
    parse_inbound,
)


def is_late(state: SessionState, generation: int) -> bool:
    """An event for a finished session, or from a superseded sideband, is late."""
    return state.is_terminal or generation < state.generation


def apply(state: SessionState, event: InboundEvent, generation: int) -> Step:
    """Decide what one event means for the session."""
    step = _apply(state, event, generation)
    return compaction.interrupted_by_end(state, tools.interrupted_by_end(state, step))


def _apply(state: SessionState, event: InboundEvent, generation: int) -> Step:
    match event:
        case SessionCreated() if state.phase is Phase.CREATED and not state.instructions:
            return admission.created(
                state.evolve(
                    instructions=event.instructions,
                    tools=event.tools,
                    catalog_digest=event.catalog_digest,
                    tool_versions=event.tool_versions,
                    tool_side_effects=event.tool_side_effects,
                    limits=Limits.model_validate(event.limits),
                )
            )
        case SessionCreated():
            # A session is created once; a repeated creation changes nothing.
            return unchanged(state)
        case EndRequested():
            return admission.end(state, event)
        case AdmissionBegun():
            return admission.begin_admission(state)
        case CallAttached():
            return admission.attach_call(state, event.call_id)
        case AdmissionFailed():
            return admission.fail_admission(state, event.code, event.detail)
        case TimerFired() if event.name.startswith(tools.TOOL_DEADLINE_TIMER):
            if state.is_terminal:
                return unchanged(state)
            return tools.deadline_passed(state, event.name.removeprefix(tools.TOOL_DEADLINE_TIMER))
        case TimerFired() if event.name.startswith(admission.RECONNECT_TIMER):
            generation_text = event.name.removeprefix(admission.RECONNECT_TIMER)
            return admission.reconnect_due(state, int(generation_text) if generation_text.isdigit() else 0)
        case TimerFired() if event.name.startswith(compaction.DEADLINE_TIMER):
            number = event.name.removeprefix(compaction.DEADLINE_TIMER)
            return compaction.deadline_passed(state, int(number) if number.isdigit() else 0)
        case TimerFired():
            return admission.timer_fired(state, event.name)
        case ArrivedLate():
            try:
                return record_late(state, parse_inbound(event.event))
            except MalformedFrame:
                return unchanged(state)
        case GatewayLost():
            return admission.taken_over(state, event.gateway_id)
        case CompactionRequested():
            # Answered whatever the session's state, so the API never waits in vain.
            return compaction.requested(state, event.request_id, event.gateway_id)
        case CompactionUnsaved():
            return compaction.summary_unsaved(state, event.compaction, event.reason)
    if is_late(state, generation):
        return record_late(state, event)
    return _decide(state, event)


def record_late(state: SessionState, event: InboundEvent) -> Step:
    """A late event changes nothing, but the durable record still gets its transcript."""
    if isinstance(event, UserTranscriptFinal):
        text = transcript.bounded(event.transcript)
        return Step(state=state, effects=(PersistTranscript(role="user", text=text, item_id=event.item_id),))
    if isinstance(event, AssistantTranscriptFinal):
        return Step(state=state, effects=transcript.assistant_said(state, event).effects)
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


def _response_done(state: SessionState, event: ResponseDone) -> Step:
    """Every response's usage counts against the budget, which may end the session here; a
    maintenance response then finishes its compaction, a spoken one its turn (or tool chain),
    and a completed turn may start a compaction."""
    maintenance = compaction.is_maintenance_done(state, event)
    if maintenance:
        counted = Step(state=transcript.count_usage(state, event))
    else:
        counted = transcript.count_response(state, event)
    exhausted = budget.exhausted(counted.state)
    if exhausted is not None:
        return counted.then(exhausted)
    warned = counted.then(budget.warn(counted.state))
    if maintenance:
        return warned.then(compaction.maintenance_finished(warned.state, event))
    chained = tools.response_finished(warned.state, event)
    if chained is not None:
        finished = warned.then(chained)
    else:
        finished = warned.then(transcript.end_turn(warned.state, event))
    return finished.then(compaction.after_response(state, finished.state, event))


def _decide(state: SessionState, event: InboundEvent) -> Step:
    match event:
        case SidebandConnected():
            return admission.sideband_connected(state, event)
        case SidebandClosed():
            return admission.sideband_closed(state, event)
        case SessionUpdated():
            return admission.session_updated(state, event)
        case UserTranscriptFinal():
            return _caller_input(
                state, lambda now: transcript.hear(compaction.track(now, event.item_id), event)
            )
        case TextInjected():
            return _caller_input(state, lambda now: transcript.typed(now, event))
        case InterruptRequested():
            return _tool_stopped(state, transcript.barge_in(state, event.playback), "interrupted")
        case UserTranscriptFailed():
            return transcript.transcription_failed(state, event)
        case SpeechStarted():
            # Talking over a running tool cancels it (its output is still delivered) and what
            # the caller says is answered instead.
            return _tool_stopped(state, transcript.speech_started(state, event), "barge_in")
        case ResponseCreated() if compaction.maintenance_number(event.response) is not None:
            return compaction.maintenance_started(state, event)
        case ResponseCreated():
            return transcript.response_started(state, event)
        case AssistantTranscriptFinal() if compaction.is_maintenance_text(state, event):
            return compaction.summary_written(state, event)
        case AssistantTranscriptFinal():
            return transcript.assistant_said(compaction.track(state, event.item_id), event)
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
        case ProviderError():
            return transcript.provider_error(state, event)
        case _:
            # Truncations and unknown kinds are recorded in the log; the lifecycle
            # and compaction work decide on them.
            return unchanged(state)
