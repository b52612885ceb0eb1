"""The `python -m simulator` entry point."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
# A bound on a start that failed, not a speed: about 1 s idle (the openai types' import), and
# several times that on a loaded 2-core machine running the suite in parallel.
STARTUP_TIMEOUT_S = 30


def test_cli_announces_readiness_and_stops_on_sigterm() -> None:
    """The CLI prints one ready line with both URLs and exits 0 on SIGTERM."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simulator",
            "--http-port",
            "0",
            "--ws-port",
            "0",
            "--script",
            "three_turn",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        readable, _, _ = select.select([process.stdout], [], [], STARTUP_TIMEOUT_S)
        assert readable, "the simulator never announced readiness"
        ready = process.stdout.readline()
        assert ready.startswith("simulator ready http=http://127.0.0.1:")
        assert " ws=ws://127.0.0.1:" in ready and ready.rstrip().endswith("/v1")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=STARTUP_TIMEOUT_S) == 0
    finally:
        process.kill()
        process.wait()
