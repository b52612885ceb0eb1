"""One simulated Live session: its sidebands, its caller, its model's speech, usage and close.

Everything the session says goes through `_emit`, which stamps the event id, checks the event
against the strict Live oracle and queues it; one writer task sends the queue in order to every
attached sideband and logs each event as it leaves. The session timeline (`start_ms`, `end_ms`,
`offset_ms`) is wall-clock milliseconds since the session started, so a script's timing is
both how fast the call goes and where its words sit on the timeline.

The model speaks one utterance at a time from a queue (acknowledgements, its own answers, and
the commentary the host appends); a caller who starts a line while it speaks cuts it short
(GPT-Live stops when talked over, §1.1) — which never cancels a delegation. A model told to
wait for the host (an outbound call, `simulator.live_outbound`) neither answers nor delegates
until the host first appends instructions or commentary; it then takes up the last line it
heard and left unanswered.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import json
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from simulator.call import IdMint
from simulator.live_oracle import client_event_types, live_wire_problems, oversized_append
from simulator.live_script import LiveCallerSays, LiveScript
from simulator.models import DEFAULT_LIVE_MODEL
from simulator.oracle import WireProblem
from simulator.playback import GATE_TIMEOUT_S, HostControls, play
from simulator.recording import Recording
from simulator.script import FALLBACK_ANSWER, CallerHangsUp, CallerPresses

logger = logging.getLogger(__name__)

Transport = Literal["webrtc", "sip"]
SessionStatus = Literal["ringing", "created", "active", "ended"]
CloseReason = Literal["close_requested", "expired", "content", "remote_hangup", "connection_lost"]
UtteranceKind = Literal["acknowledgement", "answer", "commentary"]

# Queued events still go out before a close ends the sideband, unless the host stops reading.
FLUSH_BEFORE_CLOSE_S = 5.0
# Reflected audio is mono PCM16LE at 24 kHz: 48 bytes a millisecond.
PCM16_BYTES_PER_MS = 48
# The Live context window (reported, third-party: 128k tokens, audio included).
CONTEXT_WINDOW_TOKENS = 128_000
CHARS_PER_TOKEN = 4
# A fixture is at most 30 s of audio (§4).
MAXIMUM_FIXTURE_MS = 30_000
# The simulated service sends at most this much reflected audio in one event: 200 ms.
MAXIMUM_AUDIO_CHUNK_MS = 200

APPEND_ACKNOWLEDGEMENTS = {
    "session.commentary.append": "session.commentary.appended",
    "session.thinking.append": "session.thinking.appended",
    "session.instructions.append": "session.instructions.appended",
}
# The appends that end a model's wait for the host: something to say, or how to go on.
# Thinking is silent progress on a delegation, so it does not.
HOST_TURN_APPENDS = ("session.instructions.append", "session.commentary.append")
# What a session resource holds of a startup config: the transport-only knobs (a SIP accept's
# `type`, a WebRTC session's idle policy) are not part of it.
RESOURCE_FIELDS = (
    "audio",
    "client",
    "delegation",
    "input",
    "instructions",
    "safety_identifier",
    "store",
    "triggers",
)


# The simulator's stand-in for the Decisions model a transcript trigger asks: the predicates it
# can answer, by name, and the words that make the answer "yes".
KNOWN_PREDICATES: dict[str, tuple[str, ...]] = {
    "do_not_call": (
        "don't call",
        "do not call",
        "stop calling",
        "never call",
        "take me off",
        "remove me",
        "no more calls",
    ),
}
DECISION_USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
    "output_tokens": 1,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 121,
}


class Refusal(Exception):
    """A client command the session refuses: sent back as a typed `error` event."""

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param


@dataclass
class LiveCallLog:
    """What happened on a Live session: every server event sent and client event received.

    `t` is `time.time()` as the event left or the command arrived; `sideband` numbers the
    sideband a command came on (1, 2, … in attach order). `errors` holds every strict-oracle
    violation in either direction and every internal failure: a clean session has none.
    """

    session_id: str
    transport: Transport
    status: SessionStatus = "created"
    config: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    controls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    attaches: list[dict[str, Any]] = field(default_factory=list)
    refused_attaches: int = 0
    closed_at: float | None = None
    close_reason: CloseReason | None = None
    close_code: int | None = None
    referred_to: str | None = None
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    accepts: list[float] = field(default_factory=list)
    rejected_with: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The log as the `GET /_sim/live/sessions/{id}` body."""
        return {
            "session_id": self.session_id,
            "transport": self.transport,
            "status": self.status,
            "config": copy.deepcopy(self.config),
            "events": list(self.events),
            "controls": list(self.controls),
            "errors": list(self.errors),
            "attaches": list(self.attaches),
            "refused_attaches": self.refused_attaches,
            "closed_at": self.closed_at,
            "close_reason": self.close_reason,
            "close_code": self.close_code,
            "referred_to": self.referred_to,
            "deliveries": list(self.deliveries),
            "accepts": list(self.accepts),
            "rejected_with": self.rejected_with,
        }

    def event_types(self) -> list[str]:
        """The types of the server events sent, in order."""
        return [entry["event"].get("type", "") for entry in self.events]

    def control_types(self) -> list[str | None]:
        """The types of the client events received, in order (None for a frame without one)."""
        return [_type_of(entry["control"]) for entry in self.controls]


