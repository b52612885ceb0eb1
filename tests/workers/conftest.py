from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection, Exchange, Queue

from pipeline.config import Settings
from pipeline.names import control_queue
from switchboard.services import Services
from tests.support.calls import GATEWAY


@pytest.fixture(scope="session")
def worker_runtime(services: Services, namespace: str) -> Any:
    """This process's worker runtime (broker, database, publisher) on the test services."""
    from workers import runtime

    settings = Settings(broker_namespace=namespace, gateway_id=GATEWAY)
    rt = runtime.configure(settings, services.database_url, services.redis_url, services.kombu_url)
    import workers.actors  # noqa: F401

    return rt


@pytest.fixture
def control_inbox(services: Services, worker_runtime: Any) -> Iterator[Any]:
    """The test gateway's control queue, emptied before the test."""
    name = control_queue(worker_runtime.settings.broker_namespace, GATEWAY)
    with Connection(services.kombu_url) as connection:
        queue = connection.SimpleQueue(Queue(name, exchange=Exchange("", type="direct"), routing_key=name))
        queue.clear()
        yield queue
        queue.clear()


def drain(queue: Any) -> list[dict[str, Any]]:
    """Every outbound batch waiting in a control queue, in order."""
    batches = []
    while True:
        try:
            message = queue.get(block=True, timeout=0.2)
        except queue.Empty:
            return batches
        batches.append(message.payload)
        message.ack()
