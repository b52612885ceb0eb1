"""What the neutral rules ask of a Realtime call, done the Realtime way: the host asks for
every response (a directed turn for words to say), notes join the conversation as system
items the model replies to, and the line is closed by cutting the response and switching turn
detection off."""

from __future__ import annotations

import json
from typing import Any

from pipeline.call.capabilities import Refusal
from pipeline.call.heard import HeardWait
from pipeline.call.messages import Playback
from pipeline.call.progress import CallProgress
from pipeline.call.story import ResponseBegun, ResponseEnded, StoryMark
from pipeline.realtime import decisions
from pipeline.realtime.capabilities import REALTIME
from pipeline.realtime.configuration import offered_tools, session_configuration, turn_detection_update
from pipeline.realtime.controls import InputAudioBufferClear, ItemCreate, ResponseCancel, ResponseCreate
from pipeline.realtime.events import (
    AssistantTranscriptFinal,
    CallerSilent,
    FunctionCallArgumentsDone,
    FunctionCallItemDone,
    ItemDeleted,
    ItemTruncated,
    ResponseCreated,
    ResponseDone,
    SpeechStarted,
    UserTranscriptFailed,
    UserTranscriptFinal,
    parse_realtime,
)
from pipeline.realtime.turns import (
    SAY_EXACTLY,
    ask_for_response,
    barge_in,
    begin_directed,
    listen_again,
    may_respond,
    owed_next,
    reply_to_conversation,
)
from pipeline.session.state import LiveCall, Phase, ResponseContext, SessionState, ToolChain
from pipeline.session.step import Control, LogEntry, Step, answering, refused, unchanged
from pipeline.session.timers import Timer
from pipeline.session.wire import (
    CompactionUnsaved,
    InboundEvent,
    KeyPressed,
    ProviderError,
    SessionCreated,
    SessionUpdate,
)


