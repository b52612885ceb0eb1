"""The gateway process, its composition root: the parts built and wired, started and stopped,
and the calls of a dead gateway taken over.

Each part is typed by the narrow port it uses (`gateway.ports`), never by `Gateway`:
- the API (`gateway.api`), each route module through its own port, and the SIP front door
  (`gateway.phone`); what they ask of the calls held here (`gateway.held_calls`), of the
  providers (`Wings`, here) and of the counters (`gateway.counters`) is a part of its own,
  handed to them as an attribute of the port;
- the directives (`gateway.directives`): what the workers publish to this gateway's control
  queue, carried out without ever waiting on one call; they open and close the sidebands
  (`SidebandSocket`s) of the calls held here, each driving its provider's sans-I/O `Sideband`,
  whose wing is chosen here (`Wings`), and what a sideband answers is carried out by the
  `ActionCarrier` (durable events numbered into their session's log by the `EventSink`, words to
  the watchers);
- the watchers' hub (`gateway.watch`): the live messages of each call fanned out to its
  listeners, with its call log and its end;
- the heartbeat (`gateway.liveness`), whose news of a dead peer starts its takeover here.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

import redis

from gateway.api import RERUNS_SAFELY, WEBHOOK_PATH, authenticated, build_api, json_bodies, storable_addresses
from gateway.controls import ControlConsumer
from gateway.counters import GatewayCounters
from gateway.directives import DirectiveCarrier, Wing
from gateway.held_calls import SidebandsHeld
from gateway.idempotency import idempotent
from gateway.keys import KeyRing
from gateway.liveness import GatewayIdTaken, Heartbeat, takeover_warning
from gateway.metrics import GatewayMetrics
from gateway.phone import PhoneDoor
from gateway.providers.live import LiveCallTrace, OpenAILive, live_provider_from
from gateway.providers.rest import ProviderRest
from gateway.rpc import WorkerRpc
from gateway.sideband import SIDEBAND_CLOSE_TIMEOUT_S, ActionCarrier, SidebandSocket
from gateway.sink import EventSink, NumberingBroker
from gateway.tracing import CallTrace
from gateway.watch import WatchedSessions, WatchHub
from gateway.web import HttpLimits, RunningServer, start_server
from pipeline.api import idempotency, watch_tokens
from pipeline.live.sideband import KEY_PRESS_TYPE as LIVE_KEY_PRESS
from pipeline.live.sideband import LiveSideband
from pipeline.model_catalog.choice import WARN_WITHIN_DAYS, retiring_message
from pipeline.platform.config import Settings
from pipeline.platform.names import control_queue
from pipeline.realtime.sideband import KEY_PRESS_TYPE as REALTIME_KEY_PRESS
from pipeline.realtime.sideband import RealtimeSideband
from pipeline.session.state import Provider

logger = logging.getLogger(__name__)

# How often a draining gateway asks whether its calls have moved to a peer.
DRAIN_CHECK_S = 0.25
# How often a gateway puts the owners of unfinished sessions back in the liveness registry: a
# Redis that restarted empty lost it, and a gateway that died meanwhile would never be noticed.
OWNER_REGISTRATION_S = 30.0


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
        self.catalog = settings.catalog
        self.provider = provider
        # The Live API (GPT-Live), for sessions created with "provider": "live".
        self.live_provider = live_provider or live_provider_from(settings)
        self._redis_url = redis_url
        self._http_limits = http_limits or HttpLimits()
        self.sink = EventSink(redis_url, broker, self.gateway_id, settings.broker_namespace)
        self.rpc = WorkerRpc(self.sink, self.gateway_id)
        self.watch_secret = (
            settings.live_token_secret.encode()
            if settings.live_token_secret
            else watch_tokens.derive_secret(settings.api_token)
        )
        # The sidebands of the calls held here, by session: the directives open and close them.
        self.sockets: dict[str, SidebandSocket] = {}
        self.watchers = WatchHub()
        self.watched = WatchedSessions(self.watchers, self.rpc, self.sockets)
        self.held = SidebandsHeld(self.sockets)
        self.wings = Wings(settings, provider, self.live_provider)
        self.metrics = (
            GatewayMetrics(
                self.gateway_id, self.held.by_route, redis_url, settings.broker_namespace, settings.catalog
            )
            if settings.metrics
            else None
        )
        self.counters = GatewayCounters(self.metrics, self.sink.counts)
        self._stopping = threading.Event()
        self.directives = DirectiveCarrier(
            sink=self.sink,
            rpc=self.rpc,
            held=self.sockets,
            wing_of=self.wings.of,
            watch=self.watched,
            on_actions=ActionCarrier(self.sink, self.watchers, self.counters.count_heard),
            lifecycle=self,
        )
        # Set by drain(): no new calls (503 `draining`), /readyz answers 503.
        self.draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: RunningServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._consumer: ControlConsumer | None = None
        self.phone_door = PhoneDoor(settings.webhook_secret)
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
        _warn_of_retiring_models(self.settings)
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
            on_handshake_refused=self.counters.refused_handshake,
        )
        self.http_port = self._http.port
        self._consumer = ControlConsumer(
            self._redis_url,
            control_queue(self.settings.broker_namespace, self.gateway_id),
            loop,
            self.directives.carry_out_taken,
        )
        self._consumer.start()
        # Alive before anything else: a takeover checks that its new owner is.
        await asyncio.to_thread(self.heartbeat.beat)
        self.heartbeat.start()
        # This gateway's id may have held sessions in a previous life: take them back.
        self.spawn_task(self._take_over(self.gateway_id), f"takeover-{self.gateway_id}")
        self.spawn_task(self._register_owners(), "owner-registration")

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

    @property
    def stopping(self) -> bool:
        """Whether the gateway is stopping (it opens no new sideband)."""
        return self._stopping.is_set()

    def spawn_task(self, work: Any, name: str) -> None:
        """Run `work` as a task of the gateway's (cancelled when it stops)."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ── takeover of dead peers ─────────────────────────────────────────────────────────

    def _on_dead_peer(self, dead_gateway: str) -> None:
        """Called on the heartbeat thread: the takeover runs on the event loop."""
        if self._loop is not None and not self._stopping.is_set():
            self._loop.call_soon_threadsafe(
                self.spawn_task, self._take_over(dead_gateway), f"takeover-{dead_gateway}"
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


class Wings:
    """The providers this gateway serves, each as its wing: the gateway's one choice of which
    provider a session's calls speak."""

    def __init__(self, settings: Settings, realtime: ProviderRest, live: OpenAILive) -> None:
        self._settings = settings
        self._realtime = realtime
        self._live = live

    def of(self, provider: str) -> Wing:
        """The wing of a session's provider."""
        if Provider(provider) is Provider.LIVE:
            model = self._settings.model_for(Provider.LIVE)
            return Wing(self._live, LiveSideband, LIVE_KEY_PRESS, LiveCallTrace, model)
        model = self._settings.model_for(Provider.REALTIME)
        return Wing(self._realtime, RealtimeSideband, REALTIME_KEY_PRESS, CallTrace, model)

    def rest_of(self, provider: str) -> ProviderRest:
        """The call control of the provider a session or a route names."""
        return self.of(provider).rest


def _warn_of_retiring_models(settings: Settings) -> None:
    """Once, at start: each model of the catalog within WARN_WITHIN_DAYS of its shutdown, and
    which of the deployment's defaults name one (`switchboard doctor` lists its routes and
    campaigns too)."""
    today = datetime.now(UTC).date()
    defaults = {settings.provider_model, settings.live_model, settings.transcription_model}
    for entry in settings.catalog.retiring(today, WARN_WITHIN_DAYS):
        named = " (a default of this deployment)" if entry.id in defaults else ""
        logger.warning(
            "model %s%s: sessions that name it fail once it is gone", retiring_message(entry, today), named
        )
