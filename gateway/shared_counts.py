"""`SharedCounts`: what every gateway of a deployment counts and claims together, in Redis, on
the event sink's thread (`gateway.sink_thread.SinkThread`), so the event loop never waits on it."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future

import redis

from gateway.sink_thread import SinkThread

logger = logging.getLogger(__name__)

# How long a carried-out directive is remembered: far longer than a batch is ever redelivered.
DIRECTIVE_MEMORY_S = 86_400


class SharedCounts:
    """Rates, counters and directive claims shared by the gateways of one namespace."""

    def __init__(self, client: redis.Redis, executor: SinkThread, gateway_id: str, namespace: str) -> None:
        self._redis = client
        self._executor = executor
        self._gateway_id = gateway_id
        self._namespace = namespace

    def within_rate(self, session_id: str, kind: str, per_minute: int) -> Future[bool]:
        """Count one use of `kind` for the session in the current minute (shared by every
        gateway through Redis); answers whether it is within `per_minute`."""

        def count() -> bool:
            key = f"{self._namespace}:rate:{kind}:{session_id}:{int(time.time() // 60)}"
            pipeline = self._redis.pipeline()
            pipeline.incr(key)
            pipeline.expire(key, 120)
            used, _ = pipeline.execute()
            return int(used) <= per_minute

        return self._executor.submit(count)

    def increment(self, counter: str) -> None:
        """Count one of something, shared by every gateway of the deployment (best effort)."""

        def count() -> None:
            try:
                self._redis.incr(f"{self._namespace}:count:{counter}")
            except redis.RedisError:
                logger.warning("could not count %s", counter)

        self._executor.call(count)

    def counters(self, prefix: str) -> Future[dict[str, int]]:
        """The counters whose names start with `prefix`, by the rest of their names."""

        def read() -> dict[str, int]:
            start = f"{self._namespace}:count:{prefix}"
            keys = list(self._redis.scan_iter(match=f"{start}*", count=100))
            values = self._redis.mget(keys) if keys else []
            return {
                key.decode()[len(start) :]: int(value or 0) for key, value in zip(keys, values, strict=True)
            }

        return self._executor.submit(read)

    def first_time(self, session_id: str, directive_id: str) -> Future[bool]:
        """Whether this directive is carried out for the first time by any gateway (a batch is
        published again after a worker crash; a transfer must be asked of the provider once)."""

        def claim() -> bool:
            key = f"{self._namespace}:directive:{session_id}:{directive_id}"
            return bool(self._redis.set(key, self._gateway_id, nx=True, ex=DIRECTIVE_MEMORY_S))

        return self._executor.submit(claim)
