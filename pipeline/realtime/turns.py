"""The spoken turn: the caller's final transcript drives a response; the response's start,
final transcript and completion are recorded.

Every response Switchboard asks for in a turn (the first, a tool continuation, a limit report, a
refused request asked again, a reconnect's re-ask) arms a response deadline. A response still
owed when it passes is lost — its `response.done` will never be seen — and the turn is settled
with a `response_lost` incident, so one lost event cannot silence a call. A cancel the provider
refuses because no response is active settles it at once.
"""

from __future__ import annotations

from pipeline.call.limits import (
    PROVIDER_MAXIMUM_OUTPUT_TOKENS,
    RESPONSE_DEADLINE_MS,
    RESPONSE_MS_PER_OUTPUT_TOKEN,
    bounded,
)
from pipeline.call.messages import Playback
from pipeline.realtime.controls import (
    ItemCreate,
    ItemTruncate,
    ResponseCancel,
    ResponseCreate,
    ResponseParams,
)
from pipeline.realtime.events import (
    AssistantTranscriptFinal,
    ItemTyped,
    ResponseCreated,
    ResponseDone,
    SpeechStarted,
    TokenUsage,
    UserTranscriptFailed,
    UserTranscriptFinal,
)
from pipeline.session.state import IN_CALL, Phase, ResponseContext, SessionState, Turn, UnaskedResponse, Usage
from pipeline.session.step import (
    PersistTranscript,
    RecordIncident,
    Step,
    cancel_timer,
    schedule_timer,
    unchanged,
)
from pipeline.session.timers import RESPONSE_DEADLINE_PREFIX, ResponseDeadline
from pipeline.session.wire import ProviderError, TextInjected

# Timers named with this prefix and a request number settle a response that never reported done
# (named through `pipeline.session.timers.ResponseDeadline`; the prefix stays here for the tests).
RESPONSE_DEADLINE_TIMER = RESPONSE_DEADLINE_PREFIX

# How a response is asked to say given words and nothing else (the model speaks them in its
# voice; it may not answer, add or call a tool).
SAY_EXACTLY = (
    "Say exactly the following words to the caller, word for word, and nothing else. "
    "Do not answer them, add to them or comment on them:\n\n{text}"
)
# The metadata a supervisor's words are asked with: the one response a closed line allows.
SUPERVISOR_METADATA = {"switchboard": "supervisor_say"}


def hear(state: SessionState, event: UserTranscriptFinal) -> Step:
    """The caller finished speaking: persist what they said and begin the response, or queue
    one if a response is still owed (one response then covers everything they said)."""
    persisted = Step(
        state=state,
        effects=(PersistTranscript(role="user", text=bounded(event.transcript), item_id=event.item_id),),
    )
    return _answer_input(persisted, event.item_id, spoken=True)


def typed(state: SessionState, event: TextInjected) -> Step:
    """Typed text from the API: added to the conversation as a user message and answered like
    speech (or after the response that is owed)."""
    text = bounded(event.text)
    step = Step(state=state, effects=(PersistTranscript(role="user", text=text, item_id=event.item_id),))
    if state.phase in IN_CALL:
        message = ItemCreate(
            item={
                "id": event.item_id,
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text}],
            }
        )
        step = step.then(Step(state=state, controls=(message,)))
    return _answer_input(step, event.item_id, spoken=False)


def typed_by_another(state: SessionState, event: ItemTyped) -> Step:
    """Text another client added to the conversation: as the caller's (a WebRTC client's data
    channel), stored as the caller's line, so the record holds what the model's answer answers;
    as the assistant's (a history seeded before the call), stored as the agent's line beside the
    seeded caller lines. That client asks for any answer itself, so the session asks for nothing."""
    line = PersistTranscript(role=event.item.role, text=bounded(event.text), item_id=event.item.id)
    return Step(state=state, effects=(line,))


