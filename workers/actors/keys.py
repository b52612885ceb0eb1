"""API keys: a key's identity, for the gateway to check a request's key against."""

from __future__ import annotations

from typing import Any

import dramatiq

from models import keys as api_keys
from pipeline.call.errors import KeyNotFound
from pipeline.platform.names import READS_QUEUE
from workers import runtime
from workers.actors.shared import REQUEST_POLICY, answer_read

_runtime = runtime.current()


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="key_identity", **REQUEST_POLICY)
def key_identity(request_id: str, gateway_id: str, key_id: str) -> None:
    """A live API key's name, role and secret digest, for the gateway to check a request's key
    against (404 for an unknown or revoked key)."""

    def look_up() -> tuple[int, dict[str, Any]]:
        record = api_keys.key_for(_runtime.settings.broker_namespace, key_id)
        if record is None:
            raise KeyNotFound(f"no key {key_id!r}")
        return 200, record

    answer_read(request_id, gateway_id, look_up)
