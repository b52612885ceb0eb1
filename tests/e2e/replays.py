"""Running `switchboard replay` and `sessions export` from the e2e tests: each replay its own
stack, several side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from switchboard.services import Services

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"


def switchboard_env(services: Services, env: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **os.environ,
        # Replays run side by side, each its own stack: a worker of 8 threads holds up to 8 of
        # PostgreSQL's 100 connections, and one call needs 2.
        "SWITCHBOARD_WORKER_THREADS": "2",
        **(env or {}),
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
    }


def replay(
    services: Services, recording: Path, speed: str, *flags: str, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """What `switchboard replay RECORDING --json --speed SPEED` printed: the controls, then the
    summary line (it must exit 0)."""
    finished = subprocess.run(
        [sys.executable, "-m", "switchboard", "replay", str(recording), "--json", "--speed", speed, *flags],
        env=switchboard_env(services, env),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    return [json.loads(line) for line in finished.stdout.splitlines()]


def export(services: Services, session_id: str, into: Path) -> Path:
    """The stored session written as a recording (`switchboard sessions export`) into `into`."""
    exported = subprocess.run(
        [sys.executable, "-m", "switchboard", "sessions", "export", session_id],
        env=switchboard_env(services),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    into.write_text(exported.stdout)
    return into


def without_ids(controls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: value for key, value in control.items() if key != "event_id"} for control in controls]


def side_by_side(replays: dict[Any, Callable[[], Any]], at_once: int | None = None) -> dict[Any, Any]:
    """Each replay in its own thread, all at once or `at_once` at a time (each its own stack,
    which holds PostgreSQL connections of a server other runs share): what each gave; one that
    failed is missing, and its failure printed."""
    printed: dict[Any, Any] = {}
    turns = threading.Semaphore(at_once or len(replays) or 1)

    def run(key: Any) -> None:
        with turns:
            printed[key] = replays[key]()

    threads = [threading.Thread(target=run, args=(key,)) for key in replays]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    return printed
