"""One simulated call: its sideband, its session and conversation, its caller and its model.

Everything the call says goes through `_emit`, which stamps the event id, checks the event against
the strict oracle and queues it; a single writer task sends the queue in order and logs each event
with the wall-clock time it left. State changes happen synchronously where the event is emitted, so
a client event that arrives next always sees them (an answer is active from its `response.created`).
Only pacing awaits: the caller's speech, the stream of deltas, and the playback of a recording.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import json
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from simulator.conversation import (
    CHARS_PER_TOKEN,
    Conversation,
    Refusal,
    default_session,
    estimate_tokens,
    item_text,
    merge_session,
)
from simulator.models import ModelRefusal, is_reasoning_model, realtime_session_refusal, response_refusal
from simulator.oracle import wire_problems
from simulator.playback import GATE_TIMEOUT_S, STALLED_CODE, HostControls, play
from simulator.recording import Recording
from simulator.script import (
    FALLBACK_ANSWER,
    CallerHangsUp,
    CallerPresses,
    CallerSays,
    CallerStaysSilent,
    CallScript,
    ModelCalls,
    ModelCallsInParallel,
    ModelEntry,
    ModelSays,
    ModelWrites,
    model_text,
)

logger = logging.getLogger(__name__)

CallStatus = Literal["created", "active", "ended"]
StopReason = Literal["turn_detected", "client_cancelled"]

# Queued events still go out before a hangup closes the socket, unless the client stops reading.
FLUSH_BEFORE_CLOSE_S = 5.0
# Silence sent in each optional response.output_audio.delta: 20 ms of 24 kHz 16-bit mono PCM.
SILENT_AUDIO_DELTA = base64.b64encode(bytes(960)).decode()
# Rough audio token rates for the usage figures: one token per this many milliseconds.
AUDIO_MS_PER_TOKEN = 50
# A generous, never-exhausted budget reported in rate_limits.updated.
RATE_LIMITS = [
    {"name": "requests", "limit": 1000, "remaining": 999, "reset_seconds": 60},
    {"name": "tokens", "limit": 50000, "remaining": 49000, "reset_seconds": 60},
]
CLIENT_EVENT_TYPES = (
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "output_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.retrieve",
    "conversation.item.truncate",
    "conversation.item.delete",
    "response.create",
    "response.cancel",
)


class IdMint:
    """Fresh ids per kind (`event_1`, `item_1`, `resp_1`, …), unique within one simulator."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def __call__(self, prefix: str) -> str:
        counter = self._counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}_{next(counter)}"


# 24 kHz mono PCM16: what a millisecond of the caller's speech fills the input buffer with.
PCM16_BYTES_PER_MS = 48


