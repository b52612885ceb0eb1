"""`emit`: the only path from a worker back to a gateway — each gateway's control list in Redis.

A batch is one `RPUSH` of its JSON onto the owning gateway's list (`pipeline.platform.names.control_queue`),
which the gateway pops in bursts (`gateway.controls`). Until issue 15 this was a kombu
`SimpleQueue`; measured on this machine, kombu's publish cost a worker 123 µs of CPU per batch
against 63 µs for the push (the batch's JSON included in both), and its consumer 98 µs per batch
against about 4 µs for a burst pop — about 150 µs per controlled event over the two processes,
for nothing the path uses: the list is addressed by name, no exchange routes it, and a batch is
taken without acknowledgement either way.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import redis

from pipeline.platform.envelope import ToGateway, ToGatewayItem
from pipeline.platform.names import control_queue
from workers.redis_clients import redis_pool

_UNTRACED = {"traceparent"}


class ControlPublisher:
    """Publishes batches to gateways' control lists, on a connection per thread (each of
    Dramatiq's worker threads opens its own when it boots, not on its first event of a call)."""

    def __init__(self, redis_url: str, namespace: str) -> None:
        self._pool = redis_pool(redis_url)
        self._namespace = namespace
        self._local = threading.local()

    def publish(
        self,
        gateway_id: str,
        session_id: str,
        generation: int,
        items: Sequence[ToGatewayItem],
        applied_seq: int | None = None,
        *,
        traceparent: str | None = None,
    ) -> None:
        if not items:
            return
        batch = ToGateway(
            session_id=session_id,
            generation=generation,
            items=tuple(items),
            applied_seq=applied_seq,
            traceparent=traceparent,
        )
        # A publish that fails raises, and the transaction it belongs to rolls back and is
        # retried: a batch published twice is harmless (the gateway sends each control id once).
        # A batch without a trace context carries no null for one.
        body = batch.model_dump_json(exclude=_UNTRACED if traceparent is None else None)
        self._client().rpush(control_queue(self._namespace, gateway_id), body)

    def warm(self) -> None:
        """Open this thread's connection now rather than on its first publish."""
        self._client().ping()

    def _client(self) -> redis.Redis:
        client: redis.Redis | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = redis.Redis(
                connection_pool=self._pool, single_connection_client=True
            )
        return client

    def close(self) -> None:
        client = getattr(self._local, "client", None)
        if client is not None:
            client.close()
            self._local.client = None
