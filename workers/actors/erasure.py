"""Erasure, on request (a session, or a caller's number) and by retention."""

from __future__ import annotations

import time
from typing import Any

import dramatiq

from models import idempotency as idempotency_keys
from pipeline.platform.names import ADMISSION_QUEUE
from workers import erasure, runtime
from workers.actors.shared import REQUEST_POLICY, answer_request, sweeps

_runtime = runtime.current()


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="erase_session", **REQUEST_POLICY)
def erase_session(request_id: str, gateway_id: str, session_id: str, by: str) -> None:
    """Erase an ended session's content (404 unknown, 409 `session_live`): the database in one
    transaction under its row lock, then its Redis keys and messages. Safe to repeat."""
    settings = _runtime.settings

    def act() -> tuple[int, dict[str, Any]]:
        client = _runtime.broker.client
        return 200, erasure.erase(
            client,
            settings.broker_namespace,
            session_id,
            by=by,
            deployment_retention_days=settings.retention_days,
        )

    answer_request(request_id, gateway_id, act)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="erase_caller", **REQUEST_POLICY)
def erase_caller(request_id: str, gateway_id: str, number: str, by: str) -> None:
    """Erase every ended session whose phone call came from or went to `number` (422 for a
    number that is not E.164); the live ones are skipped and counted."""
    namespace = _runtime.settings.broker_namespace
    answer_request(
        request_id,
        gateway_id,
        lambda: (200, erasure.erase_number(_runtime.broker.client, namespace, number, by=by)),
    )


def sweep_retention() -> int:
    """Erase the ended sessions whose retention is over; answers how many. The idempotency
    keys past their day go in the same sweep."""
    settings = _runtime.settings
    idempotency_keys.sweep_expired(time.time())
    return erasure.sweep_retention(_runtime.broker.client, settings.broker_namespace, settings.retention_days)


sweeps.add(
    sweep_retention,
    erasure.RETENTION_SWEEP_INTERVAL_S,
    name="retention-sweeper",
    report="erased %d sessions whose retention was over",
)
