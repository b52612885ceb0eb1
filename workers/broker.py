"""Dramatiq's Redis broker, with a consumer that blocks while idle instead of polling.

Stock Dramatiq fetches from Redis with a Lua script and, when the fetch comes back empty,
sleeps with an exponential backoff up to the worker timeout: a quiet call waits ~56 ms per
queue hop (INFRA §2.1, §3.1). The maintainer keeps it that way because the Lua bookkeeping
(acks set, heartbeats, maintenance) rules out a plain ``BRPOPLPUSH`` (Bogdanp/dramatiq#25).

``WakeRedisBroker`` keeps every byte of that bookkeeping — the same ``dispatch.lua``, keys,
acks, nacks and dead letters — and adds one side channel: after each enqueue it pushes a token
onto ``<ns>:<queue>.wake``, and an idle consumer ``BLPOP``s that list instead of sleeping.
A token is only a hint that the queue may have work; the fetch stays the source of truth, so
a lost token costs at most one worker timeout and a stale one costs one empty fetch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal
from uuid import uuid4

import dramatiq
import redis
import sentry_sdk
from dramatiq.brokers.redis import MAINTENANCE_COMMAND_BLACKLIST, RedisBroker, _RedisConsumer
from dramatiq.common import current_millis, dq_name
from dramatiq.errors import ConnectionClosed, DecodeError
from redis.sentinel import SentinelConnectionPool

from pipeline.platform.envelope import NumberedMessage
from pipeline.platform.redis_address import parse_redis_address
from workers.dead_letters import undecodable_reason
from workers.redis_clients import redis_client

logger = logging.getLogger(__name__)

# One token per enqueue is enough to wake every consumer that could take the message; more
# than this only means consumers were busy and will fetch anyway, so the list is trimmed.
WAKE_LIST_LENGTH = 64

# A full prefetch means every worker thread is busy; an ack frees a slot at any moment, so
# the consumer looks again after this instead of backing off to the worker timeout.
FULL_PREFETCH_SLEEP_S = 0.001

# Redis checks blocking timeouts on its cron tick (hz=10 by default), so a BLPOP returns up
# to one tick after its timeout (measured: BLPOP 0.23 s took 0.30 s).
REDIS_TICK_S = 0.1

# redis-py treats a BLPOP timeout of 0 as "block forever"; never ask for less than this.
MINIMUM_BLOCK_S = 0.01

# Each process sweeps each queue for a dead worker's unacknowledged messages this often; an
# idle consumer fetches about once per worker timeout (1 s), so sweeps keep to that pace.
MAINTENANCE_INTERVAL_MS = 500

BrokerKind = Literal["wake", "stock"]

# A message stored by `enqueue_numbered` is remembered (its id → its seq) this long, so that one
# sent again after a lost reply is recognised: far longer than a sender retries a send.
ENQUEUED_MEMORY_S = 120

# KEYS[1] the namespace; ARGV: the seq counters' expiry, the memory's expiry, then per message:
# queue, message id, seq counter key ("" for a message not numbered), floor, the number of body
# parts n, and the n parts (n - 1 seqs go between them). The same layout as dispatch.lua's
# enqueue (the id on <ns>:<queue>, the body in its .msgs hash), plus the wake tokens.
# dispatch.lua's heartbeat and maintenance are the consumers' business: a sender holds no acks.
ENQUEUE_NUMBERED = """
local namespace = KEYS[1]
local seq_ttl = tonumber(ARGV[1])
local memory_ttl = tonumber(ARGV[2])
local seqs = {}
local woken = {}
local n = 0
local i = 3
while i <= #ARGV do
    local queue_name, message_id, seq_key = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    local floor, parts = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
    local first_part = i + 5
    i = first_part + parts
    local memory = namespace .. ":enqueued:" .. message_id
    local seq = tonumber(redis.call("GET", memory) or "-1")
    if seq < 0 then
        seq = 0
        local body = ARGV[first_part]
        if seq_key ~= "" and parts > 1 then
            local count = parts - 1
            local last = redis.call("INCRBY", seq_key, count)
            seq = last - count + 1
            if seq <= floor then
                seq = floor + 1
                redis.call("SET", seq_key, seq + count - 1)
            end
            redis.call("EXPIRE", seq_key, seq_ttl)
            local pieces = {body}
            for j = 1, count do
                pieces[#pieces + 1] = string.format("%d", seq + j - 1)
                pieces[#pieces + 1] = ARGV[first_part + j]
            end
            body = table.concat(pieces)
        end
        local queue = namespace .. ":" .. queue_name
        redis.call("HSET", queue .. ".msgs", message_id, body)
        redis.call("RPUSH", queue, message_id)
        redis.call("SET", memory, seq, "EX", memory_ttl)
        woken[queue_name] = (woken[queue_name] or 0) + 1
    end
    n = n + 1
    seqs[n] = seq
end
for queue_name, count in pairs(woken) do
    local wake = namespace .. ":" .. queue_name .. ".wake"
    for _ = 1, count do
        redis.call("RPUSH", wake, 1)
    end
    redis.call("LTRIM", wake, -WAKE_LIST_LENGTH, -1)
end
return seqs
""".replace("WAKE_LIST_LENGTH", str(WAKE_LIST_LENGTH))


def wake_key(namespace: str, queue_name: str) -> str:
    """The Redis list whose tokens wake the consumers of ``queue_name``."""
    return f"{namespace}:{queue_name}.wake"


class NumberingEnqueue:
    """What the gateway's event sink needs of a broker: messages numbered and stored in one
    round trip (both broker kinds have it, so the sink has one path)."""

    namespace: str
    client: redis.Redis

    def enqueue_numbered(self, messages: Sequence[NumberedMessage], seq_ttl_s: int) -> list[int]:
        """Store messages, in order, each numbered first if it asks to be, with one wake token per
        message, in one round trip; answers each message's first seq (0 for one not numbered).

        A numbered message's seqs are the next values of its counter (`INCRBY`), or follow
        `floor` when the counter is at or below it (Redis lost it), written into the body
        between its parts. Sent again with the same `message_id` — its first reply was lost —
        a message is neither numbered nor stored twice: the first seq it got is answered. The
        body is Dramatiq's message encoding (`pipeline.platform.envelope.numbered_body`), so any
        consumer of the queue reads it."""
        arguments: list[Any] = [seq_ttl_s, ENQUEUED_MEMORY_S]
        for message in messages:
            arguments += [
                message.queue_name,
                message.message_id,
                message.seq_key,
                message.floor,
                len(message.parts),
                *message.parts,
            ]
        return [int(seq) for seq in self._numbering_script()(keys=[self.namespace], args=arguments)]

    def _numbering_script(self) -> Any:
        script = self.__dict__.get("_enqueue_numbered_script")
        if script is None:
            # The Script object loads the script again if Redis forgot it (a restart).
            script = self.__dict__["_enqueue_numbered_script"] = self.client.register_script(ENQUEUE_NUMBERED)
        return script


class WakeRedisBroker(NumberingEnqueue, RedisBroker):
    """A ``RedisBroker`` whose enqueues wake idle consumers blocked on ``<ns>:<queue>.wake``."""

    # What keeps a message given up on, before it leaves its queue (workers.dead_letters.keeper:
    # a row in PostgreSQL); set by the worker runtime. None: Dramatiq's Redis dead-letter set.
    keep_dead_letter: Callable[[str, str, bytes], None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._maintenance_lock = threading.Lock()
        self._last_maintenance_ms: dict[str, int] = {}
        # Acks of processed messages, per queue, waiting for their consumer's next round trip.
        self._acks_lock = threading.Lock()
        self._pending_acks: dict[str, list[str]] = {}

    @property
    def consumer_class(self) -> type[_RedisConsumer]:
        # RedisBroker.consume() builds its consumer from this property, so overriding it is
        # the whole of the consumer wiring.
        return _WakeRedisConsumer

    # enqueue() is RedisBroker's own: its "enqueue" dispatch (below) carries the wake token in
    # the same round trip, for the queue the message was really stored on (``<q>.DQ`` when
    # delayed), which is the queue whose consumer must wake.

    def _dispatch(self, command: str) -> Any:
        # Maintenance (requeueing a dead worker's unacked messages) only ever touches the queue
        # of the command that triggered it, so a random chance per command leaves a quiet
        # queue's orphans waiting ~10 s. Deciding per queue by time instead bounds that wait
        # to about the heartbeat timeout plus one maintenance interval.
        script = self.scripts["dispatch"]
        keys = [self.namespace]
        may_maintain = command not in MAINTENANCE_COMMAND_BLACKLIST

        def do_dispatch(queue_name: str, *args: Any) -> Any:
            arguments = self._arguments(command, queue_name, *args, may_maintain=may_maintain)
            if command != "enqueue":
                return script(args=arguments, keys=keys)
            [stored] = self._store_with_tokens([(queue_name, arguments)])
            return stored

        return do_dispatch

    def _arguments(self, command: str, queue_name: str, *args: Any, may_maintain: bool) -> list[Any]:
        """dispatch.lua's arguments, as RedisBroker passes them."""
        timestamp = current_millis()
        maintain = may_maintain and self._maintenance_due(queue_name, timestamp)
        return [
            command,
            timestamp,
            queue_name,
            self.broker_id,
            self.heartbeat_timeout,
            self.dead_message_ttl,
            int(maintain),
            self._max_unpack_size(),
            *args,
        ]

    def take(self, client: redis.Redis, queue_name: str, count: int, *, wait_s: float | None) -> list[bytes]:
        """Settle the queue's deferred acks, wait up to `wait_s` for a wake token (None: do not
        wait), clear the queue's tokens and fetch up to ``count`` messages: one round trip.

        Redis runs the commands after a blocking ``BLPOP`` the moment it returns, so an idle
        consumer's wait, its fetch and the acks of what it handed out last all cost one round
        trip. Clearing the tokens before the fetch is safe: a token deleted here belonged to a
        message stored before the fetch, which the fetch returns; a message stored after it
        brings a token of its own (a burst of k messages would otherwise leave k - 1 stale
        tokens, each followed by an empty fetch: a third of all fetches at 100 calls)."""
        script = self.scripts["dispatch"]
        acks = self._taken_acks(queue_name)
        acked = [self._arguments("ack", queue_name, redis_id, may_maintain=False) for redis_id in acks]
        fetching = self._arguments("fetch", queue_name, count, may_maintain=True)
        wake = wake_key(self.namespace, queue_name)
        try:
            with client.pipeline(transaction=False) as pipe:
                for arguments in acked:
                    pipe.evalsha(script.sha, 1, self.namespace, *arguments)
                if wait_s is not None:
                    pipe.blpop([wake], timeout=max(wait_s, MINIMUM_BLOCK_S))
                pipe.delete(wake)
                pipe.evalsha(script.sha, 1, self.namespace, *fetching)
                results = pipe.execute(raise_on_error=False)
        except redis.RedisError:
            # Not known to be settled: they go with the next round trip (an ack twice is harmless).
            self._defer_acks(queue_name, acks)
            raise
        for arguments, result in zip(acked, results, strict=False):
            self._settled(result, arguments)
        return list(self._settled(results[-1], fetching))

    def fetch_clearing_wake(self, queue_name: str, count: int) -> list[bytes]:
        """Clear the queue's wake tokens, then fetch up to ``count`` messages (see `take`)."""
        return self.take(self.client, queue_name, count, wait_s=None)

    def defer_ack(self, queue_name: str, redis_message_id: str) -> None:
        """A message of the queue was processed: acknowledge it with its consumer's next round
        trip instead of one of its own (see `_WakeRedisConsumer.ack`)."""
        self._defer_acks(queue_name, [redis_message_id])

    def _defer_acks(self, queue_name: str, redis_message_ids: list[str]) -> None:
        if not redis_message_ids:
            return
        with self._acks_lock:
            self._pending_acks.setdefault(queue_name, []).extend(redis_message_ids)

    def _taken_acks(self, queue_name: str) -> list[str]:
        with self._acks_lock:
            return self._pending_acks.pop(queue_name, [])

    def settle_acks(self, queue_name: str) -> None:
        """Acknowledge the queue's deferred acks now (a consumer closing)."""
        for redis_id in self._taken_acks(queue_name):
            self.do_ack(queue_name, redis_id)

    def fetched_id_holding(self, queue_name: str, data: bytes) -> str | None:
        """The id of a message this broker fetched from ``queue_name`` and has not acked whose
        stored body is ``data``, or None if there is none (any one of them, if several)."""
        fetched = sorted(self.client.smembers(f"{self.namespace}:__acks__.{self.broker_id}.{queue_name}"))
        if not fetched:
            return None
        bodies = self.client.hmget(f"{self.namespace}:{queue_name}.msgs", fetched)
        for redis_id, body in zip(fetched, bodies, strict=True):
            if body == data:
                return redis_id.decode() if isinstance(redis_id, bytes) else str(redis_id)
        return None

    def _maintenance_due(self, queue_name: str, now_ms: int) -> bool:
        with self._maintenance_lock:
            last = self._last_maintenance_ms.get(queue_name, 0)
            if now_ms - last < MAINTENANCE_INTERVAL_MS:
                return False
            self._last_maintenance_ms[queue_name] = now_ms
            return True

    def enqueue_all(self, messages: list[tuple[dramatiq.Message[Any], int | None]]) -> None:
        """Enqueue messages, each with its delay (ms, or None), as `enqueue` does one — a
        storage id of its own, a delayed one on its queue's delay queue with its eta, the
        enqueue middleware around each — but all in one pipelined round trip."""
        prepared = []
        for original, delay in messages:
            message = original.copy(options={"redis_message_id": str(uuid4())})
            if delay is not None:
                message = message.copy(
                    queue_name=dq_name(message.queue_name), options={"eta": current_millis() + delay}
                )
            self.emit_before("enqueue", message, delay)
            prepared.append((message, delay))
        self._store_with_tokens(
            [
                (
                    message.queue_name,
                    self._arguments(
                        "enqueue",
                        message.queue_name,
                        message.options["redis_message_id"],
                        message.encode(),
                        may_maintain=True,
                    ),
                )
                for message, _ in prepared
            ]
        )
        for message, delay in prepared:
            self.emit_after("enqueue", message, delay)

    def _store_with_tokens(self, entries: list[tuple[str, list[Any]]]) -> list[Any]:
        """dispatch.lua's enqueue for each (queue, arguments), then one wake token per message
        on each queue's list, in one pipelined round trip."""
        script = self.scripts["dispatch"]
        # EVALSHA by hand: a pipeline given the Script object would first ask SCRIPT EXISTS,
        # a round trip of its own on every enqueue.
        with self.client.pipeline(transaction=False) as pipe:
            for _, arguments in entries:
                pipe.evalsha(script.sha, 1, self.namespace, *arguments)
            for queue_name, count in Counter(queue_name for queue_name, _ in entries).items():
                self._push_tokens(pipe, queue_name, count)
            results = pipe.execute(raise_on_error=False)
        return [
            self._settled(stored, arguments, woken=queue_name)
            for (queue_name, arguments), stored in zip(entries, results, strict=False)
        ]

    def _settled(self, result: Any, arguments: list[Any], woken: str | None = None) -> Any:
        """A pipelined dispatch.lua result, run again through the Script object if Redis had
        forgotten the script (a restart flushes its cache; the Script object reloads it)."""
        if isinstance(result, redis.exceptions.NoScriptError):
            result = self.scripts["dispatch"](args=arguments, keys=[self.namespace])
            if woken is not None:
                # The token pushed with the failed call may have woken a consumer too early.
                self.wake(woken)
        elif isinstance(result, Exception):
            raise result
        return result

    def _push_tokens(self, pipe: Any, queue_name: str, count: int = 1) -> None:
        key = wake_key(self.namespace, queue_name)
        pipe.rpush(key, *[1] * count)
        pipe.ltrim(key, -WAKE_LIST_LENGTH, -1)

    def wake(self, queue_name: str) -> None:
        """Push one wake token for ``queue_name``, keeping the list bounded."""
        try:
            with self.client.pipeline(transaction=False) as pipe:
                self._push_tokens(pipe, queue_name)
                pipe.execute()
        except redis.RedisError:
            # The message is already stored; raising here would make the sender retry and
            # duplicate it. Without the token a consumer still finds it within one timeout.
            logger.warning("Could not wake consumers of %r.", queue_name, exc_info=True)


class _WakeRedisConsumer(_RedisConsumer):
    """A Redis consumer that blocks on its wake list when a fetch finds nothing."""

    def __init__(self, broker: WakeRedisBroker, queue_name: str, prefetch: int, timeout: int):
        super().__init__(broker, queue_name, prefetch, timeout)
        self.broker: WakeRedisBroker = broker
        self.wake_key = wake_key(broker.namespace, queue_name)
        # BLPOP holds its connection for up to a worker timeout, so each consumer has a
        # connection of its own instead of stalling a pooled one that others need.
        self.blocking_client: redis.Redis | None = None
        # Delayed messages sit in worker memory until their eta (worker.py handles them only
        # between two consumer iterations), so an idle wait must end by the earliest one.
        self.etas_ms: dict[str, int] = {}
        # The last fetch took less than it had room for: the queue was empty at that moment,
        # and anything stored since brings a wake token, so the next take waits for one.
        self.drained = False

    def __next__(self) -> dramatiq.MessageProxy | None:
        # Only the "cache empty" branch of the stock __next__ changes: it waits on the wake
        # list instead of sleeping, in the same round trip as its fetch and the acks of what it
        # handed out before. With a message cached, the stock code pops and decodes it.
        try:
            if not self.message_cache:
                free_slots = self.prefetch - self.outstanding_message_count
                if free_slots <= 0:
                    time.sleep(FULL_PREFETCH_SLEEP_S)
                    return None
                wait_s = self.idle_wait_s() if self.drained else None
                self.message_cache = self.broker.take(
                    self.connect_blocking_client(), self.queue_name, free_slots, wait_s=wait_s
                )
                self.drained = len(self.message_cache) < free_slots
                if not self.drained:
                    # The queue may hold more than this consumer has room for, and the tokens
                    # that would wake another worker for them were just cleared.
                    self.broker.wake(self.queue_name)
                if not self.message_cache:
                    return None
        except redis.ConnectionError as e:
            raise ConnectionClosed(e) from None

        while True:
            try:
                message: dramatiq.MessageProxy | None = super().__next__()
                break
            except DecodeError as error:
                # Raised out of here it would restart the consumer, dropping the rest of the
                # cached batch while its ids stay in this live worker's acks set for good.
                self.dead_letter_undecodable(error)
                if not self.message_cache:
                    return None
        if message is not None and isinstance(message.options.get("eta"), int | float):
            self.etas_ms[message.message_id] = int(message.options["eta"])
        return message

    def ack(self, message: dramatiq.MessageProxy) -> None:
        """Acknowledged with this consumer's next round trip (its next take), not one of the
        worker thread's own: a round trip per message, and its wait, saved. Until then the
        message stays in this worker's acks set, so a worker killed meanwhile has it delivered
        again — which every actor here must bear anyway (at least once). An idle consumer
        takes again within a worker timeout, so an ack waits at most that long."""
        self.broker.defer_ack(self.queue_name, message.options["redis_message_id"])
        self.queued_message_ids.discard(message.message_id)

    def nack(self, message: dramatiq.MessageProxy) -> None:
        """A message given up on: kept in PostgreSQL first (the broker's `keep_dead_letter`),
        then taken off its queue. While the database is away the keeper raises ConnectionClosed
        and Dramatiq tries again, the message still in Redis; without a keeper (a broker that is
        not a worker's), Dramatiq's own dead-letter set in Redis takes it."""
        keep = self.broker.keep_dead_letter
        if keep is None:
            super().nack(message)
            return
        # The body as the queue holds it — what Dramatiq's own dead-letter set kept: its retries
        # are those done, and its traceback the last one a retry was sent with.
        try:
            queued = self.broker.client.hget(
                f"{self.broker.namespace}:{self.queue_name}.msgs", message.options["redis_message_id"]
            )
        except redis.ConnectionError as e:
            raise ConnectionClosed(e) from None
        keep(self.queue_name, message.message_id, queued if isinstance(queued, bytes) else message.encode())
        self.ack(message)

    def dead_letter_undecodable(self, error: DecodeError) -> None:
        """Move a fetched body that is not a message to the dead letters, raw bytes and all,
        out of this worker's acks set and the queue's messages, and report it."""
        data: bytes = error.data
        reason = undecodable_reason(error)
        # The fetch returns bodies without their ids. Rather than a fetch script of our own
        # returning both (dispatch.lua's fetch stays the one every consumer runs), the id is
        # looked up on this rare path: this worker's acks set for the queue holds at most
        # prefetch ids, so it is one SMEMBERS and one HMGET of a few bodies.
        try:
            redis_id = self.broker.fetched_id_holding(self.queue_name, data)
            if redis_id is not None and not self._kept(redis_id, data):
                # dispatch.lua's nack does the whole move: SREM from the acks set, HSET into
                # <q>.XQ.msgs with a timestamp in <q>.XQ, HDEL from <q>.msgs (from where the
                # dead letters are moved into PostgreSQL when next read).
                self.broker.do_nack(self.queue_name, redis_id)
        except redis.ConnectionError as e:
            raise ConnectionClosed(e) from None
        if redis_id is None:
            # Not ours any more: maintenance judged this worker dead and requeued its fetches,
            # so another fetch will meet the body again and dead-letter it then.
            logger.warning(
                "Skipped an undecodable message on %r (%d bytes) that this worker no longer holds: %s",
                self.queue_name,
                len(data),
                reason,
            )
            return
        logger.warning(
            "Dead-lettered undecodable message %s on %r (%d bytes): %s",
            redis_id,
            self.queue_name,
            len(data),
            reason,
        )
        with sentry_sdk.new_scope() as scope:
            scope.set_tag("dead_letter", "true")
            scope.set_tag("queue", self.queue_name)
            scope.set_context("dead_letter", {"redis_message_id": redis_id, "size_bytes": len(data)})
            sentry_sdk.capture_message(
                f"undecodable message dead-lettered on {self.queue_name}: {reason}", "error"
            )

    def idle_wait_s(self) -> float | None:
        """How long a take may wait for a wake token: the worker timeout, or until the earliest
        delayed message this consumer handed out is due (None: due now, do not wait)."""
        idle_s: float = self.timeout / 1000
        due_s = self.seconds_until_next_eta()
        if due_s is not None and due_s < idle_s:
            # Redis would overshoot a short timeout by up to a tick, so the last stretch
            # before an eta is slept here, where the clock is exact.
            if due_s <= REDIS_TICK_S:
                time.sleep(due_s)
                return None
            idle_s = due_s - REDIS_TICK_S
        client = self.connect_blocking_client()
        socket_timeout_s = client.connection_pool.connection_kwargs.get("socket_timeout")
        if socket_timeout_s:
            # A BLPOP longer than the socket timeout would fail as a dead connection.
            idle_s = min(idle_s, float(socket_timeout_s) / 2)
        return idle_s

    def seconds_until_next_eta(self) -> float | None:
        """Seconds until the earliest delayed message this consumer handed out is due, if any."""
        # Acks arrive on other threads and shrink queued_message_ids; etas of acked messages
        # are dropped here, on the consumer's own thread, so etas_ms needs no lock.
        for message_id in [m for m in self.etas_ms if m not in self.queued_message_ids]:
            del self.etas_ms[message_id]
        if not self.etas_ms:
            return None
        return max(0.0, (min(self.etas_ms.values()) - current_millis()) / 1000)

    def connect_blocking_client(self) -> redis.Redis:
        """This consumer's own connection (its own pool of one: a pipeline takes its connection
        from the pool, and this one blocks)."""
        if self.blocking_client is None:
            shared = self.broker.client.connection_pool
            pool: redis.ConnectionPool
            if isinstance(shared, SentinelConnectionPool):
                # Its own pool that asks the sentinels for the master, as the shared one does.
                options = {k: v for k, v in shared.connection_kwargs.items() if k != "connection_pool"}
                pool = SentinelConnectionPool(
                    shared.service_name,
                    shared.sentinel_manager,
                    connection_class=shared.connection_class,
                    **options,
                )
            else:
                pool = redis.ConnectionPool(
                    connection_class=shared.connection_class, **shared.connection_kwargs
                )
            self.blocking_client = redis.Redis(connection_pool=pool)
        return self.blocking_client

    def _kept(self, redis_id: str, data: bytes) -> bool:
        """Keep an undecodable body in PostgreSQL and take it off the queue; False when there is
        no keeper or the database is away (raising here would restart the consumer and strand
        the rest of its batch: Redis's dead-letter set holds it instead)."""
        keep = self.broker.keep_dead_letter
        if keep is None:
            return False
        try:
            keep(self.queue_name, redis_id, data)
        except ConnectionClosed:
            return False
        self.broker.do_ack(self.queue_name, redis_id)
        return True

    def requeue(self, messages: Iterable[dramatiq.MessageProxy]) -> None:
        """Put unacked messages back on the queue and wake whoever can take them now."""
        # A stopping worker hands its prefetched messages back; without a token, the other
        # idle workers would find them only after their timeout.
        messages = list(messages)
        super().requeue(messages)
        if messages:
            self.broker.wake(self.queue_name)

    def close(self) -> None:
        """Settle the acks still deferred, and close this consumer's connection."""
        try:
            self.broker.settle_acks(self.queue_name)
        except redis.RedisError:
            # Delivered again once this worker's heartbeat is old: at least once, as ever.
            logger.warning("Could not acknowledge processed messages of %r.", self.queue_name)
        if self.blocking_client is not None:
            self.blocking_client.connection_pool.disconnect()
            self.blocking_client = None


class StockRedisBroker(NumberingEnqueue, RedisBroker):
    """Dramatiq's own Redis broker and consumer (kept to compare against), with the numbering
    enqueue the gateway sends through (its wake tokens go unread, trimmed to a few)."""


def make_broker(
    redis_url: str | None,
    *,
    unix_socket_path: str | None = None,
    namespace: str = "switchboard",
    consumer: BrokerKind = "wake",
    heartbeat_timeout_ms: int = 5_000,
    maintenance_chance: int = 100_000,
    middleware: list[dramatiq.Middleware] | None = None,
) -> RedisBroker:
    """A Redis broker for Switchboard: the wake-up consumer, or the stock one to compare against.

    ``redis_url`` wins over ``unix_socket_path``; with neither, redis-py's default
    (localhost:6379) is used. ``middleware=None`` means Dramatiq's default middleware.
    """
    # A killed worker's unacked messages come back only after its heartbeat is this old
    # (stock: 60 s). Idle consumers heartbeat on every fetch, at least once per worker
    # timeout (1 s by default), so 5 s leaves room for a slow tick or two.
    # Maintenance (which does that requeue) runs on maintenance_chance per million dispatch
    # calls (stock: 1000, i.e. 0.1 %). Idle wake consumers make about one dispatch call per queue
    # per second, so at 10 % a dead worker's messages come back within seconds even when quiet.
    broker_class: type[RedisBroker]
    if consumer == "wake":
        broker_class = WakeRedisBroker
    elif consumer == "stock":
        broker_class = StockRedisBroker
    else:
        raise ValueError(f"unknown consumer kind {consumer!r}; expected 'wake' or 'stock'")

    connection: dict[str, Any] = {}
    if redis_url and parse_redis_address(redis_url).through_sentinels:
        # Dramatiq's broker takes any redis-py client: one whose pool asks the sentinels.
        connection["client"] = redis_client(redis_url)
    elif redis_url:
        connection["url"] = redis_url
    elif unix_socket_path:
        connection["unix_socket_path"] = unix_socket_path

    return broker_class(
        middleware=middleware,
        namespace=namespace,
        heartbeat_timeout=heartbeat_timeout_ms,
        maintenance_chance=maintenance_chance,
        **connection,
    )
