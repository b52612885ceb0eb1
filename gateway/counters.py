"""`GatewayCounters`: what the gateway counts of what it is sent and does: in its Prometheus
metrics (`gateway.metrics`) when they are on, and the webhooks refused before anything was
recorded, in Redis, shared by the deployment (`gateway.shared_counts`)."""

from __future__ import annotations

import asyncio
import logging

from gateway.metrics import GatewayMetrics
from gateway.shared_counts import SharedCounts

logger = logging.getLogger(__name__)


class GatewayCounters:
    """The gateway's counts; each is a no-op but for its log line while metrics are off."""

    def __init__(self, metrics: GatewayMetrics | None, shared: SharedCounts) -> None:
        self._metrics = metrics
        self._shared = shared

    def count_command(self, command: str, status: int) -> None:
        if self._metrics is not None:
            self._metrics.commands.labels(command, str(status)).inc()

    def count_webhook(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.webhooks.labels(outcome).inc()

    def count_heard(self, provider: str, waited_s: float) -> None:
        if self._metrics is not None:
            self._metrics.heard.labels(provider).observe(waited_s)

    def count_refused_webhook(self, code: str) -> None:
        """A delivery refused before anything was recorded (counted, not an incident: anyone
        can send one)."""
        self._shared.increment(f"webhooks_refused:{code}")
        self.count_webhook(code)

    async def refused_webhooks(self) -> dict[str, int]:
        """The deliveries refused by every gateway of the deployment, by `webhook_<code>`."""
        counts = await asyncio.wrap_future(self._shared.counters("webhooks_refused:"))
        return {f"webhook_{code}": count for code, count in counts.items()}

    def refused_handshake(self, reason: str, path: str, client: str) -> None:
        """A live-stream handshake refused (by the server for its size, or by the API for its
        credentials): counted, and logged once at INFO — anyone can send one, so it is never an
        error. The path is logged without its query, which may hold a token."""
        logger.info("live stream handshake refused (%s): %s from %s", reason, path, client)
        if self._metrics is not None:
            self._metrics.refused_handshakes.labels(reason).inc()
