"""Shared fixtures: real PostgreSQL and Redis (local ones, or embedded ones started for the
run), a migrated test database, and a Dramatiq namespace of the run's own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import redis
from hypothesis import HealthCheck, settings

from pipeline.privacy.sealing import DeploymentKey
from switchboard.services import (
    LOCAL_POSTGRES,
    MAINTENANCE_DATABASE,
    PROBE_CONNECT_TIMEOUT_S,
    Services,
    postgres_url,
    resolve_services,
)

ROOT = Path(__file__).resolve().parent.parent
TEST_DATABASE = "switchboard_test"
# Taken out of the environment as the suite starts: the processes the tests start take every
# SWITCHBOARD_* variable for a setting, and refuse one they do not know.
TEST_DATABASE_URL = os.environ.pop("SWITCHBOARD_TEST_DATABASE_URL", None)
TEST_REDIS_URL = os.environ.pop("SWITCHBOARD_TEST_REDIS_URL", None)
# Every process the tests start (a stack's, a CLI run's) needs a deployment key, and a database
# is configured, so none would be generated: the run makes one of its own, unless one is set.
os.environ.setdefault("SWITCHBOARD_DATA_KEY", DeploymentKey.generate().text)

# Hypothesis's timing checks (a 200 ms deadline per example, "input generation is slow") are
# timed assertions: in a parallel run on a loaded 2-core machine they fail a property that holds.
# What the properties assert stays; how fast they run is the benchmarks' business.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


# The suite runs in this many processes (`-n auto`), fewer when the PostgreSQL they share would
# run out of connections: a process holds up to about 35 at its busiest (a fault test's workers
# beside a module's stack; 105 at the peak of a three-process run), and a PostgreSQL installed
# with its defaults allows 100.
MOST_PROCESSES = 3
CONNECTIONS_PER_PROCESS = 40


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many processes `-n auto` starts: as many as the shared PostgreSQL has connections
    for, at most MOST_PROCESSES (each has embedded servers of its own when none answers)."""
    allowed = _connections_allowed(TEST_DATABASE_URL or postgres_url(MAINTENANCE_DATABASE, *LOCAL_POSTGRES))
    if allowed is None:
        return MOST_PROCESSES
    return max(1, min(MOST_PROCESSES, allowed // CONNECTIONS_PER_PROCESS))


def _connections_allowed(url: str) -> int | None:
    """The connections the PostgreSQL at `url` allows clients; None when none answers there."""
    try:
        connection = psycopg2.connect(url, connect_timeout=PROBE_CONNECT_TIMEOUT_S)
    except psycopg2.OperationalError:
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('max_connections')::int"
                " - current_setting('superuser_reserved_connections')::int"
            )
            row = cursor.fetchone()
    finally:
        connection.close()
    return int(row[0]) if row else None


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    """PostgreSQL and Redis for the whole run, the test database migrated."""
    # Each process of a parallel run (pytest-xdist's workers) has a database of its own on the
    # local PostgreSQL (no test sees another process's rows, whatever namespace it reads), and
    # embedded servers of its own when no local ones answer.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    found = resolve_services(
        TEST_DATABASE_URL,
        TEST_REDIS_URL,
        ROOT / ".switchboard" / (f"test-{worker}" if worker else "test"),
        database_name=f"{TEST_DATABASE}_{worker}" if worker else TEST_DATABASE,
        log=lambda message: print(f"services: {message}"),
    )
    from models.db import connect
    from models.migrate import migrate

    migrate(connect(found.database_url))
    yield found
    found.stop()


@pytest.fixture(scope="session")
def namespace(services: Services) -> Iterator[str]:
    """A broker namespace for this run; its Redis keys are deleted afterwards."""
    name = f"sbtest-{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(services.redis_url)
    keys = list(client.scan_iter(f"{name}*"))
    if keys:
        client.delete(*keys)
    client.close()


# A fault test's measured figure (tests/faults), kept with its report (`user_properties`), which
# a parallel run's workers send to the process that prints the summary.
FIGURE = "fault_figure"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The fault tests' figures, at the end of every run that measured any."""
    figures = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == FIGURE
    ]
    if figures:
        terminalreporter.section("fault figures")
        for line in figures:
            terminalreporter.write_line(line)
