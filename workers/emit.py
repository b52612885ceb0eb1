"""`emit`: the only path from a worker back to a gateway — one kombu queue per gateway."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kombu import Connection, Exchange, Producer  # type: ignore[attr-defined]
from kombu.transport import redis as kombu_redis

from pipeline.envelope import Outbound, OutboundBatch
from pipeline.names import control_queue

# The anonymous (default) exchange routes by queue name.
_DIRECT = Exchange("", type="direct")


class _PublishingChannel(kombu_redis.Channel):
    """kombu's Redis channel builds a new redis-py client for every publish (a third of a
    millisecond with redis-py 8); a publishing channel keeps one per channel instead."""

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client is not None:
            yield client
            return
        cached = self.__dict__.get("_publish_client")
        if cached is None:
            cached = self.__dict__["_publish_client"] = self._create_client()
        yield cached


class _PublishingTransport(kombu_redis.Transport):
    Channel = _PublishingChannel


class ControlPublisher:
    """Publishes outbound batches to gateways' control queues, one connection per thread
    (Dramatiq runs actors on several threads, and a kombu channel is not thread-safe)."""

    def __init__(self, url: str, namespace: str) -> None:
        self._url = url
        self._namespace = namespace
        self._local = threading.local()

    def publish(
        self,
        gateway_id: str,
        session_id: str,
        generation: int,
        items: Sequence[Outbound],
        applied_seq: int | None = None,
    ) -> None:
        if not items:
            return
        batch = OutboundBatch(
            session_id=session_id, generation=generation, items=tuple(items), applied_seq=applied_seq
        )
        # The anonymous exchange delivers straight to the list named by the routing key, so
        # nothing is declared here: the gateway declares its own queue when it starts.
        self._producer().publish(
            batch.model_dump(mode="json"),
            exchange=_DIRECT,
            routing_key=control_queue(self._namespace, gateway_id),
            serializer="json",
            retry=True,
            retry_policy={"max_retries": 3, "interval_start": 0.05, "interval_step": 0.1},
        )

    def warm(self) -> None:
        """Open this thread's connection now rather than on its first publish."""
        self._producer().channel.client.ping()

    def _producer(self) -> Producer:
        local = self._local
        if getattr(local, "producer", None) is None:
            local.connection = Connection(self._url, transport=_PublishingTransport)
            local.producer = Producer(local.connection.channel())
        producer: Producer = local.producer
        return producer

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.release()
            self._local.producer = None