@dataclass
class CallLog:
    """What happened on a call: every server event sent and client event received, timestamped.

    `t` is `time.time()` taken as the event left or the control arrived. `errors` holds every
    strict-oracle violation in either direction and every internal failure; a clean call has none.
    Readable as attributes or, like its JSON form, by key (`log["events"]`).
    """

    call_id: str
    status: CallStatus = "created"
    events: list[dict[str, Any]] = field(default_factory=list)
    controls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    attached_at: float | None = None
    closed_at: float | None = None
    close_code: int | None = None
    # Where a `refer` sent the caller (the SIP Refer-To), if one did.
    referred_to: str | None = None
    # A phone call: its webhook's deliveries ({attempt, status, sent_at, t}), how often it was
    # accepted (once, or the host answered it twice), and the SIP status it was rejected with.
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    accepts: list[float] = field(default_factory=list)
    rejected_with: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The log as the `GET /_sim/calls/{id}` body."""
        return {
            "call_id": self.call_id,
            "status": self.status,
            "events": list(self.events),
            "controls": list(self.controls),
            "errors": list(self.errors),
            "attached_at": self.attached_at,
            "closed_at": self.closed_at,
            "close_code": self.close_code,
            "referred_to": self.referred_to,
            "deliveries": list(self.deliveries),
            "accepts": list(self.accepts),
            "rejected_with": self.rejected_with,
        }

    def __getitem__(self, key: str) -> Any:
        return self.as_json()[key]

    def event_types(self) -> list[str]:
        """The types of the server events sent, in order."""
        return [entry["event"].get("type", "") for entry in self.events]


@dataclass(eq=False)
class ModelResponse:
    """One response in flight: what it was asked for, what it will say, and whether to stop."""

    id: str
    entry: ModelEntry
    is_in_conversation: bool
    modalities: list[str]
    max_output_tokens: int | Literal["inf"]
    voice: str
    metadata: dict[str, str] | None
    input_tokens: int
    # Said first as a message of its own (a reasoning model's preamble), or None.
    preamble: str | None = None
    output: list[dict[str, Any]] = field(default_factory=list)
    # Output items begun so far: the next one's output_index.
    items_started: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    stop_reason: StopReason | None = None
    is_finished: bool = False
    has_called_function: bool = False
    audio_started_at: float | None = None

    def cancel(self, reason: StopReason) -> None:
        """Ask the stream to stop at its next pause and finish as cancelled."""
        self.stop_reason = reason
        self.stop.set()

    @property
    def is_audio(self) -> bool:
        """Whether the response speaks: an audio answer, or a spoken preamble before its calls."""
        return isinstance(self.entry, ModelSays) or (self.preamble is not None and "audio" in self.modalities)


class SimulatedCall:
    """A call on the simulated provider, from `POST /calls` to hangup."""

    def __init__(
        self,
        call_id: str,
        *,
        script: CallScript,
        mint: IdMint,
        session: dict[str, Any] | None = None,
        recording: Recording | None = None,
        speed: float = 1.0,
        strict: bool = True,
        closed_loop: bool = True,
        gate_timeout_s: float = GATE_TIMEOUT_S,
    ) -> None:
        self.call_id = call_id
        self.log = CallLog(call_id)
        self.script = script
        self.session = merge_session(default_session(mint("sess")), session or {})
        self.conversation = Conversation()
        self._conversation_id = mint("conv")
        self._mint = mint
        self._recording = recording
        self._speed = speed
        self._closed_loop = closed_loop
        self._gate_timeout_s = gate_timeout_s
        self._host = HostControls()
        self._strict = strict
        self._socket: ServerConnection | None = None
        self._outbox: asyncio.Queue[dict[str, Any] | str] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._model_turns = iter(script.model)
        self._out_of_band_turns = iter(script.out_of_band)
        self._responses: dict[str, ModelResponse] = {}
        self._answering: ModelResponse | None = None
        self._answers_started = 0
        self._answers_finished = 0
        self._out_of_band_started = 0
        # A fault: sideband handshakes for this call are refused (see the server's drop).
        self.refuses_sideband = False
        self._playing: ModelResponse | None = None
        self._drain: asyncio.Task[None] | None = None
        self._input_audio_bytes = 0
        self._writer: asyncio.Task[None] | None = None

    # ── the sideband ────────────────────────────────────────────────────────────

    @property
    def has_ended(self) -> bool:
        return self.log.status == "ended"

    async def serve_sideband(self, socket: ServerConnection) -> None:
        """Talk to the host over this socket until it closes; the caller starts on first attach."""
        superseded = self._socket
        self._socket = socket
        self.log.status = "active"
        if superseded is not None:
            # A reconnect takes over the call; the stale socket is let go, as a restart would.
            await superseded.close(1001, "superseded by a new sideband connection")
        if self._writer is None:
            self.log.attached_at = time.time()
            self._writer = asyncio.create_task(self._write_events())
            self._spawn(self._play() if self._recording else self._begin())
        try:
            async for message in socket:
                self._receive(message)
        except ConnectionClosed:
            pass
        finally:
            if self._socket is socket:
                self._socket = None

    async def end(self, code: int = 1000, reason: str = "") -> None:
        """End the call: stop the caller and model, flush queued events, close the sideband."""
        if self.has_ended:
            return
        self.log.status = "ended"
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        socket = self._socket
        if socket is not None:
            try:
                await asyncio.wait_for(self._outbox.join(), FLUSH_BEFORE_CLOSE_S)
            except TimeoutError:
                self._record_error(f"hangup: {self._outbox.qsize()} events never left")
        # Logged before the close handshake, so a host that sees the close sees a complete log.
        self.log.closed_at = time.time()
        self.log.close_code = code
        if socket is not None:
            await socket.close(code, reason)
        if self._writer is not None:
            self._writer.cancel()

    def accept(self, session: dict[str, Any]) -> None:
        """Apply the session config of `POST /calls/{id}/accept` (a SIP call being answered)."""
        self.session = merge_session(self.session, session)

    async def drop_sideband(self, code: int = 1011) -> None:
        """Close the sideband as a network fault would; the call goes on and may be re-attached."""
        socket = self._socket
        if socket is not None:
            self._socket = None
            await socket.close(code, "dropped by the simulator")

    def inject_raw(self, frames: list[str]) -> None:
        """Send these frames verbatim, in order with the call's own events (fault injection:
        malformed, oversized or unknown frames)."""
        for frame in frames:
            self._outbox.put_nowait(frame)

    async def _write_events(self) -> None:
        # One writer per call, whichever socket is attached, so the wire order is the emit order.
        while True:
            event = await self._outbox.get()
            socket = self._socket
            try:
                if socket is not None and isinstance(event, str):
                    # An injected raw frame (a fault): sent as is, kept out of the event log.
                    await socket.send(event)
                elif socket is not None:
                    text = json.dumps(event)
                    self.log.events.append({"t": time.time(), "event": event})
                    await socket.send(text)
            except ConnectionClosed:
                pass
            finally:
                self._outbox.task_done()

    def _emit(self, event: dict[str, Any]) -> None:
        if self._socket is None or self.has_ended:
            return  # nobody is listening: the service drops events for a gone sideband too
        event = copy.deepcopy(event)
        if "event_id" not in event:
            event = {"type": event["type"], "event_id": self._mint("event"), **event}
        if self._strict:
            problems = wire_problems(event, direction="server")
            if problems:
                message = f"server {event.get('type')} {event.get('event_id')}: " + "; ".join(
                    map(str, problems)
                )
                logger.error("simulator sent an invalid event: %s", message)
                self._record_error(message)
        self._outbox.put_nowait(event)

    def _record_error(self, message: str) -> None:
        self.log.errors.append(message)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._forget_task)
        return task

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            logger.error("simulated call %s failed", self.call_id, exc_info=error)
            self._record_error(f"internal: {error!r}")

    def request_made(self, kind: str) -> None:
        """`switchboard replay` made a recorded request of the host again (an app's say, an
        end): in closed-loop playback the events after it may go on."""
        self._host.count_request(kind)
        self._notify()

    def _notify(self) -> None:
        # Wake every waiter once; each re-checks its own condition.
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_until(self, is_done: Callable[[], bool], timeout_ms: float | None) -> bool:
        loop = asyncio.get_running_loop()
        deadline = None if timeout_ms is None else loop.time() + timeout_ms / 1000
        while not is_done():
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return is_done()
        return True

    # ── playback ────────────────────────────────────────────────────────────────

    async def _play(self) -> None:
        """Play the recording (closed loop unless told otherwise: simulator.playback)."""
        assert self._recording is not None
        code = await play(
            self._recording,
            speed=self._speed,
            closed_loop=self._closed_loop,
            gate_timeout_s=self._gate_timeout_s,
            host=self._host,
            emit=self._emit,
            wait_until=self._wait_until,
            stalled=self._record_error,
        )
        await self.end(code, "closed-loop playback stalled" if code == STALLED_CODE else "")

    # ── the caller ──────────────────────────────────────────────────────────────

    async def _begin(self) -> None:
        if self.script.session_created_on_attach:
            self._emit({"type": "session.created", "session": self.session})
        await self._run_caller()

    async def _run_caller(self) -> None:
        timing = self.script.timing
        answers_before = self._answers_started
        out_of_band_before = self._out_of_band_started
        for index, step in enumerate(self.script.caller):
            if isinstance(step, CallerSays) and step.during_response:
                await self._wait_for_answer(answers_before, timing.response_wait_ms)
            elif isinstance(step, CallerSays) and step.during_tool:
                await self._wait_for_tool_call(answers_before, timing.response_wait_ms)
            elif isinstance(step, CallerSays) and step.during_out_of_band:
                await self._wait_for_out_of_band(out_of_band_before, timing.response_wait_ms)
            elif index > 0:
                await self._wait_for_reply(answers_before)
            await asyncio.sleep(step.after_ms / 1000)
            if isinstance(step, CallerHangsUp):
                await self.end(1000)
                return
            out_of_band_before = self._out_of_band_started
            if isinstance(step, CallerPresses):
                answers_before = self._answers_started
                self._emit(
                    {
                        "type": "input_audio_buffer.dtmf_event_received",
                        "event": step.dtmf,
                        "received_at": int(time.time()),
                    }
                )
            elif isinstance(step, CallerStaysSilent):
                answers_before = self._answers_started
                await self._stay_silent()
            else:
                answers_before = await self._speak(step.say)

    async def _wait_for_out_of_band(self, started_before: int, wait_ms: int) -> None:
        """Wait until an out-of-band response (a host's maintenance response) has started since
        the caller last spoke, or `wait_ms` has passed."""
        await self._wait_until(lambda: self._out_of_band_started > started_before, wait_ms)

    async def _wait_for_reply(self, answers_before: int) -> None:
        """Wait until the host's answer to the last turn is over, or it plainly is not coming.

        An answer that called a function is not over: the host sends the output and asks again.
        """
        await self._wait_for_finished_answer(
            answers_before, self.script.timing.response_wait_ms, called_function=False
        )

    async def _wait_for_tool_call(self, answers_before: int, wait_ms: int) -> None:
        """Wait until an answer that called a function has finished: the host now runs it."""
        await self._wait_for_finished_answer(answers_before, wait_ms, called_function=True)

    async def _wait_for_finished_answer(
        self, answers_before: int, wait_ms: int, *, called_function: bool
    ) -> None:
        """Wait for answers to start and finish until one finishes that did (or did not) call a
        function, or none starts within `wait_ms`."""
        started = answers_before
        while await self._wait_for_answer(started, wait_ms):
            started = self._answers_started
            await self._wait_until(self._answers_all_finished(started), None)
            latest = self._latest_answer
            if (latest is not None and latest.has_called_function) == called_function:
                return

    async def _wait_for_answer(self, answers_before: int, timeout_ms: int) -> bool:
        """Wait for a new answer to start; answers whether one did within `timeout_ms`."""
        return await self._wait_until(lambda: self._answers_started > answers_before, timeout_ms)

    def _answers_all_finished(self, count: int) -> Callable[[], bool]:
        return lambda: self._answers_finished >= count

    async def _speak(self, words: str) -> int:
        """One user turn over server VAD; answers how many answers had started at its transcript.
        With turn detection off (a held line) nothing is detected: the speech only fills the
        input buffer, until the host commits or clears it."""
        timing = self.script.timing
        if self._turn_detection() is None:
            await asyncio.sleep(timing.speech_ms / 1000)
            self._input_audio_bytes += timing.speech_ms * PCM16_BYTES_PER_MS
            return self._answers_started
        item_id = self._mint("item")
        start_ms = self._audio_clock_ms()
        self._emit(
            {
                "type": "input_audio_buffer.speech_started",
                "item_id": item_id,
                "audio_start_ms": start_ms,
            }
        )
        self._hear_barge_in()
        await asyncio.sleep(timing.speech_ms / 1000)
        self._emit(
            {
                "type": "input_audio_buffer.speech_stopped",
                "item_id": item_id,
                "audio_end_ms": start_ms + timing.speech_ms,
            }
        )
        item = self._commit_user_audio(item_id)
        if self._input_transcription() is not None:
            await self._transcribe(item, words, timing.speech_ms)
        answers_at_transcript = self._answers_started
        turn_detection = self._turn_detection()
        if turn_detection and turn_detection.get("create_response", True):
            self._create_response({}, client_event_id=None)
        return answers_at_transcript

    async def _stay_silent(self) -> None:
        """Nothing is said: with an idle timeout configured, once it has passed the provider
        commits the silent audio and reports the timeout."""
        detection = self._turn_detection() or {}
        timeout_ms = detection.get("idle_timeout_ms")
        if not isinstance(timeout_ms, int):
            return
        start_ms = self._audio_clock_ms()
        await asyncio.sleep(timeout_ms / 1000)
        item_id = self._mint("item")
        self._emit(
            {
                "type": "input_audio_buffer.timeout_triggered",
                "item_id": item_id,
                "audio_start_ms": start_ms,
                "audio_end_ms": start_ms + timeout_ms,
            }
        )
        self._commit_user_audio(item_id)

    def _commit_user_audio(self, item_id: str) -> dict[str, Any]:
        item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        previous = self.conversation.append(item)
        self._emit(
            {
                "type": "input_audio_buffer.committed",
                "item_id": item_id,
                "previous_item_id": previous,
            }
        )
        self._emit({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        self._emit({"type": "conversation.item.done", "previous_item_id": previous, "item": item})
        return item

    async def _transcribe(self, item: dict[str, Any], words: str, speech_ms: int) -> None:
        timing = self.script.timing
        for delta in _chunks(words, timing.chars_per_delta):
            await asyncio.sleep(timing.delta_interval_ms / 1000)
            self._emit(
                {
                    "type": "conversation.item.input_audio_transcription.delta",
                    "item_id": item["id"],
                    "content_index": 0,
                    "delta": delta,
                }
            )
        item["content"][0]["transcript"] = words
        audio_tokens = max(1, speech_ms // AUDIO_MS_PER_TOKEN)
        text_tokens = estimate_tokens(len(words))
        self._emit(
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item["id"],
                "content_index": 0,
                "transcript": words,
                "usage": {
                    "type": "tokens",
                    "total_tokens": audio_tokens + text_tokens,
                    "input_tokens": audio_tokens,
                    "input_token_details": {"text_tokens": 0, "audio_tokens": audio_tokens},
                    "output_tokens": text_tokens,
                },
            }
        )

    def _hear_barge_in(self) -> None:
        answering = self._answering
        turn_detection = self._turn_detection()
        if answering is None or answering.stop_reason is not None or not turn_detection:
            return
        if turn_detection.get("interrupt_response", True):
            answering.cancel("turn_detected")

    def _audio_clock_ms(self) -> int:
        attached_at = self.log.attached_at or time.time()
        return int((time.time() - attached_at) * 1000)

    def _turn_detection(self) -> dict[str, Any] | None:
        detection: dict[str, Any] | None = self.session["audio"]["input"].get("turn_detection")
        return detection

    def _input_transcription(self) -> dict[str, Any] | None:
        transcription: dict[str, Any] | None = self.session["audio"]["input"].get("transcription")
        return transcription

    # ── client events ───────────────────────────────────────────────────────────

    def _receive(self, message: str | bytes) -> None:
        received_at = time.time()
        try:
            control = json.loads(message)
        except ValueError:
            self.log.controls.append({"t": received_at, "control": None, "raw": _as_text(message)})
            self._record_error("client frame is not JSON")
            if self._recording is None:
                self._refuse(
                    None,
                    Refusal("invalid_json", "The server could not parse the event: invalid JSON."),
                )
            return
        self.log.controls.append({"t": received_at, "control": control})
        if not isinstance(control, dict):
            self._record_error("client frame is not a JSON object")
            if self._recording is None:
                self._refuse(None, Refusal("invalid_event", "The event must be a JSON object."))
            return
        problems = wire_problems(control, direction="client")
        if problems:
            self._record_error(
                f"client {control.get('type')} {control.get('event_id')}: " + "; ".join(map(str, problems))
            )
        if self._recording is not None:
            # A playback answers nothing; it counts what the host sent, which it may wait on.
            self._host.count(control)
            self._notify()
            return
        if self.has_ended:
            return
        try:
            self._refuse_malformed(control, problems)
            self._dispatch(control)
        except Refusal as refusal:
            self._refuse(control.get("event_id"), refusal)
        except Exception as exc:  # a simulator bug must not cost the host its sideband
            logger.exception("simulated call %s failed on %s", self.call_id, control.get("type"))
            self._record_error(f"internal: {exc!r} handling {control.get('type')}")
            self._emit(
                {
                    "type": "error",
                    "error": {
                        "type": "server_error",
                        "code": None,
                        "message": "The server had an error.",
                        "param": None,
                        "event_id": control.get("event_id"),
                    },
                }
            )

    def _refuse_malformed(self, control: dict[str, Any], problems: list[Any]) -> None:
        kind = control.get("type")
        if kind is None:
            raise Refusal("invalid_event", "The 'type' field is missing.")
        if kind not in CLIENT_EVENT_TYPES:
            supported = ", ".join(f"'{name}'" for name in CLIENT_EVENT_TYPES)
            raise Refusal(
                "invalid_value",
                f"Invalid value: '{kind}'. Supported values are: {supported}.",
                "type",
            )
        if not problems:
            return
        first = problems[0]
        # A union field's path names the member type it was read as (`session.RealtimeSession…`):
        # the service names only the fields.
        param = ".".join(part for part in first.path.removeprefix("$.").split(".") if not part[:1].isupper())
        if first.kind == "unknown":
            raise Refusal("unknown_parameter", f"Unknown parameter: '{param}'.", param)
        if first.kind == "missing":
            raise Refusal("missing_required_parameter", f"Missing required parameter: '{param}'.", param)
        raise Refusal("invalid_value", f"Invalid value for '{param}': {first.message}.", param)

    def _refuse(self, client_event_id: str | None, refusal: Refusal) -> None:
        self._emit(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "code": refusal.code,
                    "message": refusal.message,
                    "param": refusal.param,
                    "event_id": client_event_id,
                },
            }
        )

    def _dispatch(self, control: dict[str, Any]) -> None:
        kind = control["type"]
        event_id = control.get("event_id")
        if kind == "session.update":
            updated = merge_session(self.session, control["session"])
            _refuse_model(realtime_session_refusal(updated), "session.")
            self.session = updated
            self._emit({"type": "session.updated", "session": self.session})
        elif kind == "response.create":
            self._create_response(control.get("response") or {}, client_event_id=event_id)
        elif kind == "response.cancel":
            self._cancel_response(control.get("response_id"))
        elif kind == "conversation.item.create":
            self._add_item(control["item"], control.get("previous_item_id"))
        elif kind == "conversation.item.delete":
            self.conversation.delete(control["item_id"])
            self._emit({"type": "conversation.item.deleted", "item_id": control["item_id"]})
        elif kind == "conversation.item.truncate":
            self._truncate(control["item_id"], control["content_index"], control["audio_end_ms"])
        elif kind == "conversation.item.retrieve":
            self._retrieve(control["item_id"])
        elif kind == "output_audio_buffer.clear":
            self._clear_output_audio()
        else:
            self._handle_input_audio(kind, control)

    def _add_item(self, requested: dict[str, Any], previous_item_id: str | None) -> None:
        item = {"id": self._mint("item"), "object": "realtime.item", "status": "completed"}
        item.update(copy.deepcopy(requested))
        if self.conversation.find(item["id"]) is not None:
            raise Refusal(
                "item_create_duplicate_id",
                f"Error adding item: an item with id '{item['id']}' already exists.",
                "item.id",
            )
        previous = self.conversation.insert(item, previous_item_id)
        self._emit({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        self._emit({"type": "conversation.item.done", "previous_item_id": previous, "item": item})

    def _truncate(self, item_id: str, content_index: int, audio_end_ms: int) -> None:
        self.conversation.truncate(item_id, content_index, audio_end_ms)
        self._emit(
            {
                "type": "conversation.item.truncated",
                "item_id": item_id,
                "content_index": content_index,
                "audio_end_ms": audio_end_ms,
            }
        )

    def _retrieve(self, item_id: str) -> None:
        item = self.conversation.find(item_id)
        if item is None:
            raise Refusal(
                "item_retrieve_invalid_item_id",
                f"Error retrieving item: the item with id '{item_id}' does not exist.",
                "item_id",
            )
        self._emit({"type": "conversation.item.retrieved", "item": item})

    def _handle_input_audio(self, kind: str, control: dict[str, Any]) -> None:
        if kind == "input_audio_buffer.append":
            self._input_audio_bytes += len(control["audio"]) * 3 // 4
        elif kind == "input_audio_buffer.clear":
            self._input_audio_bytes = 0
            self._emit({"type": "input_audio_buffer.cleared"})
        elif self._input_audio_bytes == 0:
            raise Refusal(
                "input_audio_buffer_commit_empty",
                "Error committing input audio buffer: buffer too small. Expected at least 100ms "
                "of audio, but buffer only has 0.00ms of audio.",
            )
        else:
            self._input_audio_bytes = 0
            self._commit_user_audio(self._mint("item"))

    def _clear_output_audio(self) -> None:
        playing = self._playing
        if playing is None:
            raise Refusal(
                "output_audio_buffer_not_playing",
                "Cannot clear the output audio buffer: no audio is playing.",
            )
        self._stop_playing(playing, "output_audio_buffer.cleared")

    def _stop_playing(self, response: ModelResponse, how: str) -> None:
        if self._playing is response:
            self._playing = None
            if self._drain is not None:
                self._drain.cancel()
                self._drain = None
            self._emit({"type": how, "response_id": response.id})

    # ── responses ───────────────────────────────────────────────────────────────

    @property
    def _latest_answer(self) -> ModelResponse | None:
        answers = [r for r in self._responses.values() if r.is_in_conversation and r.is_finished]
        return answers[-1] if answers else None

    def _create_response(self, asked: dict[str, Any], *, client_event_id: str | None) -> None:
        is_in_conversation = asked.get("conversation", "auto") != "none"
        if is_in_conversation and self._answering is not None:
            raise Refusal(
                "conversation_already_has_active_response",
                f"Conversation already has an active response in progress: {self._answering.id}. "
                "Wait until the response is finished before creating a new one.",
            )
        _refuse_model(response_refusal(self.session.get("model"), asked), "response.")
        entry = self._next_entry(is_in_conversation)
        modalities = list(asked.get("output_modalities") or self.session["output_modalities"])
        if modalities == ["text"] and isinstance(entry, ModelSays):
            entry = ModelWrites(text=entry.say, preamble=entry.preamble)
        if isinstance(entry, ModelWrites):
            modalities = ["text"]
        instructions = asked.get("instructions", self.session.get("instructions") or "")
        output_voice = (asked.get("audio") or {}).get("output") or {}
        response = ModelResponse(
            id=self._mint("resp"),
            entry=entry,
            is_in_conversation=is_in_conversation,
            modalities=modalities,
            max_output_tokens=asked.get("max_output_tokens", self.session["max_output_tokens"]),
            voice=output_voice.get("voice") or self.session["audio"]["output"]["voice"],
            metadata=asked.get("metadata"),
            input_tokens=estimate_tokens(self._context_chars(asked) + len(instructions)),
            preamble=entry.preamble if is_reasoning_model(self.session.get("model")) else None,
        )
        self._responses[response.id] = response
        if is_in_conversation:
            self._answering = response
            self._answers_started += 1
        else:
            self._out_of_band_started += 1
        self._notify()
        self._emit({"type": "response.created", "response": self._describe(response, "in_progress")})
        self._spawn(self._stream(response))

    def _next_entry(self, is_in_conversation: bool) -> ModelEntry:
        if is_in_conversation:
            return next(self._model_turns, ModelSays(say=FALLBACK_ANSWER))
        recent = " ".join(item_text(item) for item in self.conversation.items[-6:])
        summary = ModelWrites(text=f"Summary: {recent or 'nothing has been said yet.'}"[:400])
        return next(self._out_of_band_turns, summary)

    def _context_chars(self, asked: dict[str, Any]) -> int:
        if "input" not in asked:
            return self.conversation.chars()
        total = 0
        for entry in asked["input"]:
            item = entry
            if entry.get("type") == "item_reference":
                item = self.conversation.find(entry.get("id", "")) or {}
            total += len(item_text(item))
        return total

    def _cancel_response(self, response_id: str | None) -> None:
        response = self._responses.get(response_id) if response_id else self._answering
        if response is None or response.is_finished or response.stop_reason is not None:
            raise Refusal("response_cancel_not_active", "Cancellation failed: no active response found")
        response.cancel("client_cancelled")

    async def _think(self, response: ModelResponse) -> bool:
        """Wait the script's first-audio delay; answers whether the response was told to stop
        meanwhile (then it says nothing)."""
        delay_ms = self.script.timing.first_audio_ms
        if delay_ms == 0:
            return response.stop.is_set()
        try:
            await asyncio.wait_for(response.stop.wait(), delay_ms / 1000)
        except TimeoutError:
            return False
        return True

    async def _pause(self, response: ModelResponse) -> bool:
        """Wait one delta interval; answers whether the response was told to stop meanwhile."""
        if response.stop.is_set():
            return True
        try:
            await asyncio.wait_for(response.stop.wait(), self.script.timing.delta_interval_ms / 1000)
        except TimeoutError:
            return False
        return True

    async def _stream(self, response: ModelResponse) -> None:
        self._emit({"type": "rate_limits.updated", "rate_limits": RATE_LIMITS})
        if response.preamble is not None:
            await self._stream_message(response, response.preamble)
        # A preamble cut short (a barge-in, a cancel, the output budget) ends the response there.
        if all(item["status"] == "completed" for item in response.output):
            if isinstance(response.entry, ModelCalls):
                await self._stream_function_call(response, response.entry)
            elif isinstance(response.entry, ModelCallsInParallel):
                for call in response.entry.function_calls:
                    await self._stream_function_call(response, ModelCalls(function_call=call))
            else:
                await self._stream_message(response, model_text(response.entry))
        self._finish(response)

    def _add_output_item(self, response: ModelResponse, item: dict[str, Any]) -> tuple[int, str | None]:
        """Begin an output item: answer its output_index and the conversation item before it."""
        output_index = response.items_started
        response.items_started += 1
        self._emit(
            {
                "type": "response.output_item.added",
                "response_id": response.id,
                "output_index": output_index,
                "item": item,
            }
        )
        if not response.is_in_conversation:
            return output_index, None
        previous = self.conversation.append(item)
        self._emit({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        return output_index, previous

    def _complete_output_item(
        self, response: ModelResponse, item: dict[str, Any], output_index: int, previous: str | None
    ) -> None:
        response.output.append(item)
        self._emit(
            {
                "type": "response.output_item.done",
                "response_id": response.id,
                "output_index": output_index,
                "item": item,
            }
        )
        if response.is_in_conversation:
            self._emit({"type": "conversation.item.done", "previous_item_id": previous, "item": item})

    async def _stream_message(self, response: ModelResponse, text: str) -> None:
        item: dict[str, Any] = {
            "id": self._mint("item"),
            "object": "realtime.item",
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        output_index, previous = self._add_output_item(response, item)
        where = {
            "response_id": response.id,
            "item_id": item["id"],
            "output_index": output_index,
            "content_index": 0,
        }
        part_type, key = ("audio", "transcript") if response.is_audio else ("text", "text")
        self._emit({"type": "response.content_part.added", **where, "part": {"type": part_type, key: ""}})
        # The model thinks before the response's first audio (a later message plays on from it);
        # a response stopped meanwhile never starts playing: it says nothing.
        if response.is_audio and response.audio_started_at is None and not await self._think(response):
            self._start_playing(response)
        full_text = self._within_token_budget(response, text)
        delta_type = (
            "response.output_audio_transcript.delta" if response.is_audio else "response.output_text.delta"
        )
        said = ""
        for delta in _chunks(full_text, self.script.timing.chars_per_delta):
            if await self._pause(response):
                break
            said += delta
            self._emit({"type": delta_type, **where, "delta": delta})
            if response.is_audio and item["id"] not in self.conversation.truncated:
                # The audio generated so far is in the conversation already: a client may cut
                # it (barge-in) before the response is done.
                item["content"] = [{"type": "output_audio", "transcript": said}]
                self.conversation.audio_ms[item["id"]] = (
                    len(said.split()) * self.script.timing.audio_ms_per_word
                )
            if response.is_audio and self.script.emit_audio_deltas:
                self._emit({"type": "response.output_audio.delta", **where, "delta": SILENT_AUDIO_DELTA})
        if response.is_audio:
            self._emit({"type": "response.output_audio.done", **where})
            self._emit({"type": "response.output_audio_transcript.done", **where, "transcript": said})
        else:
            self._emit({"type": "response.output_text.done", **where, "text": said})
        self._emit({"type": "response.content_part.done", **where, "part": {"type": part_type, key: said}})
        content_type = "output_audio" if response.is_audio else "output_text"
        if item["id"] not in self.conversation.truncated:
            item["content"] = [{"type": content_type, key: said}]
            if response.is_audio:
                self.conversation.audio_ms[item["id"]] = (
                    len(said.split()) * self.script.timing.audio_ms_per_word
                )
        item["status"] = "completed" if said == text else "incomplete"
        self._complete_output_item(response, item, output_index, previous)

    async def _stream_function_call(self, response: ModelResponse, entry: ModelCalls) -> None:
        arguments = json.dumps(entry.function_call.arguments)
        item: dict[str, Any] = {
            "id": self._mint("item"),
            "object": "realtime.item",
            "type": "function_call",
            "status": "in_progress",
            "name": entry.function_call.name,
            "call_id": self._mint("call"),
            "arguments": "",
        }
        output_index, previous = self._add_output_item(response, item)
        where = {
            "response_id": response.id,
            "item_id": item["id"],
            "output_index": output_index,
            "call_id": item["call_id"],
        }
        written = ""
        for delta in _chunks(arguments, self.script.timing.chars_per_delta):
            if await self._pause(response):
                break
            written += delta
            self._emit({"type": "response.function_call_arguments.delta", **where, "delta": delta})
        item["arguments"] = written
        if written == arguments:
            self._emit(
                {
                    "type": "response.function_call_arguments.done",
                    **where,
                    "name": item["name"],
                    "arguments": arguments,
                }
            )
            item["status"] = "completed"
            response.has_called_function = True
        else:
            item["status"] = "incomplete"
        self._complete_output_item(response, item, output_index, previous)

    def _within_token_budget(self, response: ModelResponse, text: str) -> str:
        budget = response.max_output_tokens
        if budget == "inf" or estimate_tokens(len(text)) <= budget:
            return text
        return text[: budget * CHARS_PER_TOKEN]

    def _finish(self, response: ModelResponse) -> None:
        response.is_finished = True
        if self._answering is response:
            self._answering = None
        spoken = " ".join(item_text(item) for item in response.output)
        status, details = self._outcome(response)
        self._emit(
            {
                "type": "response.done",
                "response": self._describe(response, status, details, self._usage(response, spoken)),
            }
        )
        if response.is_in_conversation:
            self._answers_finished += 1
            self._notify()
        if not response.is_audio:
            return
        if response.stop_reason is None:
            self._stop_playing(response, "output_audio_buffer.stopped")
        elif response.stop_reason == "turn_detected":
            self._interrupt_playback(response)
        else:
            self._drain = self._spawn(self._drain_playback(response))

    def _outcome(self, response: ModelResponse) -> tuple[str, dict[str, Any] | None]:
        if response.stop_reason is not None:
            return "cancelled", {"type": "cancelled", "reason": response.stop_reason}
        if any(item["status"] == "incomplete" for item in response.output):
            return "incomplete", {"type": "incomplete", "reason": "max_output_tokens"}
        return "completed", None

    def _start_playing(self, response: ModelResponse) -> None:
        if self._playing is not None:
            self._stop_playing(self._playing, "output_audio_buffer.cleared")
        self._playing = response
        response.audio_started_at = time.time()
        self._emit({"type": "output_audio_buffer.started", "response_id": response.id})

    def _interrupt_playback(self, response: ModelResponse) -> None:
        # The service cuts unplayed audio itself on a VAD barge-in over WebRTC/SIP (§4.2): in the
        # message being played, which need not be the first (a preamble plays before the answer,
        # §4.5), and in every message after it, whose audio was not played at all.
        self._stop_playing(response, "output_audio_buffer.cleared")
        messages = [item for item in response.output if item["type"] == "message"]
        if not messages or not self.script.emit_truncated_on_interrupt:
            return
        played_ms = int((time.time() - (response.audio_started_at or time.time())) * 1000)
        for item in messages:
            audio_ms = self.conversation.audio_ms.get(item["id"], 0)
            if played_ms >= audio_ms and item is not messages[-1]:
                played_ms -= audio_ms  # played whole before the cut
                continue
            audio_end_ms = min(played_ms, audio_ms)
            played_ms = 0
            if response.is_in_conversation:
                self.conversation.truncate(item["id"], 0, audio_end_ms)
            self._emit(
                {
                    "type": "conversation.item.truncated",
                    "item_id": item["id"],
                    "content_index": 0,
                    "audio_end_ms": audio_end_ms,
                }
            )

    async def _drain_playback(self, response: ModelResponse) -> None:
        # After a client cancel the buffered audio plays out unless the host clears it.
        await asyncio.sleep(self.script.timing.drain_ms / 1000)
        self._drain = None
        self._stop_playing(response, "output_audio_buffer.stopped")

    def _describe(
        self,
        response: ModelResponse,
        status: str,
        details: dict[str, Any] | None = None,
        usage: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return {
            "object": "realtime.response",
            "id": response.id,
            "status": status,
            "status_details": details,
            "output": response.output,
            "conversation_id": self._conversation_id if response.is_in_conversation else None,
            "output_modalities": response.modalities,
            "max_output_tokens": response.max_output_tokens,
            "audio": {
                "output": {
                    "format": self.session["audio"]["output"]["format"],
                    "voice": response.voice,
                }
            },
            "usage": usage,
            "metadata": response.metadata,
        }

    def _usage(self, response: ModelResponse, spoken: str) -> dict[str, Any]:
        text_tokens = estimate_tokens(len(spoken))
        audio_ms = len(spoken.split()) * self.script.timing.audio_ms_per_word
        audio_tokens = audio_ms // AUDIO_MS_PER_TOKEN if response.is_audio else 0
        output_tokens = text_tokens + audio_tokens
        return {
            "total_tokens": response.input_tokens + output_tokens,
            "input_tokens": response.input_tokens,
            "output_tokens": output_tokens,
            "input_token_details": {
                "cached_tokens": 0,
                "text_tokens": response.input_tokens,
                "audio_tokens": 0,
                "image_tokens": 0,
                "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0, "image_tokens": 0},
            },
            "output_token_details": {"text_tokens": text_tokens, "audio_tokens": audio_tokens},
        }


def _refuse_model(refusal: ModelRefusal | None, where: str) -> None:
    """Raise a model refusal as the service words it, its field named from `where` on."""
    if refusal is not None:
        raise Refusal(refusal.code, refusal.message, where + refusal.field)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _as_text(message: str | bytes) -> str:
    return message if isinstance(message, str) else message.decode("utf-8", "replace")
