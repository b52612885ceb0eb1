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
"""

from __future__ import annotations

from collections import deque
from typing import Any

from pipeline.call.sideband import Action, Delta, Final, Role, Submit, bad_frame
from pipeline.errors import BadInput
from pipeline.realtime.compaction import is_maintenance_metadata
from pipeline.realtime.events import function_call_id
from pipeline.realtime.frames import classify_frame
from pipeline.wire import FrameKind

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

    def receive(self, frame: str | bytes, received_at: float, now: float) -> list[Action]:
        try:
            classified = classify_frame(frame)
        except BadInput as error:
            return [bad_frame(frame, error.code, str(error))]
        kind, event_type, event = classified.kind, classified.type, classified.event
        response_id = event.get("response_id")
        if isinstance(response_id, str) and response_id in self._unspoken:
            return [Submit(event, received_at)] if kind is FrameKind.DURABLE else []
        if kind is FrameKind.STREAMED:
            if event_type == _ASSISTANT_AUDIO_DELTA:
                self._heard_delta(event["item_id"], str(event.get("response_id", "")), now)
            role: Role = "user" if event_type.startswith(_USER_TRANSCRIPT_PREFIX) else "assistant"
            return [Delta(role, event["item_id"], event.get("delta", ""))]
        if kind is FrameKind.IGNORED:
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
        actions: list[Action] = [Submit(event, received_at)]
        if event_type == _USER_FINAL:
            actions.append(Final("user", event["item_id"], event.get("transcript", "")))
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

    def _heard_delta(self, item_id: str, response_id: str, now: float) -> None:
        # The first delta of an item starts its playback.
        if self._playing is None or self._playing[0] != item_id:
            self._playing = (item_id, response_id, now)
