"""Settings are checked before anything starts: a URL that is not one, a database that refuses or
does not exist, a Redis that does not answer stop `switchboard gateway`, `switchboard worker`
and the database verbs with one line naming the variable (exit 2); and a running worker whose
Redis goes away says so once, and once when it is back."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from switchboard.services import Services
from tests.faults.servers import PrivateRedis

ROOT = Path(__file__).resolve().parent.parent
# Start-up stops within this when the settings are wrong (a probe is a second at most).
EXIT_TIMEOUT_S = 60
# A worker against a working PostgreSQL and Redis is ready within this.
READY_TIMEOUT_S = 60
# Dramatiq's consumers log a connection error, then retry 3 s later: an outage this long would
# have logged their lines for every queue, and again.
OUTAGE_S = 4.0


def _free_port() -> int:
    """A loopback port nobody listens on (bound once by the kernel's choice, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(**settings: str) -> dict[str, str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("SWITCHBOARD_")}
    environment["SWITCHBOARD_DATA_KEY"] = os.environ["SWITCHBOARD_DATA_KEY"]
    environment["SWITCHBOARD_METRICS"] = "false"
    environment.update(settings)
    return environment


def _switchboard(environment: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", *arguments],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
        check=False,
    )


def _missing_database(services: Services) -> str:
    """The test database's URL with a database name nobody made."""
    parts = urlsplit(services.database_url)
    return urlunsplit(parts._replace(path=f"/switchboard_missing_{uuid.uuid4().hex[:12]}"))


BROKEN = {
    "not a url": ("SWITCHBOARD_DATABASE_URL", lambda _services: "notaurl", "must be a PostgreSQL URL"),
    "refused port": (
        "SWITCHBOARD_DATABASE_URL",
        lambda _services: f"postgresql://postgres@127.0.0.1:{_free_port()}/switchboard",
        "Connection refused",
    ),
    "missing database": ("SWITCHBOARD_DATABASE_URL", _missing_database, "does not exist"),
    "redis not a url": ("SWITCHBOARD_REDIS_URL", lambda _services: "http://x", "must be a Redis URL"),
    "redis refused": (
        "SWITCHBOARD_REDIS_URL",
        lambda _services: f"redis://127.0.0.1:{_free_port()}/0",
        "Connection refused",
    ),
}


@pytest.mark.parametrize(
    ("command", "broken"),
    [(("worker",), broken) for broken in sorted(BROKEN)]
    + [(("keys", "list"), "not a url"), (("keys", "list"), "missing database")]
    # `make demo` on a database nobody made (it died with a traceback from the migration).
    + [(("demo",), "missing database"), (("demo",), "refused port")],
)
def test_a_broken_setting_stops_the_start_with_one_line_naming_it(
    services: Services, command: tuple[str, ...], broken: str
) -> None:
    variable, value, what = BROKEN[broken]
    environment = _environment(
        SWITCHBOARD_DATABASE_URL=services.database_url, SWITCHBOARD_REDIS_URL=services.redis_url
    )
    environment[variable] = value(services)
    finished = _switchboard(environment, *command)
    assert finished.returncode == 2, finished.stdout + finished.stderr
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert lines[0].startswith(f"switchboard: {variable}: ") and what in lines[0]
    assert "ready" not in finished.stdout


@pytest.mark.parametrize("broken", ["redis not a url", "redis refused"])
def test_the_gateway_stops_when_its_redis_is_broken(services: Services, broken: str) -> None:
    variable, value, what = BROKEN[broken]
    environment = _environment(SWITCHBOARD_REDIS_URL=value(services))
    finished = _switchboard(environment, "gateway", "--port", "0")
    assert finished.returncode == 2, finished.stdout + finished.stderr
    assert finished.stderr.strip().splitlines() == [finished.stderr.strip()]
    assert finished.stderr.startswith(f"switchboard: {variable}: ") and what in finished.stderr
    assert "gateway ready" not in finished.stdout


@pytest.fixture
def throwaway_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path / "redis")
    yield server
    server.stop()


def test_a_worker_says_once_that_redis_went_away_and_once_that_it_is_back(
    services: Services, throwaway_redis: PrivateRedis, tmp_path: Path
) -> None:
    environment = _environment(
        SWITCHBOARD_DATABASE_URL=services.database_url,
        SWITCHBOARD_REDIS_URL=throwaway_redis.url,
        SWITCHBOARD_BROKER_NAMESPACE=f"sbtest-watch-{uuid.uuid4().hex[:8]}",
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "switchboard", "worker", "--queues", "reads"],
        env=environment,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            lines.append(line)
            if "worker ready" in line:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(READY_TIMEOUT_S), "".join(lines)
        # The consumer threads boot just after "ready"; the outage is to find them running.
        time.sleep(1.0)
        throwaway_redis.restart(down_s=OUTAGE_S)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not any("redis reachable again" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        worker.terminate()
        worker.wait(EXIT_TIMEOUT_S)
        reader.join(EXIT_TIMEOUT_S)
    log = "".join(lines)
    # The fault happened: the worker saw Redis go away.
    assert [line for line in lines if "redis unreachable (SWITCHBOARD_REDIS_URL)" in line], log
    assert len([line for line in lines if "redis unreachable" in line]) == 1, log
    assert len([line for line in lines if "redis reachable again" in line]) == 1, log
    assert "Consumer encountered a connection error" not in log
    assert "Restarting consumer" not in log
    assert worker.returncode == 0, log
