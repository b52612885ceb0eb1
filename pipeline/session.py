"""`apply`: one logged event → one `Step`, whatever concern it belongs to.

Late events (for an ended or failed session, or from an older generation) are recorded but
act on nothing: only their transcripts still land.
"""

from __future__ import annotations

from pipeline import admission, tools, transcript
from pipeline.catalog import ToolOutcome
from pipeline.state import Limits, Phase, SessionState
from pipeline.step import PersistTranscript, Step, unchanged
from pipeline.wire import (
    AdmissionBegun,
    AdmissionFailed,
    AssistantTranscriptFinal,
    CallAttached,
    EndRequested,
    FunctionCallArgumentsDone,
    FunctionCallItemDone,
    InboundEvent,
    ProviderError,
    ResponseCreated,
    ResponseDone,
    SessionCreated,
    SessionUpdated,
    SidebandClosed,
    SidebandConnected,
    SpeechStarted,
    TimerFired,
    ToolFinished,
    UserTranscriptFailed,
    UserTranscriptFinal,
)


def is_late(state: SessionState, generation: int) -> bool:
    """An event for a finished session, or from a superseded sideband, is late."""
    return state.is_terminal or generation < state.generation


def apply(state: SessionState, event: InboundEvent, generation: int) -> Step:
    """Decide what one event means for the session."""
    return tools.interrupted_by_end(state, _apply(state, event, generation))


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
        case TimerFired():
            return admission.timer_fired(state, event.name)
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


def _decide(state: SessionState, event: InboundEvent) -> Step:
    match event:
        case SidebandConnected():
            return admission.sideband_connected(state, event)
        case SidebandClosed():
            return admission.sideband_closed(state, event)
        case SessionUpdated():
            return admission.session_updated(state, event)
        case UserTranscriptFinal():
            heard = transcript.hear(state, event)
            if state.chain.pending is not None:
                # New input while a tool runs: the tool is cancelled and the input answered
                # after the tool's output is delivered.
                return heard.then(tools.caller_moved_on(heard.state, "new_input"))
            return heard
        case UserTranscriptFailed():
            return transcript.transcription_failed(state, event)
        case SpeechStarted():
            return transcript.speech_started(state, event)
        case ResponseCreated():
            return transcript.response_started(state, event)
        case AssistantTranscriptFinal():
            return transcript.assistant_said(state, event)
        case ResponseDone():
            counted = transcript.count_response(state, event)
            chained = tools.response_finished(counted.state, event)
            if chained is not None:
                return counted.then(chained)
            return counted.then(transcript.end_turn(counted.state, event))
        case FunctionCallArgumentsDone():
            return tools.request_tool(state, event)
        case FunctionCallItemDone():
            return tools.request_tool(state, event.as_arguments_done())
        case ToolFinished():
            return tools.tool_finished(state, event.call_id, ToolOutcome.model_validate(event.outcome))
        case ProviderError():
            return transcript.provider_error(state, event)
        case _:
            # Truncations, deletions and unknown kinds are recorded in the log; the lifecycle
            # and compaction work decide on them.
            return unchanged(state)
