"""What the neutral rules ask of a Live call, done the Live way: the model holds the
conversation, so words to say are commentary it speaks from and a steer or note is appended to
its instructions; the line is closed by muting the caller's audio to the model (Live has no
cancel), and the delegations' answers that waited go out when it opens again."""

from __future__ import annotations

from typing import Any

from pipeline.call.capabilities import Refusal, too_long
from pipeline.call.messages import Playback
from pipeline.call.progress import Answered, AskedNotToBeCalled, CallProgress, DialFailed, Ringing, Said
from pipeline.call.story import AnswerPlaced, SpokenPiece, StoryMark
from pipeline.live import decisions, delegation, reports
from pipeline.live.capabilities import LIVE
from pipeline.live.configuration import DO_NOT_CALL, live_configuration, live_update
from pipeline.live.controls import InputAudio, commentary, instructions
from pipeline.live.events import (
    Appended,
    Decided,
    Delegated,
    InputMuted,
    KeyReceived,
    LiveClosed,
    LiveTranscript,
    TransportFailed,
    TransportProgress,
    UsageUpdated,
    parse_live,
)
from pipeline.live.frames import COALESCE_GAP_MS
from pipeline.session.state import LiveCall, LiveSetup, SessionState
from pipeline.session.step import Control, LogEntry, Step, answering, unchanged
from pipeline.session.timeline import Speaker
from pipeline.session.timers import Timer
from pipeline.session.wire import InboundEvent, KeyPressed, ProviderError, SessionCreated

# A Live session's instructions are fixed at startup: a changed block is appended as an update.
LIVE_BLOCK_CHANGED = (
    "Your instructions have changed: follow this from now on, in place of the part named '{name}':\n{text}"
)
LIVE_BLOCK_REMOVED = "Your instructions have changed: disregard the part named '{name}' from now on."