def _answer_input(step: Step, input_item_id: str, *, spoken: bool) -> Step:
    """The caller's input (spoken or typed) is answered now, or after the response still owed.
    A response the host did not ask for that began after the caller started this line is its
    answer (a provider that answers on its own when the caller stops): asking for another would
    answer the caller twice. Any other input is asked for as ever (if such a response still runs,
    the provider refuses, and the turn asks again when it ends)."""
    state = step.state
    if state.phase not in IN_CALL or state.line_closed:
        # A closed line answers nobody: the words are in the record and the conversation, and
        # the model reads them when it speaks again.
        return step
    unasked = state.realtime.unasked_response
    if (
        state.realtime.turn is None
        and unasked is not None
        and spoken
        and unasked.speech_seen == state.realtime.speech_started_count
    ):
        return step
    if state.realtime.turn is not None:
        return step.then(Step(state=state.with_realtime(queued_input_item_id=input_item_id)))
    return step.then(begin_response(state, input_item_id))


def begin_response(state: SessionState, input_item_id: str) -> Step:
    """Capture the response context for this input and ask the provider to respond."""
    context = ResponseContext(
        instructions=state.instructions,
        max_output_tokens=state.limits.max_output_tokens,
        input_item_id=input_item_id,
    )
    responding = state.evolve(phase=Phase.RESPONDING).with_realtime(
        queued_input_item_id=None, chain=state.realtime.chain.next_turn()
    )
    return ask_for_response(responding, Turn(context=context))


def begin_directed(state: SessionState, context: ResponseContext) -> Step:
    """A turn nobody's input asked for (the app's or a person's words, a reply to a note): the
    session responds, as for caller input, without any."""
    responding = state.evolve(phase=Phase.RESPONDING, directed=None).with_realtime(
        chain=state.realtime.chain.next_turn()
    )
    return ask_for_response(responding, Turn(context=context))


def may_respond(state: SessionState, context: ResponseContext) -> bool:
    """Whether a response with this context may be asked for now: not while the line is closed,
    unless a supervisor speaks through it."""
    return context.by_supervisor or not state.line_closed


def ask_for_response(state: SessionState, turn: Turn, tool_choice: str | None = None) -> Step:
    """Ask the provider for the turn's response, and arm the deadline that settles the turn if
    this response's `response.done` never comes. Each request gets the next number, so a
    deadline armed for an earlier one finds it is no longer owed."""
    number = state.realtime.responses_asked + 1
    asked = turn.model_copy(
        update={
            "asked": number,
            "asked_generation": state.generation if state.opened_generation == state.generation else 0,
            "response_id": None,
            "refused": False,
            "cancel_sent": False,
        }
    )
    # Cancelled when the response reports done, so it is left to the sweeper: a response that
    # is lost is settled a few seconds after its deadline instead of at it.
    deadline = schedule_timer(
        ResponseDeadline(number), delay_ms=response_deadline_ms(turn.context), swept_only=True
    )
    return Step(
        state=state.with_realtime(turn=asked, responses_asked=number),
        controls=(response_create(turn.context, tool_choice),),
        effects=(deadline,),
    )


def response_deadline_ms(context: ResponseContext) -> int:
    """How long a response asked with this context may take to report done: the longest speech
    its output-token cap allows, and never less than the response deadline (pipeline.call.limits)."""
    tokens = context.max_output_tokens
    cap = PROVIDER_MAXIMUM_OUTPUT_TOKENS if tokens == "inf" else min(tokens, PROVIDER_MAXIMUM_OUTPUT_TOKENS)
    return max(RESPONSE_DEADLINE_MS, cap * RESPONSE_MS_PER_OUTPUT_TOKEN)