@dataclass(eq=False)
class Utterance:
    """Something the model says: an acknowledgement, its own answer to a line, or commentary."""

    kind: UtteranceKind
    text: str
    delegation_id: str | None = None
    # The caller line it answers, if any (a delegating line is answered by its commentary).
    line: int | None = None
    said: str = ""
    is_cut: bool = False


@dataclass
class UnansweredLine:
    """A caller line the model heard while it waited for the host, to take up once it may."""

    index: int
    # Where the line's covering word starts, for a line the model delegates on.
    delegate_at_ms: int | None = None


@dataclass
class Delegation:
    """A delegation the model made, and what became of it."""

    id: str
    offset_ms: int
    line: int
    commentaries: int = 0


class LiveSession:
    """A Live session on the simulated provider, from creation (or ringing) to `session.closed`."""

    # Whether the session placed its phone call itself (see simulator.live_outbound).
    is_outbound = False

    def __init__(
        self,
        session_id: str,
        *,
        transport: Transport,
        script: LiveScript,
        mint: IdMint,
        config: dict[str, Any] | None = None,
        strict: bool = True,
        recording: Recording | None = None,
        speed: float = 1.0,
        closed_loop: bool = True,
        gate_timeout_s: float = GATE_TIMEOUT_S,
    ) -> None:
        self.session_id = session_id
        self.transport = transport
        self.script = script
        self.log = LiveCallLog(session_id, transport, status="ringing" if transport == "sip" else "created")
        self.log.config = copy.deepcopy(config or {})
        self._mint = mint
        self._strict = strict
        # A playback sends the recording's events at their offsets and answers no command.
        self._recording = recording
        self._speed = speed
        self._closed_loop = closed_loop
        self._gate_timeout_s = gate_timeout_s
        self._host = HostControls()
        self._sockets: dict[ServerConnection, int] = {}
        self._graceful: dict[ServerConnection, bool] = {}
        self._outbox: asyncio.Queue[dict[str, Any] | str] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._acknowledgements: set[asyncio.Task[None]] = set()
        self._speech: asyncio.Queue[Utterance] = asyncio.Queue()
        self._speaking: Utterance | None = None
        self._cut = asyncio.Event()
        self._changed = asyncio.Event()
        self._delegations: dict[str, Delegation] = {}
        self._answered_lines: set[int] = set()
        self._utterances_started = 0
        self._model_answers = iter(script.model)
        self._is_muted = False
        self._fixture_playing = False
        self._transcribed_chars = 0
        self._started_at = time.time()
        self._expires_at = int(self._started_at) + script.session_lifetime_s
        self._has_begun = False
        # Whether the model says nothing until the host first appends (an outbound call sets it),
        # and the line it heard meanwhile and has still to answer.
        self._holds_for_host = False
        self._unanswered: UnansweredLine | None = None
        # A fault: sideband handshakes for this session are refused (see the provider's drop).
        self.refuses_sideband = False

    # ── the session ─────────────────────────────────────────────────────────────

    @property
    def has_ended(self) -> bool:
        return self.log.status == "ended"

    @property
    def is_ringing(self) -> bool:
        return self.log.status == "ringing"

    @property
    def has_sideband(self) -> bool:
        return bool(self._sockets)

    @property
    def delegation_type(self) -> str:
        delegation = self.log.config.get("delegation") or {"type": "client"}
        return str(delegation.get("type", "client"))

    def start(self) -> None:
        """Begin the session's own clock: it expires `session_lifetime_s` from now."""
        self._started_at = time.time()
        self._expires_at = int(self._started_at) + self.script.session_lifetime_s
        self._spawn(self._expire())

    def accept(self, config: dict[str, Any]) -> None:
        """Answer a ringing SIP session with this startup config (a SIP accept's `session`)."""
        self.log.config = {key: value for key, value in config.items() if key != "type"}
        self.log.accepts.append(time.time())
        self.log.status = "created"
        self.start()

    def resource(self) -> dict[str, Any]:
        """The session as a `SessionResource`: its id, expiry, model and resolved config."""
        config = self.log.config
        resource: dict[str, Any] = {
            "id": self.session_id,
            "expires_at": self._expires_at,
            "model": config.get("model", DEFAULT_LIVE_MODEL),
            "status": "active",
        }
        resource.update({key: copy.deepcopy(config[key]) for key in RESOURCE_FIELDS if key in config})
        if resource.get("delegation") is None:
            resource["delegation"] = {"type": "client"}
        resource.setdefault("audio", {"output": {"voice": "marin"}})
        return resource

    def timeline_ms(self) -> int:
        """Milliseconds since the session started: where things happen on its timeline."""
        return max(0, int((time.time() - self._started_at) * 1000))

    async def close(self, reason: CloseReason, client_event_id: str | None = None) -> None:
        """End the session: say `session.closed` with the final usage, flush, close the sidebands
        (with the closing handshake when the sideband asked for `graceful_close`)."""
        if self.has_ended:
            return
        closed = {
            "type": "session.closed",
            "reason": reason,
            "session": self.resource(),
            "usage": self._usage(),
            **self._echo(client_event_id),
        }
        self._emit(closed)
        self.log.status = "ended"
        self.log.close_reason = reason
        current = asyncio.current_task()
        for task in [*self._tasks, *self._acknowledgements]:
            if task is not current:
                task.cancel()
        if self._sockets:
            try:
                await asyncio.wait_for(self._outbox.join(), FLUSH_BEFORE_CLOSE_S)
            except TimeoutError:
                self._record_error(f"close: {self._outbox.qsize()} events never left")
        # Logged before the close, so a host that sees the close sees a complete log.
        self.log.closed_at = time.time()
        for socket in list(self._sockets):
            await self._let_go(socket)
        if self._writer is not None:
            self._writer.cancel()

    async def end_unanswered(self) -> None:
        """End a ringing SIP session that was rejected or never answered: no sideband had it."""
        self.log.status = "ended"
        self.log.closed_at = time.time()
        for task in self._tasks:
            task.cancel()

    async def _let_go(self, socket: ServerConnection) -> None:
        graceful = self._graceful.pop(socket, False)
        self._sockets.pop(socket, None)
        if graceful:
            self.log.close_code = 1000
            await socket.close(1000, "session closed")
        else:
            # Without graceful_close the service just drops the connection (§2.3): no handshake.
            self.log.close_code = 1006
            socket.transport.abort()

    async def drop_sideband(self, code: int = 1011) -> None:
        """Close every sideband as a network fault would; the session goes on (no replay later)."""
        for socket in list(self._sockets):
            self._sockets.pop(socket, None)
            self._graceful.pop(socket, None)
            await socket.close(code, "dropped by the simulator")

    def inject_raw(self, frames: list[str]) -> None:
        """Send these frames verbatim, in order with the session's own events (a fault)."""
        for frame in frames:
            self._outbox.put_nowait(frame)

    # ── sidebands ───────────────────────────────────────────────────────────────

    async def serve_sideband(self, socket: ServerConnection, *, graceful_close: bool) -> None:
        """Observe and steer the session over this socket until it closes. Attaching creates
        nothing and replays nothing; the caller starts talking on the first attach."""
        number = len(self.log.attaches) + 1
        if self.script.switches.single_sideband and self._sockets:
            # Two handshakes raced past the check: the later one is let go at once.
            self.log.refused_attaches += 1
            await socket.close(1008, "a sideband is already attached")
            return
        self._sockets[socket] = number
        self._graceful[socket] = graceful_close
        self.log.attaches.append({"t": time.time(), "sideband": number, "graceful_close": graceful_close})
        self.log.status = "active"
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_events())
        if self.script.switches.session_started_on_attach:
            self._emit({"type": "session.started", "session": self.resource()})
        if not self._has_begun:
            self._has_begun = True
            self._begin()
        try:
            async for message in socket:
                self._receive(message, number)
        except ConnectionClosed:
            pass
        finally:
            # Closing a sideband lets go of the observer only, never of the session (§2.3).
            self._sockets.pop(socket, None)
            self._graceful.pop(socket, None)

    def _begin(self) -> None:
        """The call's own work, started on the first attach: a recording plays, or the model
        listens and the caller starts talking."""
        if self._recording is not None:
            self._spawn(self._play())
            return
        self._spawn(self._speak_model())
        self._spawn(self._report_usage())
        self._spawn(self._run_caller())

    async def _write_events(self) -> None:
        # One writer for the session, whichever sidebands are attached: wire order = emit order.
        while True:
            event = await self._outbox.get()
            try:
                text = event if isinstance(event, str) else json.dumps(event)
                if not isinstance(event, str) and self._sockets:
                    self.log.events.append({"t": time.time(), "event": event})
                for socket in list(self._sockets):
                    try:
                        await socket.send(text)
                    except ConnectionClosed:
                        pass
            finally:
                self._outbox.task_done()

    def _judge(self, said: str) -> None:
        """The Decisions a trigger asks of the caller's words (§1.4), once a line is said: the
        simulator's stand-in for the Decisions model answers a predicate it knows by name from
        the words (`KNOWN_PREDICATES`), and any other question "no"."""
        words = " ".join(said.lower().replace("\u2019", "'").split())
        for trigger in self.log.config.get("triggers") or ():
            if not isinstance(trigger, dict) or trigger.get("type") != "decisions":
                continue
            if trigger.get("event_type") != "session.input_transcript.delta":
                continue
            answers = []
            for question in (trigger.get("decisions") or {}).get("questions") or ():
                if question.get("type") != "predicate":
                    continue
                phrases = KNOWN_PREDICATES.get(str(question.get("name", "")), ())
                said_it = any(phrase in words for phrase in phrases)
                answers.append(
                    {
                        "type": "predicate",
                        "name": question.get("name"),
                        "probability": 0.97 if said_it else 0.02,
                    }
                )
            self._emit(
                {
                    "type": "decision.event",
                    "delegation_id": None,
                    "trigger_id": self._mint("trg"),
                    "source_event_type": "session.input_transcript.delta",
                    "event": {
                        "type": "decision.completed",
                        "decision": {"model": "gpt-5.5", "answers": answers, "usage": DECISION_USAGE},
                    },
                }
            )

    def _emit(self, event: dict[str, Any]) -> None:
        if not self._sockets or self.has_ended:
            return  # nobody observes: the service does not keep events for a later sideband
        event = copy.deepcopy(event)
        # Reflected audio carries no event id (§3.1); everything else gets a fresh one.
        if "event_id" not in event and event["type"] not in (
            "session.input_audio.append",
            "session.output_audio.delta",
        ):
            event = {"type": event["type"], "event_id": self._mint("event"), **event}
        if self._strict:
            problems = live_wire_problems(event, direction="server")
            if problems:
                message = f"server {event.get('type')} {event.get('event_id')}: " + "; ".join(
                    map(str, problems)
                )
                logger.error("simulator sent an invalid Live event: %s", message)
                self._record_error(message)
        self._outbox.put_nowait(event)

    def _echo(self, client_event_id: str | None) -> dict[str, Any]:
        if client_event_id is None or not self.script.switches.echo_client_event_id:
            return {}
        return {"client_event_id": client_event_id}

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
            logger.error("simulated Live session %s failed", self.session_id, exc_info=error)
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

    async def _wait_until(self, is_done: Callable[[], bool], timeout_ms: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while not is_done():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return is_done()
        return True

    # ── playback ────────────────────────────────────────────────────────────────

    async def _play(self) -> None:
        """Send the recording's events (closed loop unless told otherwise: simulator.playback),
        then end the session as the recording's close says: the events are the provider's, its
        `session.closed` among them, so nothing of the session's own is added."""
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
        await self._end_playback(code)

    async def _end_playback(self, code: int) -> None:
        if self._sockets:
            try:
                await asyncio.wait_for(self._outbox.join(), FLUSH_BEFORE_CLOSE_S)
            except TimeoutError:
                self._record_error(f"playback: {self._outbox.qsize()} events never left")
        self.log.status = "ended"
        self.log.closed_at = time.time()
        self.log.close_code = code
        for socket in list(self._sockets):
            self._sockets.pop(socket, None)
            self._graceful.pop(socket, None)
            await socket.close(code, "playback over")
        if self._writer is not None:
            self._writer.cancel()

    # ── the clock: usage and expiry ─────────────────────────────────────────────

    def _usage(self) -> dict[str, Any]:
        seconds = int(time.time() - self._started_at)
        if self.transport == "webrtc":
            # Eligible WebRTC sessions split the total; nothing pauses here.
            return {"seconds": seconds, "active_seconds": seconds, "paused_seconds": 0}
        return {"seconds": seconds}

    async def _report_usage(self) -> None:
        interval = self.script.switches.usage_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            instructions = len(str(self.log.config.get("instructions") or ""))
            tokens = (self._transcribed_chars + instructions) / CHARS_PER_TOKEN
            self._emit(
                {
                    "type": "session.usage.updated",
                    "usage": self._usage(),
                    "context_window": {"usage_ratio": round(tokens / CONTEXT_WINDOW_TOKENS, 6)},
                }
            )

    async def _expire(self) -> None:
        await asyncio.sleep(max(0.0, self._expires_at - time.time()))
        await self.close("expired")

    # ── the caller ──────────────────────────────────────────────────────────────

    async def _run_caller(self) -> None:
        wait_ms = self.script.timing.answer_wait_ms
        for index, step in enumerate(self.script.caller):
            if isinstance(step, LiveCallerSays) and step.barge_in:
                await self._wait_until(self._speaks_after(self._utterances_started), wait_ms)
            elif index > 0:
                await self._wait_until(self._has_answered(index - 1), wait_ms)
            await asyncio.sleep(step.after_ms / 1000)
            if isinstance(step, CallerHangsUp):
                await self.close("remote_hangup")
                return
            if isinstance(step, CallerPresses):
                self._press(step.dtmf)
                self._answered_lines.add(index)
            else:
                await self._say(index, step)

    def _speaks_after(self, utterances: int) -> Callable[[], bool]:
        return lambda: self._utterances_started > utterances

    def _has_answered(self, line: int) -> Callable[[], bool]:
        return lambda: line in self._answered_lines

    def _press(self, key: str) -> None:
        if self.transport != "sip":
            self._record_error(f"script: a keypress ({key}) on a {self.transport} session has no keypad")
            return
        self._emit({"type": "transport.dtmf.received", "event": key})

    async def _say(self, index: int, line: LiveCallerSays, *, answerable: bool = True) -> None:
        """One caller line, a fragment a word: reflected audio, then its transcript delta; a
        delegating line delegates at the start of its covering word (§1.5). The model answers
        the line unless it is not `answerable` (a machine's greeting) or the model waits for
        the host, who then finds it unanswered."""
        timing = self.script.timing
        lag_ms = self.script.switches.covering_fragment_lag_ms
        words = line.say.split()
        covering = line.delegate_at_word % len(words) if line.delegate and answerable else None
        covering_ms: int | None = None
        delegated = False
        self._cut_speech()
        for position, word in enumerate(words):
            start_ms = self.timeline_ms()
            self._reflect_input(timing.fragment_ms)
            await asyncio.sleep(timing.fragment_ms / 1000)
            if self._is_muted:
                continue  # the model hears silence: nothing is transcribed, nothing delegated
            text = word if position == 0 else f" {word}"
            delta = {
                "type": "session.input_transcript.delta",
                "delta": text,
                "start_ms": start_ms,
                "end_ms": start_ms + timing.fragment_ms,
            }
            self._transcribed_chars += len(text)
            redeliver_ms = self.script.switches.redeliver_caller_deltas_after_ms
            if redeliver_ms is not None:
                delta = {"type": delta["type"], "event_id": self._mint("event"), **delta}
                asyncio.get_running_loop().call_later(redeliver_ms / 1000, self._emit, delta)
            if position != covering:
                self._emit(delta)
                continue
            covering_ms = start_ms
            if self._holds_for_host:
                # A model told to wait does not delegate yet: the line keeps its offset.
                self._emit(delta)
                continue
            delegated = True
            if lag_ms >= 0:
                self._delegate(index, offset_ms=start_ms)
                await asyncio.sleep(lag_ms / 1000)
                self._emit(delta)
            else:
                self._emit(delta)
                await asyncio.sleep(-lag_ms / 1000)
                self._delegate(index, offset_ms=start_ms)
        if not self._is_muted:
            self._judge(line.say)
        if not answerable or self._is_muted or delegated:
            return
        if covering is not None and covering_ms is None:
            return  # its covering word went unheard (muted): there is nothing to delegate
        if self._holds_for_host:
            self._unanswered = UnansweredLine(index, covering_ms)
            return
        if covering_ms is not None:
            # Heard while the model waited for the host, who has spoken since.
            self._delegate(index, offset_ms=covering_ms)
            return
        await asyncio.sleep(timing.reply_after_ms / 1000)
        self._answer(index)

    def _answer(self, index: int) -> None:
        entry = next(self._model_answers, None)
        self._queue_speech(Utterance("answer", entry.say if entry else FALLBACK_ANSWER, line=index))

    def _release_hold(self) -> None:
        """The host has spoken: the model may talk, and first takes up the line it left waiting
        (the last one it heard: earlier ones the caller has already talked past)."""
        self._holds_for_host = False
        pending, self._unanswered = self._unanswered, None
        if pending is None or pending.index in self._answered_lines:
            return
        if pending.delegate_at_ms is not None:
            self._delegate(pending.index, offset_ms=pending.delegate_at_ms)
        else:
            self._answer(pending.index)

    def _reflect_input(self, duration_ms: int) -> None:
        if not self.script.switches.reflect_audio:
            return
        remaining = duration_ms
        while remaining > 0:
            chunk = min(remaining, MAXIMUM_AUDIO_CHUNK_MS)
            remaining -= chunk
            self._emit({"type": "session.input_audio.append", "audio": _silence(chunk)})

    def _delegate(self, line: int, *, offset_ms: int) -> None:
        delegation = Delegation(id=self._mint("item_delegation"), offset_ms=offset_ms, line=line)
        self._delegations[delegation.id] = delegation
        self._emit(
            {
                "type": "session.delegation.created",
                "offset_ms": offset_ms,
                "delegation": {"id": delegation.id, "type": "delegation", "target": "client"},
            }
        )
        if self.script.switches.automatic_acknowledgement:
            task = asyncio.create_task(self._acknowledge(delegation))
            self._acknowledgements.add(task)
            task.add_done_callback(self._acknowledgements.discard)

    async def _acknowledge(self, delegation: Delegation) -> None:
        delegation_config = self.log.config.get("delegation") or {}
        delay_ms = delegation_config.get("acknowledgement_delay_ms") or 0
        await asyncio.sleep(delay_ms / 1000)
        self._queue_speech(Utterance("acknowledgement", self.script.acknowledgement, delegation.id))

    def _cancel_acknowledgements(self) -> None:
        # "Any commentary or thinking appended to the session cancels all pending
        # acknowledgements, including those for other delegations."
        for task in list(self._acknowledgements):
            task.cancel()
        self._acknowledgements.clear()

    # ── the model's speech ──────────────────────────────────────────────────────

    def _queue_speech(self, utterance: Utterance) -> None:
        self._speech.put_nowait(utterance)

    def _cut_speech(self) -> None:
        if self._speaking is not None:
            self._cut.set()

    async def _speak_model(self) -> None:
        fragment_ms = self.script.timing.fragment_ms
        while True:
            utterance = await self._speech.get()
            self._speaking = utterance
            self._cut.clear()
            first_audio_ms = self.script.timing.first_audio_ms
            if first_audio_ms:
                try:
                    await asyncio.wait_for(self._cut.wait(), first_audio_ms / 1000)
                except TimeoutError:
                    pass
                else:
                    # Cut before its first word (the caller spoke): nothing of it is said.
                    self._speaking = None
                    self._notify()
                    continue
            self._utterances_started += 1
            self._notify()
            for position, word in enumerate(utterance.text.split()):
                while self._fixture_playing:
                    await asyncio.sleep(fragment_ms / 1000)
                start_ms = self.timeline_ms()
                text = word if position == 0 else f" {word}"
                self._emit(
                    {
                        "type": "session.output_transcript.delta",
                        "delta": text,
                        "start_ms": start_ms,
                        "end_ms": start_ms + fragment_ms,
                    }
                )
                if self.script.switches.reflect_audio:
                    self._emit(
                        {
                            "type": "session.output_audio.delta",
                            "delta": _silence(fragment_ms),
                            "start_ms": start_ms,
                            "end_ms": start_ms + fragment_ms,
                        }
                    )
                utterance.said += text
                self._transcribed_chars += len(text)
                self._model_said(text)
                try:
                    await asyncio.wait_for(self._cut.wait(), fragment_ms / 1000)
                except TimeoutError:
                    continue
                utterance.is_cut = True
                break
            self._speaking = None
            if utterance.line is not None and utterance.kind != "acknowledgement":
                self._answered_lines.add(utterance.line)
            self._notify()

    def _model_said(self, text: str) -> None:
        """Each transcript fragment the model says, as it says it (a voicemail records them)."""

    # ── client events ───────────────────────────────────────────────────────────

    def _receive(self, message: str | bytes, sideband: int) -> None:
        received_at = time.time()
        try:
            control = json.loads(message)
        except ValueError:
            text = message if isinstance(message, str) else message.decode("utf-8", "replace")
            self.log.controls.append({"t": received_at, "sideband": sideband, "control": None, "raw": text})
            self._record_error("client frame is not JSON")
            self._refuse(None, Refusal("invalid_json", "The server could not parse the event: invalid JSON."))
            return
        self.log.controls.append({"t": received_at, "sideband": sideband, "control": control})
        if not isinstance(control, dict):
            self._record_error("client frame is not a JSON object")
            self._refuse(None, Refusal("invalid_event", "The event must be a JSON object."))
            return
        client_event_id = control.get("event_id") if isinstance(control.get("event_id"), str) else None
        problems = live_wire_problems(control, direction="client")
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
            _refuse_malformed(control, problems)
            self._dispatch(control, client_event_id)
        except Refusal as refusal:
            self._refuse(client_event_id, refusal)
        except Exception as exc:  # a simulator bug must not cost the host its sideband
            logger.exception("simulated Live session %s failed on %s", self.session_id, control.get("type"))
            self._record_error(f"internal: {exc!r} handling {control.get('type')}")
            self._refuse(
                client_event_id, Refusal("server_error", "The server had an error."), kind="server_error"
            )

    def _refuse(
        self, client_event_id: str | None, refusal: Refusal, kind: str = "invalid_request_error"
    ) -> None:
        # An error names its command in error.client_event_id, always (§4).
        error: dict[str, Any] = {"type": kind, "code": refusal.code, "message": refusal.message}
        if refusal.param is not None:
            error["param"] = refusal.param
        if client_event_id is not None:
            error["client_event_id"] = client_event_id
        self._emit({"type": "error", "error": error})

    def _dispatch(self, control: dict[str, Any], client_event_id: str | None) -> None:
        kind = control["type"]
        echo = self._echo(client_event_id)
        if kind in APPEND_ACKNOWLEDGEMENTS:
            self._append(kind, control, echo)
        elif kind == "session.input_audio.mute":
            self._is_muted = True
            self._emit({"type": "session.input_audio.muted", **echo})
        elif kind == "session.input_audio.unmute":
            self._is_muted = False
            self._emit({"type": "session.input_audio.unmuted", **echo})
        elif kind == "session.update":
            self._update(control["session"], echo)
        elif kind == "session.output_audio.fixture.play":
            self._play_fixture(control["audio"], echo)
        elif kind == "transport.dtmf.send":
            if self.transport != "sip":
                raise Refusal("invalid_request", "DTMF can be sent on a SIP session only.", "type")
            self._emit({"type": "transport.dtmf.sent", "event": control["event"], **echo})
        elif kind in ("response.create", "response.item.create"):
            if self.delegation_type != "responses" and self.script.switches.reject_responses_in_client_mode:
                raise Refusal("invalid_request", f"{kind} requires Responses delegation.", "type")
        elif kind == "session.close":
            self._spawn(self.close("close_requested", client_event_id))
        else:
            # decision.create / decision.item.*: the simulator has no Decisions backend.
            raise Refusal("invalid_request", f"{kind} requires a Decisions configuration.", "type")

    def _append(self, kind: str, control: dict[str, Any], echo: dict[str, Any]) -> None:
        if self._fixture_playing:
            raise Refusal("fixture_playing", "Appends are rejected while an audio fixture plays.")
        content: str = control["content"]
        delegation_id = control["delegation_id"]
        delegation = self._delegations.get(delegation_id) if delegation_id is not None else None
        if delegation_id is not None and delegation is None:
            raise Refusal("invalid_value", f"Unknown delegation_id '{delegation_id}'.", "delegation_id")
        if kind != "session.instructions.append":
            self._cancel_acknowledgements()
        at_ms = self.timeline_ms()
        self._emit({"type": APPEND_ACKNOWLEDGEMENTS[kind], "start_ms": at_ms, "end_ms": at_ms, **echo})
        if self._holds_for_host and kind in HOST_TURN_APPENDS:
            self._release_hold()
        if kind == "session.commentary.append":
            line = None
            if delegation is not None:
                delegation.commentaries += 1
                line = delegation.line
            self._queue_speech(Utterance("commentary", content, delegation_id, line=line))

    def _update(self, update: dict[str, Any], echo: dict[str, Any]) -> None:
        if "delegation" in update:
            wanted = update["delegation"] or {"type": "client"}
            if wanted.get("type") != self.delegation_type:
                raise Refusal(
                    "immutable_field_update", "The delegation type cannot change.", "session.delegation.type"
                )
            current = dict(self.log.config.get("delegation") or {"type": "client"})
            current.update(wanted)
            self.log.config["delegation"] = current
        if "triggers" in update:
            self.log.config["triggers"] = update["triggers"]
        self._emit({"type": "session.updated", "session": self.resource(), **echo})

    def _play_fixture(self, audio: str, echo: dict[str, Any]) -> None:
        try:
            pcm = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            raise Refusal("invalid_audio", "audio must be base64.", "audio") from None
        if len(pcm) % 2:
            raise Refusal("invalid_audio", "PCM16 audio must have an even number of bytes.", "audio")
        duration_ms = len(pcm) // PCM16_BYTES_PER_MS
        if duration_ms > MAXIMUM_FIXTURE_MS:
            raise Refusal("invalid_audio", "A fixture is at most 30 seconds long.", "audio")
        self._fixture_playing = True
        self._cut_speech()
        self._emit({"type": "session.output_audio.fixture.playing", **echo})
        self._spawn(self._finish_fixture(duration_ms, echo))

    async def _finish_fixture(self, duration_ms: int, echo: dict[str, Any]) -> None:
        await asyncio.sleep(duration_ms / 1000)
        self._fixture_playing = False
        self._emit({"type": "session.output_audio.fixture.played", **echo})


def _refuse_malformed(control: dict[str, Any], problems: list[WireProblem]) -> None:
    kind = control.get("type")
    if kind is None:
        raise Refusal("invalid_event", "The 'type' field is missing.")
    if kind not in client_event_types():
        supported = ", ".join(f"'{name}'" for name in sorted(client_event_types()))
        raise Refusal("invalid_value", f"Invalid value: '{kind}'. Supported values are: {supported}.", "type")
    if not problems:
        return
    first = problems[0]
    param = first.path.removeprefix("$.")
    if first == oversized_append(control):
        # The oracle's 500-token bound, refused as the provider refuses an over-long string.
        raise Refusal("string_above_max_length", f"{first.message}.", param)
    if first.kind == "unknown":
        raise Refusal("unknown_parameter", f"Unknown parameter: '{param}'.", param)
    if first.kind == "missing":
        raise Refusal("missing_required_parameter", f"Missing required parameter: '{param}'.", param)
    raise Refusal("invalid_value", f"Invalid value for '{param}': {first.message}.", param)


def _silence(duration_ms: int) -> str:
    return base64.b64encode(bytes(duration_ms * PCM16_BYTES_PER_MS)).decode()


def _type_of(control: Any) -> str | None:
    kind = control.get("type") if isinstance(control, dict) else None
    return kind if isinstance(kind, str) else None