class LiveDialect:
    capabilities = LIVE
    # Its call id is the Live session's id.
    incoming_call = "live.transport.incoming"

    # What only a Live sideband says.
    own_events: tuple[type, ...] = (
        LiveTranscript,
        Delegated,
        Appended,
        InputMuted,
        UsageUpdated,
        LiveClosed,
        KeyReceived,
        TransportProgress,
        TransportFailed,
        Decided,
    )

    def wing_state(self, event: SessionCreated) -> LiveCall | None:
        return LiveCall(setup=event.live or LiveSetup())

    def configuration(self, state: SessionState) -> dict[str, Any]:
        return live_configuration(state)

    def sideband_configuration(self, state: SessionState) -> dict[str, Any]:
        # The call was configured when it was created or accepted; the update only confirms its
        # delegation settings (the one thing a Live sideband may change), so the provider's
        # session.updated says the sideband is heard, as on Realtime.
        return live_update(state)

    def creation_configuration(self, state: SessionState) -> dict[str, Any] | None:
        return live_configuration(state)

    def listen(self, listening: SessionState) -> Step:
        # A greeting is context the model speaks from (the words as commentary, a reply's steer
        # as instructions), once.
        greeting = listening.greeting
        if greeting is None or listening.greeted or listening.line_closed:
            return delegation.deliver_owed(listening)
        greeted = listening.evolve(greeted=True)
        if greeting.say is not None:
            return Step(state=greeted, controls=(commentary(greeting.say, delegation_id=None),))
        assert greeting.reply is not None
        return Step(state=greeted, controls=(instructions(greeting.reply),))

    def reconnected(self, state: SessionState) -> Step:
        # Live has no response to re-ask: the model is asked to re-confirm what the gap may have
        # swallowed, and the answers that waited for the sideband go out.
        reconfirmed = delegation.reconfirmed(state)
        return reconfirmed.then(delegation.deliver_owed(reconfirmed.state))

    def closing(self, state: SessionState) -> tuple[Control, ...]:
        return reports.closing(state)

    def say(self, state: SessionState, text: str) -> Step:
        # The model holds the conversation: the words are context it says, in its own voice.
        return Step(state=state, controls=(commentary(text, delegation_id=None),))

    def steer(self, state: SessionState, steer: str) -> Step:
        return Step(state=state, controls=(instructions(steer),))

    def person_says(
        self, state: SessionState, text: str, said: LogEntry, request_id: str | None, gateway_id: str | None
    ) -> Step:
        # The model says the words (in its own) as it can; nothing waits for a response.
        spoken = Step(state=state, controls=(commentary(text, delegation_id=None),), effects=(said,))
        return answering(spoken, request_id, gateway_id, 202, {"status": "speaking"})

    def note(self, state: SessionState, note: str) -> Step:
        # Appended to the model's instructions, which it heeds as it goes.
        return Step(state=state, controls=(instructions(note),))

    def instructions_changed(
        self, state: SessionState, name: str, text: str, instructions_now: str
    ) -> tuple[Control, ...] | Refusal:
        note = (
            LIVE_BLOCK_CHANGED.format(name=name, text=text) if text else LIVE_BLOCK_REMOVED.format(name=name)
        )
        cannot = too_long(LIVE, note)
        if cannot is not None:
            return cannot
        return (instructions(note),)

    def tools_changed(self, state: SessionState) -> tuple[Control, ...]:
        # The voice model has no tools; a change of them is refused (Ability.TOOLS) first.
        return ()

    def silence(self, state: SessionState, playback: Playback | None) -> Step:
        # What the model is saying cannot be cut: Live has no cancel.
        return unchanged(state)

    def mute(self, held: SessionState) -> Step:
        return Step(state=held, controls=(InputAudio(type="session.input_audio.mute"),))

    def unmute(self, free: SessionState) -> Step:
        return Step(state=free, controls=(InputAudio(type="session.input_audio.unmute"),))

    def line_freed(self, free: SessionState) -> Step:
        # The delegations' answers that waited for the line go out.
        return delegation.deliver_owed(free)

    def transfer_failed(self, state: SessionState, call_id: str, error: str) -> Step:
        # A Live model has no function tools, so it never asks for a transfer itself.
        return unchanged(state)

    def decide(self, state: SessionState, event: InboundEvent) -> Step | None:
        return decisions.decide(state, event)

    def timer_fired(self, state: SessionState, timer: Timer) -> Step | None:
        return decisions.timer_fired(state, timer)

    def provider_error(self, state: SessionState, event: ProviderError) -> Step:
        # Live has no response a refusal leaves owed: the incident is all.
        return unchanged(state)

    def key_press(self, event: InboundEvent) -> KeyPressed | None:
        return decisions.key_press(event)

    def ended(self, before: SessionState, step: Step) -> Step:
        return delegation.interrupted_by_end(before, step)

    def record_late(self, state: SessionState, event: InboundEvent) -> Step | None:
        return decisions.record_late(state, event)

    def asks_for_reply(self, controls: tuple[Control, ...]) -> bool:
        # The model replies when it chooses: nothing asks it to.
        return False

    def erased(self, state: SessionState) -> SessionState:
        # The words heard, and each delegation's task and answer, are what was said.
        if state.live is None:
            return state
        kept = LiveCall(
            setup=state.live.setup,
            heard_until_ms=state.live.heard_until_ms,
            claimed_ms=state.live.claimed_ms,
            open=tuple(d.model_copy(update={"task": "", "answer": None}) for d in state.live.open),
            delegations=state.live.delegations,
            answered=state.live.answered,
            context_ratio=state.live.context_ratio,
        )
        return state.evolve(live=kept)

    def parse(self, raw: dict[str, Any]) -> InboundEvent | None:
        return parse_live(raw)

    def call_progress(self, event: InboundEvent) -> CallProgress | None:
        if isinstance(event, TransportProgress):
            return Ringing() if event.type == "transport.ringing" else Answered()
        if isinstance(event, TransportFailed):
            return DialFailed(event.error.code or "unknown", event.error.message)
        if isinstance(event, LiveTranscript):
            return Said(event.text, event.start_ms, event.end_ms, by_callee=event.speaker is Speaker.CALLER)
        if isinstance(event, Decided):
            probability = event.probability(DO_NOT_CALL)
            return AskedNotToBeCalled(probability) if probability is not None else None
        return None

    def story_mark(self, event: InboundEvent) -> StoryMark | None:
        if isinstance(event, LiveTranscript):
            return SpokenPiece(event.start_ms, event.end_ms, joins_within_ms=COALESCE_GAP_MS)
        if isinstance(event, Appended) and event.type == "session.commentary.appended":
            return AnswerPlaced(event.start_ms)
        return None

    def outlives_its_sideband(self, state: SessionState, event: InboundEvent) -> bool:
        # The caller's words and the model's delegations, seen by a sideband that was then
        # superseded: the current one will never see them, and the model waits for an answer.
        return isinstance(event, LiveTranscript | Delegated)


DIALECT = LiveDialect()
