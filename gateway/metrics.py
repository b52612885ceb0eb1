"""The gateway's metrics, served on its API port at `/metrics` (any reading key), in the
Prometheus text format: the calls it holds, the operators' commands and the provider's
webhooks it took, and — read from Redis when scraped — each queue's depth and lag and the dead
letters, which no single worker sees."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import redis
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gateway.redis_clients import redis_client
from pipeline.model_catalog.choice import WARN_WITHIN_DAYS
from pipeline.model_catalog.entries import Catalog
from pipeline.platform.names import QUEUES, dead_letter_counts_key

# A caller hears an answer in half a second to a few seconds; past 1.5 s it feels slow.
HEARD_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)


class GatewayMetrics:
    def __init__(
        self,
        gateway_id: str,
        calls_in_progress: Callable[[], dict[str, int]],
        redis_url: str,
        namespace: str,
        catalog: Catalog | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        # The gateway is one process: its own CPU, memory and descriptors (process_*).
        ProcessCollector(registry=self.registry)
        self.registry.register(_CallsInProgress(gateway_id, calls_in_progress))
        self.commands = Counter(
            "switchboard_commands_total",
            "Commands the app and supervisors sent, by command and answer status.",
            ["command", "status"],
            registry=self.registry,
        )
        self.webhooks = Counter(
            "switchboard_webhook_deliveries_total",
            "The provider's webhook deliveries, by what became of them.",
            ["outcome"],
            registry=self.registry,
        )
        # Anyone can open the live stream's handshake: a refusal is counted, not an error.
        self.refused_handshakes = Counter(
            "switchboard_live_handshakes_refused_total",
            "Live-stream (watchers') WebSocket handshakes refused, by reason.",
            ["reason"],
            registry=self.registry,
        )
        # Counted here, where the sideband saw both ends of the wait: once per answer, which no
        # worker's retry can repeat (docs/operations.md).
        self.heard = Histogram(
            "switchboard_turn_heard_latency_seconds",
            "From the end of the caller's speech to the first audio of the answer, by provider.",
            ["provider"],
            buckets=HEARD_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Queues(redis_url, namespace))
        if catalog is not None:
            self.registry.register(_ModelsRetiring(catalog))


class _ModelsRetiring(Collector):
    """The catalog's models that shut down within WARN_WITHIN_DAYS: the days left (0 or less
    once shut down), read when scraped, so the count goes down day by day without a restart."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def collect(self) -> Iterator[GaugeMetricFamily]:
        retiring = GaugeMetricFamily(
            "switchboard_model_retiring",
            f"Days until the provider shuts the model down, for models within {WARN_WITHIN_DAYS} days of it.",
            labels=["model"],
        )
        today = datetime.now(UTC).date()
        for entry in self._catalog.retiring(today, WARN_WITHIN_DAYS):
            assert entry.shutdown_date is not None
            retiring.add_metric([entry.id], float((entry.shutdown_date - today).days))
        yield retiring


class _CallsInProgress(Collector):
    """The calls whose sideband this gateway holds, by route (read when scraped)."""

    def __init__(self, gateway_id: str, by_route: Callable[[], dict[str, int]]) -> None:
        self._gateway_id = gateway_id
        self._by_route = by_route

    def collect(self) -> Iterator[GaugeMetricFamily]:
        live = GaugeMetricFamily(
            "switchboard_live_calls", "Calls whose sideband this gateway holds.", labels=["gateway", "route"]
        )
        counted = self._by_route() or {"": 0}
        for route, count in counted.items():
            live.add_metric([self._gateway_id, route], float(count))
        yield live


class _Queues(Collector):
    """Each queue's depth (messages waiting), lag (the oldest's age) and dead letters."""

    def __init__(self, redis_url: str, namespace: str) -> None:
        self._redis = redis_client(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self._namespace = namespace

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily("switchboard_queue_depth", "Messages waiting in a queue.", labels=["queue"])
        lag = GaugeMetricFamily(
            "switchboard_queue_lag_seconds",
            "How long the oldest waiting message has waited.",
            labels=["queue"],
        )
        dead = GaugeMetricFamily("switchboard_dead_letters", "Dead letters kept, by queue.", labels=["queue"])
        try:
            kept = self._redis.hgetall(dead_letter_counts_key(self._namespace))
            for queue in QUEUES:
                key = f"{self._namespace}:{queue}"
                pipe = self._redis.pipeline()
                pipe.llen(key)
                pipe.lindex(key, 0)
                pipe.hlen(f"{key}.XQ.msgs")
                waiting, oldest, unmoved = pipe.execute()
                depth.add_metric([queue], float(waiting))
                # Kept in PostgreSQL (the workers publish the counts), and any still in Redis's
                # own dead-letter set (a body the consumer could not decode while PostgreSQL was
                # away, or left by an older release) until a reading moves them.
                dead.add_metric([queue], float(int(kept.get(queue.encode(), 0)) + unmoved))
                lag.add_metric([queue], self._age(key, oldest))
        except redis.RedisError:
            return  # Redis away: these are unknown now, not zero
        yield depth
        yield lag
        yield dead

    def _age(self, key: str, message_id: Any) -> float:
        if message_id is None:
            return 0.0
        body = self._redis.hget(f"{key}.msgs", message_id)
        try:
            stamp = json.loads(body)["message_timestamp"] if body else None
        except (ValueError, KeyError, TypeError):
            return 0.0
        return max(time.time() - stamp / 1000, 0.0) if isinstance(stamp, int | float) else 0.0
