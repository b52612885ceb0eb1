"""The Realtime sideband's rules, sans I/O: a frame in, the actions it calls for out.

- **A bad frame** (too large, not JSON, the wrong shape, a host event) is an incident and
  nothing else; the frames after it go on as before.
- **Streamed deltas** go to the people watching the call as they arrive, never to the log.
- **A function call is one durable event.** The provider names each call twice (arguments
  done, then the item done); the second naming is dropped.
- **`playback` is the gateway's.** On `input_audio_buffer.speech_started` the provider's own
  `playback` field is never trusted: it is replaced by what this socket saw playing, the
  assistant audio item whose first transcript delta came last and how long ago (the audio
  reaches the caller as it is generated, so that approximates how much of it they heard).
- **A maintenance response is unspoken.** Its `response.created` marks it; its text is a
  compaction summary, so its durable frames are logged and its words are never streamed.
- **Finals**: a finished transcript line goes to the watchers after its durable event.
- **A final's place is the gateway's.** Every item added to the conversation is noted with the
  item it was put after (`pipeline.realtime.conversation`), and each final's durable event (the
  caller's, the assistant's, a typed line another client added) carries its `place`: the line
  it follows in the conversation, by which the record is ordered whatever order the finals came
  in (`pipeline.call.conversation_order`). The provider's own `place` is never trusted.
- **The caller's wait is the gateway's.** `input_audio_buffer.speech_stopped` and a response's
  first audio (`response.output_audio.delta` on a plain WebSocket; on a WebRTC or SIP sideband,
  where audio does not come, `output_audio_buffer.started` or its first transcript delta) are
  never logged: that would be two more durable events, two workers' transactions, in every turn
  for one number. This socket remembers the time of the last speech_stopped not yet answered,
  and the first audio of the response after it; that response's `response.done`, logged anyway,
  carries both as `heard` (the provider's own `heard` is never trusted), and the wait is counted
  for the metric then (`Waited`). On the hot path: a set lookup per frame, and a look through the
  last few responses' ids per audio frame.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from pipeline.call.conversation_order import PLACE_FIELD
from pipeline.call.errors import BadInput
from pipeline.call.heard import waited_ms
from pipeline.call.sideband import Action, Delta, Final, Role, Submit, Waited, bad_frame
from pipeline.realtime.capabilities import REALTIME
from pipeline.realtime.compaction import is_maintenance_metadata
from pipeline.realtime.conversation import ANNOUNCING_TYPES, ConversationChain
from pipeline.realtime.events import function_call_id, typed_text
from pipeline.realtime.frames import classify_frame
from pipeline.session.wire import FrameKind

# Function call ids remembered per socket for "one durable event per call": far more than one
# call makes while any is still being named.
# A keypad press on a phone call (the privacy boundary masks its digits).
KEY_PRESS_TYPE = "input_audio_buffer.dtmf_event_received"
REMEMBERED_FUNCTION_CALLS = 4_096
# At most one maintenance response runs at a time; a few are remembered for their late frames.
UNSPOKEN_RESPONSES = 8

_USER_TRANSCRIPT_PREFIX = "conversation.item.input_audio_transcription."
_ASSISTANT_AUDIO_DELTA = "response.output_audio_transcript.delta"
_USER_FINAL = "conversation.item.input_audio_transcription.completed"
_ASSISTANT_FINALS = frozenset({"response.output_audio_transcript.done", "response.output_text.done"})
_SPEECH_ENDED = "input_audio_buffer.speech_stopped"
_TYPED_ITEM = "conversation.item.added"
# The durable events that finish a line of the record: each carries its place.
_FINALS = frozenset({_USER_FINAL, _TYPED_ITEM, *_ASSISTANT_FINALS})
# Whichever of these comes first for a response is its first audio at the provider.
_FIRST_AUDIO = frozenset(
    {"response.output_audio.delta", "output_audio_buffer.started", _ASSISTANT_AUDIO_DELTA}
)
# Answers whose response.done has not come yet, each with the wait it answered, and the responses
# whose audio has begun: one is running, a few more are remembered for a done or an audio frame
# that comes late (a lost one is forgotten in turn).
ANSWERS_AWAITING_DONE = 8


class RealtimeSideband:
    """One Realtime sideband's protocol state (see the module's docstring)."""

    tick_every_s: float | None = None
    closed_by_provider_within_s: float | None = None

    def __init__(self) -> None:
        self._calls_seen: set[str] = set()
        self._calls_seen_order: deque[str] = deque()
        self._unspoken: deque[str] = deque(maxlen=UNSPOKEN_RESPONSES)
        # The assistant audio item playing now: (item id, response id, monotonic time of its
        # first transcript delta).
        self._playing: tuple[str, str, float] | None = None
        # When the caller last stopped speaking with no answer's audio since (wall time), the
        # responses whose audio has begun, and the waits of answers not yet done.
        self._speech_ended_at: float | None = None
        self._sounded: deque[str] = deque(maxlen=ANSWERS_AWAITING_DONE)
        self._answered: dict[str, tuple[float, float]] = {}
        self._conversation = ConversationChain()

    def receive(self, frame: str | bytes, received_at: float, now: float) -> list[Action]:
        try:
            classified = classify_frame(frame)
        except BadInput as error:
            return [bad_frame(frame, error.code, str(error))]
        kind, event_type, event = classified.kind, classified.type, classified.event
        if event_type in ANNOUNCING_TYPES:
            self._conversation.see(event_type, event)
        response_id = event.get("response_id")
        if isinstance(response_id, str) and response_id in self._unspoken:
            return [Submit(event, received_at)] if kind is FrameKind.DURABLE else []
        if event_type in _FIRST_AUDIO:
            self._first_audio(response_id, received_at)
        if kind is FrameKind.STREAMED:
            if event_type == _ASSISTANT_AUDIO_DELTA:
                self._heard_delta(event["item_id"], str(event.get("response_id", "")), now)
            role: Role = "user" if event_type.startswith(_USER_TRANSCRIPT_PREFIX) else "assistant"
            return [Delta(role, event["item_id"], event.get("delta", ""))]
        if kind is FrameKind.IGNORED:
            if event_type == _SPEECH_ENDED:
                self._speech_ended_at = received_at
            return []
        call_id = function_call_id(event)
        if call_id is not None and not self._first_sight_of_call(call_id):
            return []
        if event_type == "input_audio_buffer.speech_started":
            # The workers decide on a barge-in; only the gateway knows what was playing.
            event = {key: value for key, value in event.items() if key != "playback"}
            playback = self.playback(now)
            if playback is not None:
                event["playback"] = playback
        elif event_type == "response.created" and is_maintenance_metadata(
            (event.get("response") or {}).get("metadata")
        ):
            self._unspoken.append(str(event["response"].get("id")))
        waited: Waited | None = None
        if event_type == "response.done":
            event, waited = self._with_wait(event)
        elif event_type in _FINALS:
            event = self._placed(event)
        actions: list[Action] = [Submit(event, received_at)]
        if waited is not None:
            actions.append(waited)
        if event_type == _USER_FINAL:
            actions.append(Final("user", event["item_id"], event.get("transcript", "")))
        elif event_type == _TYPED_ITEM:
            # The one durable conversation.item.added: a line another client typed.
            item = event["item"]
            typist: Role = "assistant" if item["role"] == "assistant" else "user"
            actions.append(Final(typist, item["id"], typed_text(item["role"], item["content"])))
        elif event_type in _ASSISTANT_FINALS:
            text = event.get("transcript", event.get("text", ""))
            actions.append(Final("assistant", event["item_id"], text))
        return actions

    def tick(self, at: float) -> list[Action]:
        return []

    def close(self, at: float) -> list[Action]:
        return []

    def playback(self, now: float) -> dict[str, Any] | None:
        if self._playing is None:
            return None
        item_id, response_id, started = self._playing
        return {
            "item_id": item_id,
            "response_id": response_id,
            "played_ms": max(int((now - started) * 1000), 0),
        }

    def _first_sight_of_call(self, call_id: str) -> bool:
        if call_id in self._calls_seen:
            return False
        self._calls_seen.add(call_id)
        self._calls_seen_order.append(call_id)
        if len(self._calls_seen_order) > REMEMBERED_FUNCTION_CALLS:
            self._calls_seen.discard(self._calls_seen_order.popleft())
        return True

    def _first_audio(self, response_id: object, received_at: float) -> None:
        """A frame of a response's audio: the first one answers the caller's wait, if any."""
        if not isinstance(response_id, str) or response_id in self._sounded:
            return
        self._sounded.append(response_id)
        if self._speech_ended_at is None:
            return  # a greeting, or an answer to typed words: nobody stopped speaking for it
        self._answered[response_id] = (self._speech_ended_at, received_at)
        self._speech_ended_at = None
        while len(self._answered) > ANSWERS_AWAITING_DONE:
            del self._answered[next(iter(self._answered))]

    def _with_wait(self, done: dict[str, Any]) -> tuple[dict[str, Any], Waited | None]:
        """A response.done with the wait its response answered (`heard`), and that wait."""
        event = {key: value for key, value in done.items() if key != "heard"}
        response = done.get("response")
        response_id = response.get("id") if isinstance(response, dict) else None
        answered = self._answered.pop(response_id, None) if isinstance(response_id, str) else None
        if answered is None:
            return event, None
        speech_ended_at, first_audio_at = answered
        event["heard"] = {"speech_ended_at": speech_ended_at, "first_audio_at": first_audio_at}
        wait_ms = waited_ms(speech_ended_at, first_audio_at)
        return event, Waited(REALTIME.name, wait_ms) if wait_ms is not None else None

    def _placed(self, final: dict[str, Any]) -> dict[str, Any]:
        """A final's event with the place of its item in the conversation, when it was seen
        added (and without any the provider sent)."""
        event = {key: value for key, value in final.items() if key != PLACE_FIELD}
        item = event.get("item")
        item_id = item.get("id") if isinstance(item, dict) else event.get("item_id")
        place = self._conversation.place_of(item_id) if isinstance(item_id, str) else None
        if place is not None:
            event[PLACE_FIELD] = {"after": place.after}
        return event

    def _heard_delta(self, item_id: str, response_id: str, now: float) -> None:
        # The first delta of an item starts its playback.
        if self._playing is None or self._playing[0] != item_id:
            self._playing = (item_id, response_id, now)
