"""The spoken turn: the caller's final transcript drives a response; the response's start,
final transcript and completion are recorded."""

from __future__ import annotations

from pipeline.limits import MAXIMUM_DURABLE_TEXT_BYTES
from pipeline.state import LIVE_PHASES, Phase, ResponseContext, SessionState, Turn
from pipeline.step import PersistTranscript, RecordIncident, Step, unchanged
from pipeline.wire import (
    AssistantTranscriptFinal,
    ItemCreate,
    ItemTruncate,
    Playback,
    ProviderError,
    ResponseCancel,
    ResponseCreate,
    ResponseCreated,
    ResponseDone,
    ResponseParams,
    SpeechStarted,
    TextInjected,
    UserTranscriptFailed,
    UserTranscriptFinal,
)


def hear(state: SessionState, event: UserTranscriptFinal) -> Step:
    """The caller finished speaking: persist what they said and begin the response, or queue
    one if a response is still owed (one response then covers everything they said)."""
    persisted = Step(
        state=state,
        effects=(PersistTranscript(role="user", text=bounded(event.transcript), item_id=event.item_id),),
    )
    return _answer_input(persisted, event.item_id)


def typed(state: SessionState, event: TextInjected) -> Step:
    """Typed text from the API: added to the conversation as a user message and answered like
    speech (or after the response that is owed)."""
    text = bounded(event.text)
    step = Step(state=state, effects=(PersistTranscript(role="user", text=text, item_id=event.item_id),))
    if state.phase in LIVE_PHASES:
        message = ItemCreate(
            item={
                "id": event.item_id,
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text}],
            }
        )
        step = step.then(Step(state=state, controls=(message,)))
    return _answer_input(step, event.item_id)


def _answer_input(step: Step, input_item_id: str) -> Step:
    """The caller's input (spoken or typed) is answered now, or after the response still owed."""
    state = step.state
    if state.phase not in LIVE_PHASES:
        return step
    if state.turn is not None:
        return step.then(Step(state=state.evolve(queued_input_item_id=input_item_id)))
    return step.then(begin_response(state, input_item_id))


def begin_response(state: SessionState, input_item_id: str) -> Step:
    """Capture the response context for this input and ask the provider to respond."""
    context = ResponseContext(
        instructions=state.instructions,
        max_output_tokens=state.limits.max_output_tokens,
        input_item_id=input_item_id,
    )
    return Step(
        state=state.evolve(
            phase=Phase.RESPONDING,
            turn=Turn(context=context),
            queued_input_item_id=None,
            chain=state.chain.next_turn(),
        ),
        controls=(response_create(context),),
    )


def response_create(context: ResponseContext, tool_choice: str = "auto") -> ResponseCreate:
    return ResponseCreate(
        response=ResponseParams(
            instructions=context.instructions,
            max_output_tokens=context.max_output_tokens,
            tool_choice=tool_choice,
        )
    )


def transcription_failed(state: SessionState, event: UserTranscriptFailed) -> Step:
    """The provider could not transcribe the caller: worth a warning, not a failed call."""
    return Step(
        state=state,
        effects=(
            RecordIncident(
                code="transcription_failed",
                summary=str(event.error.get("message") or "input audio transcription failed"),
                severity="warning",
                context={"item_id": event.item_id, "error": event.error},
            ),
        ),
    )


def speech_started(state: SessionState, event: SpeechStarted) -> Step:
    """The caller began to speak. If they talk over a response that is still running, that is
    a barge-in: the assistant item is cut where the caller stopped hearing it (so the provider's
    conversation never keeps speech nobody heard), then the response is cancelled. Nothing is cut
    when none of the response had played."""
    counted = state.evolve(speech_started_count=state.speech_started_count + 1)
    return barge_in(counted, event.playback)


def barge_in(state: SessionState, playback: Playback | None) -> Step:
    """Stop the running response: cut its item at the playback position (when some of it
    played), then cancel it. Nothing happens when no response is running."""
    turn = state.turn
    running = (
        state.phase is Phase.RESPONDING
        and turn is not None
        and turn.response_id is not None
        and not state.chain.response_completed
    )
    if not running:
        return Step(state=state)
    assert turn is not None and turn.response_id is not None
    controls: list[ItemTruncate | ResponseCancel] = []
    if playback is not None and playback.response_id == turn.response_id:
        controls.append(ItemTruncate(item_id=playback.item_id, audio_end_ms=max(playback.played_ms, 0)))
    controls.append(ResponseCancel(response_id=turn.response_id))
    return Step(state=state, controls=tuple(controls))