def response_create(context: ResponseContext, tool_choice: str | None = None) -> ResponseCreate:
    """The turn's response.create (its tool choice, unless this request overrides it)."""
    return ResponseCreate(
        response=ResponseParams(
            instructions=context.instructions,
            max_output_tokens=context.max_output_tokens,
            tool_choice=tool_choice or context.tool_choice,
            metadata=dict(SUPERVISOR_METADATA) if context.by_supervisor else None,
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
    counted = state.with_realtime(speech_started_count=state.realtime.speech_started_count + 1)
    return barge_in(counted, event.playback)


def barge_in(state: SessionState, playback: Playback | None) -> Step:
    """Stop the running response: cut its item at the playback position (when some of it
    played), then cancel it. Nothing happens when no response is running."""
    turn = state.realtime.turn
    running = (
        state.phase is Phase.RESPONDING
        and turn is not None
        and turn.response_id is not None
        and not state.realtime.chain.response_completed
    )
    if not running:
        return Step(state=state)
    assert turn is not None and turn.response_id is not None
    controls: list[ItemTruncate | ResponseCancel] = []
    if playback is not None and playback.response_id == turn.response_id:
        controls.append(ItemTruncate(item_id=playback.item_id, audio_end_ms=max(playback.played_ms, 0)))
    controls.append(ResponseCancel(response_id=turn.response_id))
    cancelled = state.with_realtime(turn=turn.model_copy(update={"cancel_sent": True}))
    return Step(state=cancelled, controls=tuple(controls))


def response_started(state: SessionState, event: ResponseCreated) -> Step:
    """The provider started the response Switchboard asked for. On a closed line a response
    nobody may give (asked for before the line closed, or not asked for at all) is cancelled
    as it starts."""
    turn = state.realtime.turn
    if turn is not None and turn.response_id is None:
        started = state.with_realtime(turn=turn.model_copy(update={"response_id": event.response.id}))
        if may_respond(state, turn.context):
            return Step(state=started)
        return barge_in(started, None)
    if state.line_closed and (turn is None or turn.response_id != event.response.id):
        return Step(state=state, controls=(ResponseCancel(response_id=event.response.id),))
    if turn is None:
        unasked = UnaskedResponse(id=event.response.id, speech_seen=state.realtime.speech_started_count)
        return Step(state=state.with_realtime(unasked_response=unasked))
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
    unasked = state.realtime.unasked_response
    counted = count_usage(state, event).with_realtime(
        last_response_input_tokens=usage.input_tokens if usage else 0,
        compaction_cooldown=max(state.realtime.compaction_cooldown - 1, 0),
        # A response the host did not ask for is over: no line is left to it any more.
        unasked_response=None if unasked is not None and unasked.id == event.response.id else unasked,
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


def count_usage_of(usage: Usage, event: ResponseDone) -> Usage:
    """`usage` with one response's provider-reported usage added."""
    reported = event.response.usage
    if reported is None:
        return usage.plus(0, 0, 0)
    return usage.plus(
        reported.input_tokens, reported.output_tokens, reported.total_tokens, **_details(reported)
    )


def count_usage(state: SessionState, event: ResponseDone) -> SessionState:
    """Add a response's provider-reported usage to the session's."""
    return state.evolve(usage=count_usage_of(state.usage, event))


def _details(usage: TokenUsage) -> dict[str, int]:
    """The usage's tokens by modality, and the cached part of the input (PROTOCOL.md §2: the
    cached tokens' own split is given by newer providers; without it they count as text)."""
    given = usage.input_token_details or {}
    out = usage.output_token_details or {}
    cached = given.get("cached_tokens_details") or {}
    cached_total = _count(given.get("cached_tokens"))
    cached_audio = _count(cached.get("audio_tokens"))
    cached_text = _count(cached.get("text_tokens")) if cached else max(cached_total - cached_audio, 0)
    return {
        "input_text_tokens": _count(given.get("text_tokens")),
        "input_audio_tokens": _count(given.get("audio_tokens")),
        "cached_text_tokens": cached_text,
        "cached_audio_tokens": cached_audio,
        "output_text_tokens": _count(out.get("text_tokens")),
        "output_audio_tokens": _count(out.get("audio_tokens")),
    }


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def end_turn(state: SessionState, event: ResponseDone) -> Step:
    """The turn's response is over: listen again, or begin the response queued input is owed."""
    turn = state.realtime.turn
    if turn is not None and turn.refused and may_respond(state, turn.context):
        # The response that blocked ours has finished: ask for ours again.
        return ask_for_response(state, turn)
    if turn is not None and turn.refused:
        return listen_again(state)
    # A response.done without its response.created (seen during interruptions) ends the
    # turn that was waiting for it, so the session never waits forever.
    is_ours = turn is not None and turn.response_id in (event.response.id, None)
    if turn is None or not is_ours or state.phase is not Phase.RESPONDING:
        return unchanged(state)
    return listen_again(state)


def listen_again(state: SessionState) -> Step:
    """The turn is over: the session listens, or begins the response it owes next."""
    return owed_next(
        state.evolve(phase=Phase.LISTENING).with_realtime(turn=None, chain=state.realtime.chain.next_turn())
    )


def owed_next(released: SessionState) -> Step:
    """A session whose turn just ended begins what it owes: a directed response first (a
    person's words, a reply to a note), then the caller's queued input."""
    directed = released.directed
    if directed is not None and may_respond(released, directed):
        return begin_directed(released, directed)
    if released.realtime.queued_input_item_id is not None and not released.line_closed:
        return begin_response(released, released.realtime.queued_input_item_id)
    return Step(state=released)


def deadline_met(state: SessionState, event: ResponseDone) -> Step:
    """The response the turn waits on reported done: its deadline timer is cancelled, so the
    timer's firing later costs no transaction (a settled turn would ignore it anyway)."""
    turn = state.realtime.turn
    if turn is None or turn.asked < 1 or turn.response_id not in (event.response.id, None):
        return unchanged(state)
    return Step(state=state, effects=(cancel_timer(ResponseDeadline(turn.asked)),))


def response_lost(state: SessionState, asked: int) -> Step | None:
    """The deadline of request `asked` passed: if that response is still owed (its response.done
    never came), the loss is recorded and the caller settles the turn; None when it is not owed
    (it finished, a later request replaced it, or the turn now waits on a tool, whose own
    deadline bounds that wait)."""
    turn = state.realtime.turn
    is_owed = (
        turn is not None
        and asked >= 1
        and turn.asked == asked
        and not state.realtime.chain.response_completed
    )
    if state.is_terminal or turn is None or not is_owed:
        return None
    incident = RecordIncident(
        code="response_lost",
        summary="no response.done came for the response the turn was owed; the turn was settled",
        severity="warning",
        context={
            "input_item_id": turn.context.input_item_id,
            "response_id": turn.response_id,
            "request": asked,
            "refused": turn.refused,
        },
    )
    return Step(state=state, effects=(incident,))


def is_cancel_of_nothing(state: SessionState, event: ProviderError) -> bool:
    """The provider refused Switchboard's cancel of the turn's response because no response is
    active: that response is over, and no response.done is coming for it."""
    turn = state.realtime.turn
    return (
        event.error.code == "response_cancel_not_active"
        and turn is not None
        and turn.cancel_sent
        and not state.is_terminal
    )


def refused_response(state: SessionState, event: ProviderError) -> Step:
    """A refused `response.create` (another response active) is asked again when that one ends."""
    turn = state.realtime.turn
    if (
        event.error.code == "conversation_already_has_active_response"
        and turn is not None
        and turn.response_id is None
    ):
        return Step(state=state.with_realtime(turn=turn.model_copy(update={"refused": True})))
    return unchanged(state)


def reply_to_conversation(state: SessionState) -> Step:
    """The model replies to what was just added to the conversation: now, or once the running
    response ends; never on a closed line."""
    if state.line_closed:
        return unchanged(state)
    context = ResponseContext(
        instructions=state.instructions, max_output_tokens=state.limits.max_output_tokens, input_item_id=""
    )
    if state.realtime.turn is None and state.phase is Phase.LISTENING:
        return begin_directed(state, context)
    if state.directed is None:
        return Step(state=state.evolve(directed=context))
    return unchanged(state)
