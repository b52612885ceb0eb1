"""Fault tests: real processes, a fault injected, and the figure each one measures — printed at
the end of the run (pytest's terminal summary, tests/conftest.py), so every run of the suite
reports them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import FIGURE
from tests.faults.servers import PrivatePostgres, PrivateRedis


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Report one measured figure of this fault test."""
    return lambda text: request.node.user_properties.append((FIGURE, text))


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrivatePostgres, PrivateRedis]]:
    """A PostgreSQL and a Redis of the test module's own, to restart or stop without disturbing
    the rest of the suite."""
    root = tmp_path_factory.mktemp("private")
    postgres = PrivatePostgres(root)
    redis_server = PrivateRedis(Path(root) / "redis")
    try:
        yield postgres, redis_server
    finally:
        redis_server.stop()
        postgres.stop()
