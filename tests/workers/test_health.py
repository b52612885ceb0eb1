"""A worker's probes (workers/health.py), served on a real port: ready only while Redis and a
PostgreSQL primary answer and the worker is not draining, each refusal saying why."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from models.db import database_answers
from workers.health import WorkerHealth


class Reachable:
    def __init__(self) -> None:
        self.redis = True

    def __call__(self) -> bool:
        return self.redis


@pytest.fixture
def probes(worker_runtime: Any) -> Iterator[tuple[WorkerHealth, Reachable, int]]:
    redis_up = Reachable()
    health = WorkerHealth(redis_up, database_answers)
    port = health.serve("127.0.0.1", 0)
    try:
        yield health, redis_up, port
    finally:
        health.stop()


def _get(port: int, path: str) -> tuple[int, dict[str, Any], str | None]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, json.loads(answer.read()), answer.headers.get("Retry-After")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), error.headers.get("Retry-After")


def test_ready_while_redis_and_the_database_answer_and_not_once_draining(
    probes: tuple[WorkerHealth, Reachable, int],
) -> None:
    health, redis_up, port = probes
    assert _get(port, "/readyz") == (200, {"status": "ready"}, None)
    redis_up.redis = False
    assert _get(port, "/readyz") == (503, {"status": "redis_unreachable"}, "1")
    assert _get(port, "/healthz")[:2] == (200, {"status": "ok"})  # alive all the same
    redis_up.redis = True
    assert _get(port, "/readyz")[0] == 200
    health.drain()
    assert _get(port, "/readyz") == (503, {"status": "draining"}, "1")
    assert _get(port, "/healthz")[:2] == (200, {"status": "ok"})
    assert _get(port, "/metrics")[:2] == (
        404,
        {"error": {"code": "not_found", "message": "no route /metrics"}},
    )