class RealtimeDialect:
    capabilities = REALTIME
    incoming_call = "realtime.call.incoming"

    # What only a Realtime sideband says (or the host says of a Realtime call only).
    own_events: tuple[type, ...] = (
        SpeechStarted,
        UserTranscriptFinal,
        UserTranscriptFailed,
        ResponseCreated,
        AssistantTranscriptFinal,
        FunctionCallArgumentsDone,
        FunctionCallItemDone,
        ResponseDone,
        ItemTruncated,
        ItemDeleted,
        KeyPressed,
        CallerSilent,
        CompactionUnsaved,
    )

    def wing_state(self, event: SessionCreated) -> LiveCall | None:
        return None

    def configuration(self, state: SessionState) -> dict[str, Any]:
        return session_configuration(state)

    def sideband_configuration(self, state: SessionState) -> dict[str, Any]:
        return session_configuration(state)

    def creation_configuration(self, state: SessionState) -> dict[str, Any] | None:
        # A WebRTC call is created bare: its sideband configures it once it is up.
        return None

    def listen(self, listening: SessionState) -> Step:
        greeting = listening.greeting
        if greeting is None or listening.greeted or listening.line_closed:
            # What was asked for while the session was configured (a person's words) starts now.
            return owed_next(listening) if listening.realtime.turn is None else Step(state=listening)
        greeted = listening.evolve(greeted=True)
        if greeting.say is not None:
            instructions = SAY_EXACTLY.format(text=greeting.say)
        else:
            instructions = f"{listening.instructions}\n\n{greeting.reply}"
        # Tool-free: a model offered end_call while it greets may hang up before the caller speaks.
        context = ResponseContext(
            instructions=instructions,
            max_output_tokens=listening.limits.max_output_tokens,
            input_item_id="",
            tool_choice="none",
        )
        return begin_directed(greeted, context)

    def reconnected(self, state: SessionState) -> Step:
        # A response the caller is owed is asked for again, under a new response deadline (a
        # running one is cancelled first; if the provider still holds it active, the request is
        # refused and repeated when that response ends), so the session never waits for a
        # response.done nobody will see. A tool that runs still gets its output when it
        # finishes, without driving a response.
        turn = state.realtime.turn
        if turn is None:
            return Step(state=state)
        if turn.asked_generation == state.generation and turn.response_id is None:
            # Asked of this sideband (the caller spoke while the call moved to it): the request
            # waited for it to open and went out once; asked again, the caller heard two answers.
            return Step(state=state)
        cancel = (ResponseCancel(response_id=turn.response_id),) if turn.response_id else ()
        if not may_respond(state, turn.context):
            # The line closed meanwhile: what was owed is not asked for again.
            return Step(state=state, controls=cancel).then(listen_again(state))
        chain = state.realtime.chain
        if chain.pending is not None:
            moved_on = chain.model_copy(update={"response_completed": True, "continuation_allowed": False})
            return Step(state=state.with_realtime(chain=moved_on), controls=cancel)
        cancelled = Step(state=state.with_realtime(chain=state.realtime.chain.next_turn()), controls=cancel)
        return cancelled.then(ask_for_response(cancelled.state, turn))

    def closing(self, state: SessionState) -> tuple[Control, ...]:
        # A Realtime call is hung up alone.
        return ()

    def say(self, state: SessionState, text: str) -> Step:
        context = ResponseContext(
            instructions=SAY_EXACTLY.format(text=text),
            max_output_tokens=state.limits.max_output_tokens,
            input_item_id="",
            tool_choice="none",
        )
        return begin_directed(state, context)

    def steer(self, state: SessionState, steer: str) -> Step:
        context = ResponseContext(
            instructions=f"{state.instructions}\n\n{steer}",
            max_output_tokens=state.limits.max_output_tokens,
            input_item_id="",
        )
        return begin_directed(state, context)

    def person_says(
        self, state: SessionState, text: str, said: LogEntry, request_id: str | None, gateway_id: str | None
    ) -> Step:
        if state.directed is not None and state.directed.by_supervisor:
            message = "words of a supervisor already wait for the running response to end"
            return refused(state, request_id, gateway_id, 409, "agent_busy", message)
        context = ResponseContext(
            instructions=SAY_EXACTLY.format(text=text),
            max_output_tokens=state.limits.max_output_tokens,
            input_item_id="",
            tool_choice="none",
            by_supervisor=True,
        )
        logged = Step(state=state, effects=(said,))
        if state.realtime.turn is None and state.phase is Phase.LISTENING:
            step = logged.then(begin_directed(state, context))
            return answering(step, request_id, gateway_id, 202, {"status": "speaking"})
        step = logged.then(Step(state=state.evolve(directed=context)))
        # Not "queued": that is the gateway's answer when no worker answered in time.
        return answering(step, request_id, gateway_id, 202, {"status": "after_response"})

    def note(self, state: SessionState, note: str) -> Step:
        message = ItemCreate(
            item={"type": "message", "role": "system", "content": [{"type": "input_text", "text": note}]}
        )
        return Step(state=state, controls=(message,)).then(reply_to_conversation(state))

    def instructions_changed(
        self, state: SessionState, name: str, text: str, instructions_now: str
    ) -> tuple[Control, ...] | Refusal:
        # The provider takes the whole instructions anew.
        return (SessionUpdate(session={"type": "realtime", "instructions": instructions_now}),)

    def tools_changed(self, state: SessionState) -> tuple[Control, ...]:
        offered = {"type": "realtime", "tools": offered_tools(state), "tool_choice": "auto"}
        return (SessionUpdate(session=offered),)

    def silence(self, state: SessionState, playback: Playback | None) -> Step:
        cut = barge_in(state, playback)
        chain = cut.state.realtime.chain
        if chain.pending is not None:
            chain = chain.model_copy(update={"continuation_allowed": False})
        directed = state.directed if state.directed is not None and state.directed.by_supervisor else None
        # A goodbye cut short is no longer the agent's last word: the call goes on with the line.
        quiet = cut.state.evolve(directed=directed).with_realtime(
            chain=chain, queued_input_item_id=None, hanging_up=False
        )
        return Step(state=quiet, controls=cut.controls, effects=cut.effects)

    def mute(self, held: SessionState) -> Step:
        return Step(state=held, controls=(SessionUpdate(session=turn_detection_update(held)),))

    def unmute(self, free: SessionState) -> Step:
        # What the caller said meanwhile is dropped from the input buffer: nothing answers it.
        return Step(
            state=free, controls=(InputAudioBufferClear(), SessionUpdate(session=turn_detection_update(free)))
        )

    def line_freed(self, free: SessionState) -> Step:
        return unchanged(free)

    def transfer_failed(self, state: SessionState, call_id: str, error: str) -> Step:
        # The model's transfer_call gets its outcome, and the model replies to it.
        output = ItemCreate(
            item={
                "type": "function_call_output",
                "call_id": call_id,
                "output": json.dumps({"transferred": False, "error": error}),
            }
        )
        answered = Step(state=state, controls=(output,))
        return answered.then(reply_to_conversation(answered.state))

    def decide(self, state: SessionState, event: InboundEvent) -> Step | None:
        return decisions.decide(state, event)

    def timer_fired(self, state: SessionState, timer: Timer) -> Step | None:
        return decisions.timer_fired(state, timer)

    def provider_error(self, state: SessionState, event: ProviderError) -> Step:
        return decisions.provider_error(state, event)

    def key_press(self, event: InboundEvent) -> KeyPressed | None:
        return event if isinstance(event, KeyPressed) else None

    def ended(self, before: SessionState, step: Step) -> Step:
        return decisions.ended(before, step)

    def record_late(self, state: SessionState, event: InboundEvent) -> Step | None:
        return decisions.record_late(state, event)

    def asks_for_reply(self, controls: tuple[Control, ...]) -> bool:
        return any(isinstance(control, ResponseCreate) for control in controls)

    def erased(self, state: SessionState) -> SessionState:
        # The turn's context, a pending tool output and a compaction's summary are what was said.
        chain = ToolChain(
            calls=state.realtime.chain.calls,
            seen=state.realtime.chain.seen,
            limit_refused=state.realtime.chain.limit_refused,
            continuation_allowed=state.realtime.chain.continuation_allowed,
            response_completed=state.realtime.chain.response_completed,
        )
        compaction = (
            state.realtime.compaction.model_copy(update={"summary": None})
            if state.realtime.compaction
            else None
        )
        return state.with_realtime(turn=None, chain=chain, compaction=compaction)

    def parse(self, raw: dict[str, Any]) -> InboundEvent | None:
        return parse_realtime(raw)

    def call_progress(self, event: InboundEvent) -> CallProgress | None:
        # A Realtime call never goes out (Ability.OUTBOUND_CALLS).
        return None

    def story_mark(self, event: InboundEvent) -> StoryMark | None:
        if isinstance(event, ResponseCreated):
            return ResponseBegun(event.response.id)
        if isinstance(event, ResponseDone):
            heard = event.heard
            waited = HeardWait(heard.speech_ended_at, heard.first_audio_at) if heard is not None else None
            return ResponseEnded(
                event.response.id, interrupted=event.response.status == "cancelled", heard=waited
            )
        return None

    def outlives_its_sideband(self, state: SessionState, event: InboundEvent) -> bool:
        return decisions.outlives_its_sideband(state, event)


DIALECT = RealtimeDialect()
