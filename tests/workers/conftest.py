from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from pipeline.platform.config import Settings
from pipeline.platform.names import control_queue
from switchboard.services import Services
from tests.support.calls import GATEWAY


@pytest.fixture(scope="session")
def worker_runtime(services: Services, namespace: str) -> Any:
    """This process's worker runtime (broker, database, publisher) on the test services."""
    from workers import runtime

    settings = Settings(broker_namespace=namespace, gateway_id=GATEWAY)
    rt = runtime.configure(settings, services.database_url, services.redis_url)
    import workers.actors  # noqa: F401

    return rt


@dataclass
class ControlInbox:
    """The test gateway's control list, read as the gateway reads it."""

    client: redis.Redis
    key: str

    def clear(self) -> None:
        self.client.delete(self.key)


@pytest.fixture
def control_inbox(services: Services, worker_runtime: Any) -> Iterator[ControlInbox]:
    """The test gateway's control list, emptied before and after the test."""
    client = redis.Redis.from_url(services.redis_url)
    inbox = ControlInbox(client, control_queue(worker_runtime.settings.broker_namespace, GATEWAY))
    inbox.clear()
    yield inbox
    inbox.clear()
    client.close()


def drain(inbox: ControlInbox) -> list[dict[str, Any]]:
    """Every batch to the gateway waiting in a control list, in order."""
    return [json.loads(raw) for raw in inbox.client.lpop(inbox.key, 10_000) or []]
