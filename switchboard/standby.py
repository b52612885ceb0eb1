"""A PostgreSQL primary with a streaming standby, on private TCP ports in a folder of its own:
the topology of docs/scaling.md ("PostgreSQL with a standby"), started from the PostgreSQL 16
that pgserver installs with the package. `python -m bench.replication` times the hot path with
the standby synchronous and asynchronous, then kills the primary and promotes the standby under
the running processes.

The standby is made as an operator makes one: `pg_basebackup -R` (a copy of the primary that
follows it), started, and promoted with `pg_ctl promote`."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg2

from switchboard.services import POSTGRES_USER, ensure_database, import_pgserver

# pgserver's binaries refuse to run as root, and so does PostgreSQL: as root, they run as this
# user (pgserver creates it).
_SYSTEM_USER = "pgserver"


class PostgresPair:
    """A primary and its standby. `synchronous`: a commit returns once the standby has it on
    disk (`synchronous_standby_names = '*'`), so a failover loses no committed transaction;
    otherwise replication is asynchronous and a failover may lose the primary's last commits."""

    def __init__(self, root: Path, *, synchronous: bool, database: str = "switchboard") -> None:
        pgserver = import_pgserver()
        initdb, pg_basebackup = pgserver.initdb, pgserver.pg_basebackup
        self.synchronous = synchronous
        self._root = root
        self._user = _prepare(root)
        self.primary_dir = root / "primary"
        self.standby_dir = root / "standby"
        self.primary_port, self.standby_port = _free_port(), _free_port()
        initdb(
            ["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", POSTGRES_USER],
            pgdata=self.primary_dir,
            user=self._user,
        )
        _append(
            self.primary_dir / "postgresql.conf",
            port=self.primary_port,
            listen_addresses="'127.0.0.1'",
            unix_socket_directories="''",
            wal_level="replica",
        )
        self._pg_ctl(self.primary_dir, "start")
        ensure_database(self.server_url(self.primary_port), database)
        pg_basebackup(
            [
                "-h", "127.0.0.1", "-p", str(self.primary_port), "-U", POSTGRES_USER,
                "-D", str(self.standby_dir), "-R", "-X", "stream", "-c", "fast",
            ],
            user=self._user,
            timeout=120,
        )  # fmt: skip
        _append(self.standby_dir / "postgresql.conf", port=self.standby_port)
        self._pg_ctl(self.standby_dir, "start")
        # Only now: with a synchronous standby named and none connected, every commit (the
        # CREATE DATABASE above, the base backup's) would wait for ever.
        self.set_synchronous(synchronous)
        self.url = (
            f"postgresql://{POSTGRES_USER}@127.0.0.1:{self.primary_port},127.0.0.1:{self.standby_port}"
            f"/{database}?target_session_attrs=read-write"
        )

    def server_url(self, port: int, database: str = "postgres") -> str:
        return f"postgresql://{POSTGRES_USER}@127.0.0.1:{port}/{database}"

    def set_synchronous(self, synchronous: bool) -> None:
        """Make the standby synchronous or asynchronous (a reload: no connection is cut)."""
        names = "'*'" if synchronous else "''"
        with _connect(self.server_url(self.primary_port)) as cursor:
            cursor.execute(f"ALTER SYSTEM SET synchronous_standby_names = {names}")
            cursor.execute("SELECT pg_reload_conf()")
        self.synchronous = synchronous
        self._wait_streaming()

    def kill_primary(self) -> None:
        """kill -9 the primary's postmaster and every backend: a crash, nothing flushed or said."""
        pid = int((self.primary_dir / "postmaster.pid").read_text().split()[0])
        postmaster = psutil.Process(pid)
        processes = [postmaster, *postmaster.children(recursive=True)]
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(processes, timeout=10)

    def hold_replication(self) -> None:
        """Freeze the primary's WAL sender (SIGSTOP): from now on the standby receives nothing,
        as when the link to it stalls. Asynchronous: the primary goes on committing what the
        standby will never have. Synchronous: every commit waits for the standby, so none
        returns. `kill_primary` ends the frozen sender with the rest."""
        pid = int((self.primary_dir / "postmaster.pid").read_text().split()[0])
        senders = [
            child
            for child in psutil.Process(pid).children()
            if any("walsender" in part for part in child.cmdline())
        ]
        if not senders:
            raise RuntimeError("the primary has no WAL sender: the standby is not streaming")
        for sender in senders:
            sender.suspend()

    def promote(self) -> float:
        """`pg_ctl promote` the standby; answers the seconds until it takes writes."""
        started = time.monotonic()
        self._pg_ctl(self.standby_dir, "promote")
        deadline = started + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg2.Error), _connect(self.server_url(self.standby_port)) as cursor:
                cursor.execute("SELECT pg_is_in_recovery()")
                if cursor.fetchone() == (False,):
                    return time.monotonic() - started
            time.sleep(0.05)
        raise RuntimeError("the promoted standby never took writes")

    def stop(self) -> None:
        for pgdata in (self.standby_dir, self.primary_dir):
            if (pgdata / "postmaster.pid").exists():
                with contextlib.suppress(Exception):
                    self._pg_ctl(pgdata, "stop", "-m", "immediate")

    def _pg_ctl(self, pgdata: Path, *arguments: str) -> None:
        import_pgserver().pg_ctl(
            ["-w", "-l", str(pgdata.parent / f"{pgdata.name}.log"), *arguments],
            pgdata=pgdata,
            user=self._user,
            timeout=60,
        )

    def _wait_streaming(self) -> None:
        wanted = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with _connect(self.server_url(self.primary_port)) as cursor:
                cursor.execute("SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'")
                if cursor.fetchone() == (wanted,):
                    return
            time.sleep(0.05)
        raise RuntimeError(f"the standby never streamed ({wanted})")


@contextlib.contextmanager
def _connect(url: str) -> Any:
    connection = psycopg2.connect(url, connect_timeout=3)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            yield cursor
    finally:
        connection.close()


def _prepare(root: Path) -> str | None:
    """The folder, readable by the user the servers run as (root: pgserver's own user)."""
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return None
    import pwd

    import_pgserver()
    from pgserver.utils import ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(_SYSTEM_USER)
    ensure_prefix_permissions(root)
    entry = pwd.getpwnam(_SYSTEM_USER)
    os.chown(root, entry.pw_uid, entry.pw_gid)
    return _SYSTEM_USER


def _append(path: Path, **settings: object) -> None:
    """Settings at the end of a postgresql.conf: the last of a name wins."""
    with path.open("a") as conf:
        for name, value in settings.items():
            conf.write(f"{name} = {value}\n")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
