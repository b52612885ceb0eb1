"""Gateway liveness: a heartbeat on a thread of its own, and the dead peers it notices.

Each gateway renews `{ns}:gateway-alive:{id}` every GATEWAY_HEARTBEAT_MS (expiring after
GATEWAY_DEAD_AFTER_MS) and keeps its id in `{ns}:gateways`. A registered gateway whose key is
gone is dead; one live gateway claims it (the claim lapses, so a failed takeover is retried)
and is told, through `on_dead`, to take its sessions over.

The heartbeat is the only thing this thread does besides looking: a takeover runs elsewhere and
may take as long as it takes, and the key is still renewed on time. (When the beat waited on a
takeover, a slow one — up to 30 s against a 3 s liveness window — made a healthy gateway look
dead, and a peer took 3 of its calls.)
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

import redis

from gateway.redis_clients import redis_client
from pipeline.call.limits import GATEWAY_DEAD_AFTER_MS, GATEWAY_HEARTBEAT_MS
from pipeline.platform.names import gateway_alive_key, gateway_registry_key

logger = logging.getLogger(__name__)

# A gateway's claim on a dead peer's sessions lapses after this, so a takeover that failed (or
# left sessions behind) is tried again; a takeover only lists and hands out the sessions, so
# it answers well within it.
TAKEOVER_CLAIM_MS = 10_000


def takeover_warning(dead_gateway: str, sessions: int) -> str | None:
    """What a takeover is worth a warning for: calls that changed hands. Every gateway takes
    back its own id's sessions as it starts, and a dead peer may have held none; warning about
    0 sessions greeted every clean start with a false alarm."""
    if sessions == 0:
        return None
    noun = "session" if sessions == 1 else "sessions"
    return f"taking over {sessions} {noun} of gateway {dead_gateway}"


class GatewayIdTaken(Exception):
    """Another gateway of the deployment runs under this gateway's id."""


# Deletes the liveness key only if it is this process's (its token): a gateway refused for a
# taken id must not delete the running one's key.
_DELETE_IF_MINE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)


def held_elsewhere(client: redis.Redis, namespace: str, gateway_id: str, token: str = "") -> bool:
    """Whether another gateway runs under `gateway_id` now: its liveness key, of another process
    (not `token`), is still there a liveness window later (renewed). A key that lapses meanwhile
    was this id's earlier life (killed, not stopped): its sessions are this gateway's to take
    back. Asked before a gateway starts anything that writes under its id."""
    key = gateway_alive_key(namespace, gateway_id)
    found = client.get(key)
    if found is None or (found.decode() if isinstance(found, bytes) else found) == token:
        return False
    deadline = time.monotonic() + (GATEWAY_DEAD_AFTER_MS + GATEWAY_HEARTBEAT_MS) / 1000
    while time.monotonic() < deadline:
        if not client.exists(key):
            return False
        time.sleep(GATEWAY_HEARTBEAT_MS / 1000 / 4)
    return bool(client.exists(key))


class Heartbeat:
    """Renews this gateway's liveness key and reports dead peers it claimed. The key holds a
    token of this process's, so another process under the same id is told apart from this
    one's earlier life."""

    def __init__(
        self, redis_url: str, namespace: str, gateway_id: str, on_dead: Callable[[str], None]
    ) -> None:
        # A connection of its own: a pool shared with busy work could make a beat wait.
        self._redis = redis_client(
            redis_url, socket_timeout=GATEWAY_HEARTBEAT_MS / 1000, socket_connect_timeout=1.0
        )
        self._namespace = namespace
        self.gateway_id = gateway_id
        self._on_dead = on_dead
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self.token = uuid.uuid4().hex
        self.beats = 0
        # Since when beats have succeeded without a break (None: the last one failed). Peers are
        # judged only after a liveness window of that: when Redis comes back from an outage, every
        # peer's key lapsed during it, and a peer that is alive has not beaten again yet.
        self._steady_since: float | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and delete the key (if it is this process's): a stopping gateway is as
        good as dead to its peers, and one takes its calls over at once."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(GATEWAY_HEARTBEAT_MS / 1000 * 3)
        try:
            self._redis.eval(
                _DELETE_IF_MINE, 1, gateway_alive_key(self._namespace, self.gateway_id), self.token
            )
        except redis.RedisError:
            pass  # it expires by itself
        self._redis.close()

    def held_elsewhere(self) -> bool:
        """Whether another gateway runs under this id now (`held_elsewhere`)."""
        return held_elsewhere(self._redis, self._namespace, self.gateway_id, self.token)

    def release(self, dead_gateway: str) -> None:
        """A dead peer's sessions are all taken over: forget it."""
        self._redis.srem(gateway_registry_key(self._namespace), dead_gateway)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                for dead in self.tick(time.monotonic()):
                    self._on_dead(dead)
            except redis.RedisError as error:
                logger.warning("gateway heartbeat failed: %r", error)
            self._stopping.wait(GATEWAY_HEARTBEAT_MS / 1000)

    def tick(self, now: float) -> list[str]:
        """One beat; then, once beats have been steady for a liveness window, the dead peers
        this gateway claimed."""
        try:
            self.beat()
        except redis.RedisError:
            self._steady_since = None
            raise
        if self._steady_since is None:
            self._steady_since = now
        if now - self._steady_since < GATEWAY_DEAD_AFTER_MS / 1000:
            return []
        return self.claim_dead_peers()

    def register(self, gateway_ids: list[str]) -> None:
        """Put gateways that hold unfinished sessions back in the registry (Redis may have lost
        it), so a dead one among them is noticed and its sessions taken over."""
        if gateway_ids:
            self._redis.sadd(gateway_registry_key(self._namespace), *gateway_ids)

    def beat(self) -> None:
        with self._redis.pipeline(transaction=False) as beat:
            beat.set(
                gateway_alive_key(self._namespace, self.gateway_id), self.token, px=GATEWAY_DEAD_AFTER_MS
            )
            beat.sadd(gateway_registry_key(self._namespace), self.gateway_id)
            beat.execute()
        self.beats += 1

    def claim_dead_peers(self) -> list[str]:
        """The registered peers found dead that this gateway claimed to take over."""
        members: set[bytes] = self._redis.smembers(gateway_registry_key(self._namespace))  # type: ignore[assignment]
        peers = sorted(name for name in (member.decode() for member in members) if name != self.gateway_id)
        if not peers:
            return []
        with self._redis.pipeline(transaction=False) as look:
            for peer in peers:
                look.exists(gateway_alive_key(self._namespace, peer))
            alive = look.execute()
        claimed = []
        for peer, is_alive in zip(peers, alive, strict=True):
            if is_alive:
                continue
            # One live gateway wins each dead one.
            claim = f"{self._namespace}:gateway-takeover:{peer}"
            if self._redis.set(claim, self.gateway_id, nx=True, px=TAKEOVER_CLAIM_MS):
                claimed.append(peer)
        return claimed