def response_started(state: SessionState, event: ResponseCreated) -> Step:
    """The provider started the response Switchboard asked for."""
    if state.turn is not None and state.turn.response_id is None:
        return Step(state=state.evolve(turn=state.turn.model_copy(update={"response_id": event.response.id})))
    return unchanged(state)


def assistant_said(state: SessionState, event: AssistantTranscriptFinal) -> Step:
    """The assistant's final text of one item is persisted."""
    return Step(
        state=state,
        effects=(
            PersistTranscript(
                role="assistant",
                text=bounded(event.transcript),
                item_id=event.item_id,
                response_id=event.response_id,
            ),
        ),
    )


def response_finished(state: SessionState, event: ResponseDone) -> Step:
    """A response finished (completed, cancelled, failed or incomplete): count its usage; if it
    was the current turn's, the session listens again — or answers queued input."""
    counted = count_response(state, event)
    return counted.then(end_turn(counted.state, event))


def count_response(state: SessionState, event: ResponseDone) -> Step:
    """Every response's usage counts, whoever asked for it; a failed one is a warning."""
    usage = event.response.usage
    counted = count_usage(state, event).evolve(
        last_response_input_tokens=usage.input_tokens if usage else 0,
        compaction_cooldown=max(state.compaction_cooldown - 1, 0),
    )
    effects: tuple[RecordIncident, ...] = ()
    if event.response.status == "failed":
        effects = (
            RecordIncident(
                code="response_failed",
                summary="the provider reported a failed response",
                severity="warning",
                context={"response_id": event.response.id, "details": event.response.status_details},
            ),
        )
    return Step(state=counted, effects=effects)


def count_usage(state: SessionState, event: ResponseDone) -> SessionState:
    """Add a response's provider-reported usage to the session's."""
    usage = event.response.usage
    if usage is None:
        return state.evolve(usage=state.usage.plus(0, 0, 0))
    return state.evolve(usage=state.usage.plus(usage.input_tokens, usage.output_tokens, usage.total_tokens))


def end_turn(state: SessionState, event: ResponseDone) -> Step:
    """The turn's response is over: listen again, or begin the response queued input is owed."""
    turn = state.turn
    if turn is not None and turn.refused:
        # The response that blocked ours has finished: ask for ours again.
        retried = state.evolve(turn=turn.model_copy(update={"refused": False}))
        return Step(state=retried, controls=(response_create(turn.context),))
    # A response.done without its response.created (seen during interruptions) ends the
    # turn that was waiting for it, so the session never waits forever.
    is_ours = turn is not None and turn.response_id in (event.response.id, None)
    if turn is None or not is_ours or state.phase is not Phase.RESPONDING:
        return unchanged(state)
    released = state.evolve(phase=Phase.LISTENING, turn=None, chain=state.chain.next_turn())
    if state.queued_input_item_id is not None:
        return begin_response(released, state.queued_input_item_id)
    return Step(state=released)


def provider_error(state: SessionState, event: ProviderError) -> Step:
    """A provider error answers one control; most are recoverable, so it is a warning. A
    refused `response.create` (another response active) is asked again when that one ends."""
    turn = state.turn
    if (
        event.error.code == "conversation_already_has_active_response"
        and turn is not None
        and turn.response_id is None
    ):
        state = state.evolve(turn=turn.model_copy(update={"refused": True}))
    return Step(
        state=state,
        effects=(
            RecordIncident(
                code=f"provider_{event.error.code or event.error.type}",
                summary=event.error.message or event.error.type,
                severity="warning",
                context=event.error.model_dump(),
            ),
        ),
    )


def bounded(text: str) -> str:
    """Text cut to the durable bound on a UTF-8 character boundary."""
    encoded = text.encode()
    if len(encoded) <= MAXIMUM_DURABLE_TEXT_BYTES:
        return text
    return encoded[:MAXIMUM_DURABLE_TEXT_BYTES].decode(errors="ignore")
