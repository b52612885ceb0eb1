"""The gateway process: provider sidebands, the control queue, the API, liveness.

`Gateway` wires the parts together and owns the sidebands (`SidebandSocket`s) of the calls it
holds: each socket drives its provider's sans-I/O `Sideband`, chosen here once per socket, and
what that answers is carried out (durable events numbered into their session's log by the
`EventSink`, words to the watchers);
what the workers publish to this gateway's control queue is carried out without ever waiting
on one call (controls go to each socket's own writer, closes and hangups run as tasks of their
own); the API (`gateway.api`) and the heartbeat (`gateway.liveness`) run beside them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from starlette.responses import Response
from starlette.websockets import WebSocket

from gateway import tracing
from gateway.api import RERUNS_SAFELY, WEBHOOK_PATH, authenticated, build_api, json_bodies, storable_addresses
from gateway.controls import ControlConsumer
from gateway.idempotency import idempotent
from gateway.keys import KeyRing
from gateway.liveness import GatewayIdTaken, Heartbeat, takeover_warning
from gateway.metrics import GatewayMetrics
from gateway.phone import PhoneDoor, answer_call
from gateway.providers.live import LiveCallTrace, OpenAILive, live_provider_from
from gateway.providers.rest import ProviderCallError, ProviderRest
from gateway.rpc import WorkerRpc
from gateway.sideband import SIDEBAND_CLOSE_TIMEOUT_S, ActionCarrier, SidebandSocket
from gateway.sink import EventSink, NumberingBroker
from gateway.tracing import CallTrace
from gateway.watch import WatchHub
from gateway.web import HttpLimits, RunningServer, start_server
from pipeline import idempotency, watch_tokens
from pipeline.call.sideband import Sideband
from pipeline.config import Settings
from pipeline.envelope import (
    CloseCall,
    CollectDigits,
    OpenSideband,
    PlaceCall,
    Reply,
    SendControl,
    ToGateway,
    TransferCall,
    Trunk,
)
from pipeline.errors import ProviderUnavailable
from pipeline.limits import ADMISSION_TIMEOUT_MS
from pipeline.live.sideband import KEY_PRESS_TYPE as LIVE_KEY_PRESS
from pipeline.live.sideband import LiveSideband
from pipeline.names import control_queue
from pipeline.phone import MAXIMUM_SIP_HEADERS, kept_headers
from pipeline.privacy.boundary import Keypad, PrivateSideband, Redactor, Sealing
from pipeline.privacy.sealing import SealedValueUnreadable, new_session_key_pair, open_sealed
from pipeline.realtime.sideband import KEY_PRESS_TYPE as REALTIME_KEY_PRESS
from pipeline.realtime.sideband import RealtimeSideband
from pipeline.releases import across_releases, first_report
from pipeline.state import TERMINAL_PHASES, Provider
from pipeline.wire import SidebandClosed, SidebandConnected, TransferFinished, host_event

logger = logging.getLogger(__name__)

# A listener of a session this gateway holds no sideband for hears of its end by asking.
WATCH_STATUS_CHECK_S = 5.0
# A followed call log is read again at least this often (and at once after each batch of the
# session's controls that this gateway carries out).
LOG_FOLLOW_S = 2.0
LOG_READ_GAP_S = 0.2
# How often a draining gateway asks whether its calls have moved to a peer.
DRAIN_CHECK_S = 0.25
# How often a gateway puts the owners of unfinished sessions back in the liveness registry: a
# Redis that restarted empty lost it, and a gateway that died meanwhile would never be noticed.
OWNER_REGISTRATION_S = 30.0

_TERMINAL_STATUSES = frozenset(str(phase) for phase in TERMINAL_PHASES)


@dataclass(frozen=True)
class _Wing:
    """What the gateway holds of one provider: its REST, and the sans-I/O protocol each new
    sideband of its calls drives."""

    rest: ProviderRest
    new_sideband: Callable[[], Sideband]
    # The type of the wing's keypad presses, whose digits the privacy boundary masks.
    key_press_type: str
    # How its sidebands' spans read turns and responses off its events.
    call_trace: type[CallTrace]


class Gateway:
    def __init__(
        self,
        settings: Settings,
        redis_url: str,
        broker: NumberingBroker,
        provider: ProviderRest,
        http_limits: HttpLimits | None = None,
        live_provider: OpenAILive | None = None,
    ) -> None:
        self.settings = settings
        self.gateway_id = settings.gateway_id
        self.provider = provider
        # The Live API (GPT-Live), for sessions created with "provider": "live".
        self.live_provider = live_provider or live_provider_from(settings)
        self._redis_url = redis_url
        self._http_limits = http_limits or HttpLimits()
        self.sink = EventSink(redis_url, broker, self.gateway_id, settings.broker_namespace)
        self.rpc = WorkerRpc(self.sink, self.gateway_id)
        self.watchers = WatchHub()
        self._carry_out_actions = ActionCarrier(self.sink, self.watchers, self.count_heard)
        self.watch_secret = (
            settings.live_token_secret.encode()
            if settings.live_token_secret
            else watch_tokens.derive_secret(settings.api_token)
        )
        self.sockets: dict[str, SidebandSocket] = {}
        # A key pair of this process's own, made afresh at each start: a trunk's password comes
        # to it sealed to the public half (never in a directive, never readable in Redis), and
        # only this process's memory holds the private half.
        self._dial_private, self._dial_public = new_session_key_pair()
        self._stopping = threading.Event()
        # Set by drain(): no new calls (503 `draining`), /readyz answers 503.
        self.draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: RunningServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._consumer: ControlConsumer | None = None
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._log_followers: dict[str, asyncio.Task[None]] = {}
        self._log_pokes: dict[str, asyncio.Event] = {}
        self._log_reads: dict[str, asyncio.Lock] = {}
        self.phone_door = PhoneDoor(settings.webhook_secret)
        self.metrics = (
            GatewayMetrics(
                self.gateway_id, self._calls_in_progress_by_route, redis_url, settings.broker_namespace
            )
            if settings.metrics
            else None
        )
        self.keyring = KeyRing(settings.api_token, self.rpc)
        self.heartbeat = Heartbeat(redis_url, settings.broker_namespace, self.gateway_id, self._on_dead_peer)
        self.http_port = 0

    # ── lifecycle ──────────────────────────────────────────────────────────────────────

    async def start(self) -> None:
        """Serve. `GatewayIdTaken` when another gateway of the deployment runs under this id (its
        control queue and event numbering would be shared, each taking the other's)."""
        loop = self._loop = asyncio.get_running_loop()
        if await asyncio.to_thread(self.heartbeat.held_elsewhere):
            raise GatewayIdTaken(
                f"a gateway with id {self.gateway_id!r} is running in this deployment"
                f" ({self.settings.broker_namespace!r}): give this one another SWITCHBOARD_GATEWAY_ID"
            )
        # Keys are checked before routing, idempotency after: a key's requests own its keys.
        routes = idempotent(
            build_api(self),
            self.rpc,
            idempotency.fingerprint_key(self.watch_secret, self.settings.broker_namespace),
            excluded=frozenset({WEBHOOK_PATH}),
            reruns_safely=RERUNS_SAFELY,
        )
        # A path or query PostgreSQL cannot hold, and a body of a media type its route does not
        # take, are refused before an idempotency key stores them.
        app = authenticated(storable_addresses(json_bodies(routes)), self.keyring)
        self._http = await start_server(
            app,
            self.settings.gateway_host,
            self.settings.gateway_port,
            self._http_limits,
            on_handshake_refused=self.refused_handshake,
        )
        self.http_port = self._http.port
        self._consumer = ControlConsumer(
            self._redis_url,
            control_queue(self.settings.broker_namespace, self.gateway_id),
            loop,
            self._carry_out_taken,
        )
        self._consumer.start()
        # Alive before anything else: a takeover checks that its new owner is.
        await asyncio.to_thread(self.heartbeat.beat)
        self.heartbeat.start()
        # This gateway's id may have held sessions in a previous life: take them back.
        self._spawn(self._take_over(self.gateway_id), f"takeover-{self.gateway_id}")
        self._spawn(self._register_owners(), "owner-registration")

    def readiness(self) -> str | None:
        """Why this gateway should not be sent new calls now (None: it is ready)."""
        if self.draining:
            return "draining"
        if self._http is None or self._stopping.is_set():
            return "not_started"
        if not self.sink.reachable:
            return "redis_unreachable"
        return None

    async def drain(self, within_s: float) -> list[str]:
        """Stop taking new calls and hand the calls held here to peers, each while it is idle
        (between the caller's lines: an answer under way would be asked for again on the new
        sideband and heard twice). This gateway stays alive meanwhile, its sidebands open, so a
        call goes on here until it moves. What has not moved within `within_s` (no peer alive, or
        a call never idle) is left to the peers' takeover of a gateway that stopped: the liveness
        key goes, and a peer (or a gateway starting under this id) takes those calls over.
        Answers the sessions handed over that way."""
        self.draining = True
        logger.info("draining: handing %d calls to a peer", len(self.sockets))
        deadline = time.monotonic() + within_s
        moved: set[str] = set()
        # Calls that arrive meanwhile (a directive to open a sideband here) are handed over too.
        while held := [session_id for session_id in self.sockets if session_id not in moved]:
            if time.monotonic() >= deadline:
                break
            answers = await asyncio.gather(*(self._hand_over(session_id) for session_id in held))
            moved.update(session_id for session_id, went in zip(held, answers, strict=True) if went)
            if len(moved) < len(self.sockets):
                await asyncio.sleep(DRAIN_CHECK_S)
        await asyncio.to_thread(self.heartbeat.stop)
        if held:
            logger.warning(
                "drained for %.0f s: %d calls not handed to a peer (is one running?); the peers take "
                "them over as from a gateway that stopped",
                within_s,
                len(held),
            )
        return sorted(held)

    async def _hand_over(self, session_id: str) -> bool:
        """Ask a worker to move one call to a peer; whether it is moved (or over)."""
        status, answer = await self.rpc.call("hand_over_session", session_id=session_id, now=time.time())
        if status == 404:
            return True
        return bool(status == 200 and answer["moved"])

    async def stop(self) -> None:
        self._stopping.set()
        await asyncio.to_thread(self.heartbeat.stop)
        if self._http is not None:
            await self._http.stop()
        sockets = list(self.sockets.values())
        await asyncio.gather(*(socket.close() for socket in sockets), return_exceptions=True)
        # Each socket's task numbers its close into the log on its way out: the sink closes after.
        running = [socket.task for socket in sockets if socket.task is not None and not socket.task.done()]
        if running:
            await asyncio.wait(running, timeout=SIDEBAND_CLOSE_TIMEOUT_S)
        for task in list(self._tasks):
            task.cancel()
        if self._consumer is not None:
            await asyncio.to_thread(self._consumer.stop)
        self.sink.close()
        await self.provider.close()
        await self.live_provider.close()

    def spawn_task(self, work: Any, name: str) -> None:
        """Run `work` as a task of the gateway's (cancelled when it stops)."""
        self._spawn(work, name)

    def _spawn(self, work: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ── takeover of dead peers ─────────────────────────────────────────────────────────

    def _on_dead_peer(self, dead_gateway: str) -> None:
        """Called on the heartbeat thread: the takeover runs on the event loop."""
        if self._loop is not None and not self._stopping.is_set():
            self._loop.call_soon_threadsafe(
                self._spawn, self._take_over(dead_gateway), f"takeover-{dead_gateway}"
            )

    async def _take_over(self, dead_gateway: str) -> None:
        """Ask a worker to hand the dead gateway's unfinished sessions to this one (each is
        moved by a message of its own, which checks under the session's lock that the old
        owner is really dead and this gateway really alive)."""
        status, body = await self.rpc.call("take_over", dead_gateway=dead_gateway, now=time.time())
        if status != 200:
            logger.warning("takeover of %s's sessions failed: %s %s", dead_gateway, status, body)
            return
        sessions = body["sessions"]
        note = takeover_warning(dead_gateway, len(sessions))
        if note is not None:
            logger.warning(note)
        else:
            logger.debug("no sessions of gateway %s to take over", dead_gateway)
        if not sessions and dead_gateway != self.gateway_id:
            # Nothing of it is left to move; while something is, its claim lapses and the
            # next heartbeat looks again.
            await asyncio.to_thread(self.heartbeat.release, dead_gateway)

    async def _register_owners(self) -> None:
        while True:
            await asyncio.sleep(OWNER_REGISTRATION_S)
            status, body = await self.rpc.call("session_owners")
            if status == 200:
                try:
                    await asyncio.to_thread(self.heartbeat.register, list(body["gateways"]))
                except redis.RedisError as error:
                    logger.warning("could not register session owners: %r", error)

    # ── provider frames ────────────────────────────────────────────────────────────────

    def rest_of(self, provider: str) -> ProviderRest:
        """The call control of the provider a session or a route names."""
        return self._wing(provider).rest

    def _wing(self, provider: str) -> _Wing:
        """The wing of a session's provider: the gateway's one choice of which provider it serves."""
        if Provider(provider) is Provider.LIVE:
            return _Wing(self.live_provider, LiveSideband, LIVE_KEY_PRESS, LiveCallTrace)
        return _Wing(self.provider, RealtimeSideband, REALTIME_KEY_PRESS, CallTrace)

    def _on_host_event(self, socket: SidebandSocket, event: SidebandConnected | SidebandClosed) -> None:
        if isinstance(event, SidebandClosed) and self.sockets.get(socket.session_id) is socket:
            del self.sockets[socket.session_id]
        traceparent = None
        if isinstance(event, SidebandConnected):
            socket.trace = tracing.call_opened(
                socket.session_id, socket.generation, socket.model, socket.trace_kind
            )
        if socket.trace is not None:
            traceparent = socket.trace.host_event()
            if isinstance(event, SidebandClosed):
                socket.trace.close()
                socket.trace = None
        self.sink.submit_event(
            socket.session_id, socket.generation, host_event(event), time.time(), traceparent=traceparent
        )

    def _on_sent(self, socket: SidebandSocket, control: dict[str, Any]) -> None:
        self.watchers.publish(socket.session_id, {"type": "control", "control": control})

    # ── to the gateway: controls and directives from the workers ─────────────────────────────

    def _carry_out_taken(self, taken: list[bytes]) -> None:
        """Carry out each batch of a take, in order. Nothing here waits on a call: a stuck provider
        socket or an unanswered hangup must never hold up the other calls' controls."""
        for payload in taken:
            try:
                batch, dropped = across_releases(ToGateway, payload)
                if dropped and (line := first_report("control batch", dropped)):
                    logger.warning(line)
                self.carry_out(batch)
            except Exception:
                logger.exception("batch to the gateway failed")

    def carry_out(self, batch: ToGateway) -> None:
        if batch.applied_seq is not None:
            self.sink.applied(batch.session_id, batch.applied_seq)
        poke = self._log_pokes.get(batch.session_id)
        if poke is not None:
            poke.set()
        for item in batch.items:
            if isinstance(item, Reply):
                self.rpc.resolve(item)
            elif isinstance(item, SendControl):
                socket = self.sockets.get(batch.session_id)
                # A control for another generation belongs to a superseded sideband.
                sent = (
                    socket is not None
                    and socket.generation == batch.generation
                    and socket.send(item.id, item.control)
                )
                if sent and batch.traceparent is not None:
                    tracing.control_sent(batch.session_id, batch.traceparent, item.control)
            elif isinstance(item, OpenSideband):
                self._open_sideband(batch.session_id, batch.generation, item)
            elif isinstance(item, CloseCall):
                socket = self.sockets.pop(batch.session_id, None)
                self._spawn(self._close_call(batch.session_id, socket, item), f"close-{batch.session_id}")
            elif isinstance(item, CollectDigits):
                self._collect(batch.session_id, batch.generation, item)
            elif isinstance(item, TransferCall):
                self._spawn(
                    self._transfer(batch.session_id, batch.generation, item), f"refer-{batch.session_id}"
                )
            elif isinstance(item, PlaceCall):
                self._spawn(self._dial(batch.session_id, batch.generation, item), f"dial-{batch.session_id}")

    def _collect(self, session_id: str, generation: int, directive: CollectDigits) -> None:
        """Start or stop keeping the caller's key presses in the call's privacy boundary. A
        sideband of another generation holds nothing of this collection: the workers end it
        when the new one connects."""
        socket = self.sockets.get(session_id)
        if socket is None or socket.generation != generation:
            return
        boundary = socket.sideband
        if not isinstance(boundary, PrivateSideband):
            return
        if directive.stop:
            boundary.stop_collecting(directive.number)
        else:
            boundary.collect(directive.number, directive.max, directive.end)

    async def _transfer(self, session_id: str, generation: int, directive: TransferCall) -> None:
        """Ask the provider to transfer the call, once; its answer goes into the session's log."""
        try:
            if not await asyncio.wrap_future(self.sink.first_time(session_id, directive.id)):
                return
        except redis.RedisError as error:
            # Not asked twice, and not lost: the outcome says so and the call goes on.
            finished = TransferFinished(to=directive.to, ok=False, error=f"not asked: {error}"[:300])
            self.sink.submit_event(session_id, generation, host_event(finished), time.time())
            return
        try:
            await self._wing(directive.provider).rest.refer(directive.call_id, directive.to)
            finished = TransferFinished(to=directive.to, ok=True)
        except ProviderUnavailable as error:
            logger.warning("transfer of %s to %s failed: %s", directive.call_id, directive.to, error)
            finished = TransferFinished(to=directive.to, ok=False, error=str(error)[:300])
        self.sink.submit_event(session_id, generation, host_event(finished), time.time())

    async def _dial(self, session_id: str, generation: int, directive: PlaceCall) -> None:
        """Place the call, once: claimed by its id before the provider is asked (a batch published
        again dials nothing), and with that id as the provider's idempotency key. The call's
        sideband is opened from here as soon as the provider answers (it replays nothing to a
        late one); the workers are told the call's id, or why it was not placed."""
        committed, password = await self._dial_committed(session_id, directive.call)
        if not committed:
            return
        try:
            # Claimed per generation: a gateway that takes a session over while its call was
            # being dialled dials again as a new generation, under the same provider
            # idempotency key (the call's id), so a call the dead gateway placed is not placed twice.
            claim = f"dial:{directive.call}:{generation}"
            if not await asyncio.wrap_future(self.sink.first_time(session_id, claim)):
                return
        except redis.RedisError as error:
            # Not placed (so never twice): the call fails, saying why.
            await self._dial_failed(session_id, "dial_not_claimed", f"the dial could not be claimed: {error}")
            return
        if directive.trunk is None or password is None:
            detail = "the call's trunk is gone, or its password does not open"
            await self._dial_failed(session_id, "trunk_not_found", detail)
            return
        trunk = Trunk(**directive.trunk.model_dump(), password=password)
        try:
            call_id = await self._wing(directive.provider).rest.place_call(
                directive.to, trunk, directive.session, idempotency_key=directive.call
            )
        except ProviderUnavailable as error:
            code = "dial_refused" if isinstance(error, ProviderCallError) else "provider_unavailable"
            logger.warning("dial of %s for %s failed: %s", directive.call, session_id, error)
            await self._dial_failed(session_id, code, str(error))
            return
        if directive.sideband is not None:
            # The attach's own directive, when a worker applies it, finds this sideband open.
            self._open_sideband(
                session_id, generation, directive.sideband.model_copy(update={"call_id": call_id})
            )
        # A request not answered in time is still queued, and applied when a worker takes it.
        status, _ = await self.rpc.call(
            "attach_call", session_id=session_id, call_id=call_id, now=time.time(), medium="sip"
        )
        if status != 200:
            logger.warning("attach of dialled call %s for %s answered %s", call_id, session_id, status)

    async def _dial_committed(self, session_id: str, call: str) -> tuple[bool, str | None]:
        """Whether the decision to dial `call` was committed and still stands, and its trunk's
        password (None: the trunk is gone or its password does not open), sealed by the worker
        to this gateway's dial key and opened here. A worker publishes the dial before its
        transaction commits; one killed in between leaves a directive no session stands behind,
        and the decision is made again under the same ids: that one dials. Asked again while no
        worker answers (a worker killed holding the question), for as long as the session could
        still connect: waiting costs a delay, never a call."""
        give_up_at = time.monotonic() + ADMISSION_TIMEOUT_MS / 1000
        dial_key = base64.b64encode(self._dial_public).decode()
        while True:
            status, body = await self.rpc.call(
                "dial_committed", session_id=session_id, call_id=call, dial_key=dial_key
            )
            if status == 200:
                sealed = body.get("password")
                if sealed is None:
                    return True, None
                try:
                    return True, open_sealed(sealed, private_key=self._dial_private, session_id=session_id)
                except SealedValueUnreadable:
                    return True, None
            if status != 503 or time.monotonic() >= give_up_at:
                logger.info("dial of %s for %s not carried out: %s %s", call, session_id, status, body)
                return False, None

    async def _dial_failed(self, session_id: str, code: str, detail: str) -> None:
        status, _ = await self.rpc.call(
            "admission_failed", session_id=session_id, code=code, detail=detail[:500], now=time.time()
        )
        if status != 200:
            logger.warning("dial failure of %s (%s) answered %s", session_id, code, status)

    def _open_sideband(self, session_id: str, generation: int, directive: OpenSideband) -> None:
        if self._stopping.is_set():
            # A stopping gateway opens nothing (its sink is closing): the peer that takes the
            # call over opens it. (Opened anyway, its failure could not be logged: "the sink
            # thread is shut down" on every Ctrl-C of a Procfile during a call.)
            return
        existing = self.sockets.get(session_id)
        if existing is not None and existing.generation == generation:
            return
        wing = self._wing(directive.provider)
        # The privacy boundary: what the wing answers is redacted before it is numbered, queued
        # or shown (pipeline.privacy.boundary).
        sideband = PrivateSideband(
            wing.new_sideband(),
            Redactor(directive.redact, sealing=_sealing(session_id, directive)),
            is_watched=lambda: bool(self.watchers.listeners(session_id)),
            keypad=Keypad(wing.key_press_type, frozenset(directive.keys)),
        )
        socket = SidebandSocket(
            session_id,
            directive.call_id,
            generation,
            wing.rest.sideband_url(directive.call_id),
            wing.rest.sideband_headers(),
            sideband,
            self._carry_out_actions,
            self._on_host_event,
            self._on_sent,
        )
        socket.model = self.settings.model_for(directive.provider)
        socket.route_id = directive.route_id
        socket.trace_kind = wing.call_trace
        self.sockets[session_id] = socket
        socket.start()

    async def _close_call(self, session_id: str, socket: SidebandSocket | None, directive: CloseCall) -> None:
        wait_s = socket.sideband.closed_by_provider_within_s if socket is not None else None
        if socket is not None and wait_s is not None and socket.task is not None:
            # A provider that closes the sideband itself once the call is ended (Live answers
            # the `session.close` sent before this directive with `session.closed`, the final
            # usage, and its own close) is waited for, then closed from here.
            socket.closing = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(socket.task), wait_s)
        if socket is not None:
            await socket.close()
        if directive.hangup and directive.call_id:
            try:
                await self._wing(directive.provider).rest.hangup(directive.call_id)
            except ProviderUnavailable as error:
                logger.warning("hangup of %s failed: %s", directive.call_id, error)
        if self.watchers.listeners(session_id):
            # The end's entries go out first: the read waits for the transaction that published
            # this directive to commit (models.records).
            await self._send_new_entries(session_id)
        self.watchers.close(session_id, directive.reason)
        self.sink.forget(session_id)

    # ── phone calls ────────────────────────────────────────────────────────────────────

    async def answer_phone_call(
        self, webhook_id: str, call_id: str, sip_headers: list[Any], provider: str = "realtime"
    ) -> Response:
        # Untrusted and unbounded as sent: bounded before they travel or are stored.
        raw = [{"name": header.name, "value": header.value} for header in sip_headers[:MAXIMUM_SIP_HEADERS]]
        headers = [{"name": name, "value": value} for name, value in kept_headers(raw)]
        return await answer_call(self, webhook_id[:200], call_id, headers, provider)

    def count_refused_webhook(self, code: str) -> None:
        """A delivery refused before anything was recorded (counted, not an incident: anyone
        can send one)."""
        self.sink.increment(f"webhooks_refused:{code}")
        self.count_webhook(code)

    def _calls_in_progress_by_route(self) -> dict[str, int]:
        """The calls whose sideband this gateway holds, by route. The route travels with the
        sideband's directive and lives on its socket, so it goes when the socket goes (however
        the call ended, or moved to a peer) and a peer that takes a call over counts it under
        its route too."""
        counted: dict[str, int] = {}
        for socket in list(self.sockets.values()):
            counted[socket.route_id] = counted.get(socket.route_id, 0) + 1
        return counted

    def refused_handshake(self, reason: str, path: str, client: str) -> None:
        """A live-stream handshake refused (by the server for its size, or by the API for its
        credentials): counted, and logged once at INFO — anyone can send one, so it is never an
        error. The path is logged without its query, which may hold a token."""
        logger.info("live stream handshake refused (%s): %s from %s", reason, path, client)
        if self.metrics is not None:
            self.metrics.refused_handshakes.labels(reason).inc()

    def count_webhook(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.webhooks.labels(outcome).inc()

    def count_heard(self, provider: str, waited_s: float) -> None:
        if self.metrics is not None:
            self.metrics.heard.labels(provider).observe(waited_s)

    def count_command(self, command: str, status: int) -> None:
        if self.metrics is not None:
            self.metrics.commands.labels(command, str(status)).inc()

    async def refused_webhooks(self) -> dict[str, int]:
        counts = await asyncio.wrap_future(self.sink.counters("webhooks_refused:"))
        return {f"webhook_{code}": count for code, count in counts.items()}

    # ── what the API needs of the calls held here ──────────────────────────────────────

    def held_generation(self, session_id: str) -> int | None:
        """The generation of a call whose sideband this gateway holds (None: held elsewhere,
        or by nobody)."""
        socket = self.sockets.get(session_id)
        return socket.generation if socket is not None else None

    def playback(self, session_id: str) -> dict[str, Any] | None:
        """What the caller of a call held here is hearing now (None when nothing plays, or the
        call's sideband is held elsewhere)."""
        socket = self.sockets.get(session_id)
        return socket.playback(time.monotonic()) if socket is not None else None

    def redactor_of(self, session_id: str) -> Redactor | None:
        """The redaction of a call held here, its privacy boundary's (None when its sideband is
        held elsewhere): what an operator types into the call is masked as its caller's words are."""
        socket = self.sockets.get(session_id)
        boundary = socket.sideband if socket is not None else None
        return boundary.redactor if isinstance(boundary, PrivateSideband) else None

    async def listen(self, session_id: str, websocket: WebSocket) -> None:
        """Stream a session's live messages to an accepted listener. A session whose sideband
        is held elsewhere has its end noticed by asking, so no listener is held forever."""
        if self.watchers.has_ended(session_id):
            # It ended between the listener's lookup and now: the whole story, then the end.
            await self._send_new_entries(session_id)
            await self.watchers.serve(session_id, websocket)
            self._release_log(session_id)
            return
        # A task that has returned is replaced, not waited on: its done callback (which drops
        # it from the map) runs a loop turn later, and a listener joining in between would
        # otherwise get no follower at all.
        watcher = self._watchers.get(session_id)
        if watcher is None or watcher.done():
            _track(self._watchers, session_id, self._watch_for_end(session_id))
        follower = self._log_followers.get(session_id)
        if follower is None or follower.done():
            _track(self._log_followers, session_id, self._follow_log(session_id))
        await self.watchers.serve(session_id, websocket)

    def _release_log(self, session_id: str) -> None:
        """Once nobody listens and no follower reads, nothing of the session's call log stays
        here: the copy sent so far (a later listener's follower reads it again from the start),
        its read lock and its poke. Without this, a call held by another gateway left its whole
        copied log here when its listeners left, and each listener who joined an ended session
        left a lock."""
        if self.watchers.listeners(session_id):
            return
        follower = self._log_followers.get(session_id)
        if follower is not None and not follower.done() and follower is not asyncio.current_task():
            return
        self.watchers.forget(session_id)
        self._log_pokes.pop(session_id, None)
        self._log_reads.pop(session_id, None)

    async def _follow_log(self, session_id: str) -> None:
        """While anyone listens, send the call log's new entries as they are written: read
        after each batch of the session's controls carried out here, and every LOG_FOLLOW_S
        (the call may be held by another gateway)."""
        poke = self._log_pokes.setdefault(session_id, asyncio.Event())
        try:
            while True:
                await self._send_new_entries(session_id)
                # Each read projects the whole log: a busy call is read a few times a second
                # at most, however many batches it gets.
                await asyncio.sleep(LOG_READ_GAP_S)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(poke.wait(), LOG_FOLLOW_S)
                poke.clear()
                if not self.watchers.listeners(session_id):
                    return
        finally:
            self._release_log(session_id)

    async def _send_new_entries(self, session_id: str) -> None:
        """The entries after the last one sent, to the session's listeners (one read at a time,
        so none is sent twice)."""
        async with self._log_reads.setdefault(session_id, asyncio.Lock()):
            after = self.watchers.logged(session_id)
            status, body = await self.rpc.call("session_call_log", session_id=session_id, after=after)
            if status != 200:
                return  # the next poke or poll reads them
            for entry in body["entries"]:
                if entry["seq"] == self.watchers.logged(session_id) + 1:
                    self.watchers.log_entry(session_id, entry)

    async def _watch_for_end(self, session_id: str) -> None:
        while True:
            await asyncio.sleep(WATCH_STATUS_CHECK_S)
            if not self.watchers.listeners(session_id):
                return
            if session_id in self.sockets:
                continue  # its CloseCall comes here
            status, record = await self.rpc.call("describe_session", session_id=session_id)
            if status == 404 or (status == 200 and record["status"] in _TERMINAL_STATUSES):
                await self._send_new_entries(session_id)
                self.watchers.close(session_id, str(record.get("end_reason") or "session_over"))
                return


def _track(tasks: dict[str, asyncio.Task[None]], session_id: str, work: Any) -> None:
    """Run `work` as the session's task in `tasks`, dropped from it when done (only if it is
    still the one there: a replacement may have taken its place)."""
    task = asyncio.get_running_loop().create_task(work)
    tasks[session_id] = task

    def drop(done: asyncio.Task[None]) -> None:
        if tasks.get(session_id) is done:
            del tasks[session_id]

    task.add_done_callback(drop)


def _sealing(session_id: str, directive: OpenSideband) -> Sealing | None:
    """What the boundary seals on this sideband: the tools' sensitive parameters, with the
    session's public key (the gateway holds no key that opens anything)."""
    if not directive.sealed:
        return None
    public = base64.urlsafe_b64decode(directive.sealing_key) if directive.sealing_key else None
    parameters = {tool: frozenset(names) for tool, names in directive.sealed.items()}
    return Sealing(session_id, public, parameters)
