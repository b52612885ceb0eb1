"""`switchboard replay`: a shipped recording through the real gateway path, queues, workers
and PostgreSQL, with the same controls on every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from simulator.oracle import wire_errors
from switchboard.services import Services

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"


def _replay(services: Services, recording: Path, speed: str) -> list[dict[str, Any]]:
    env = {
        **os.environ,
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
    }
    finished = subprocess.run(
        [sys.executable, "-m", "switchboard", "replay", str(recording), "--json", "--speed", speed],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    return [json.loads(line) for line in finished.stdout.splitlines()]


def test_replaying_a_recording_prints_its_golden_controls_and_summary_on_every_run(
    services: Services,
) -> None:
    """Two replays (recorded timing and as fast as possible) print the controls of the golden
    file, each valid on the wire, and a summary of the durable record."""
    golden = [
        json.loads(line) for line in (RECORDINGS / "spoken_call.controls.jsonl").read_text().splitlines()
    ]
    fast = _replay(services, RECORDINGS / "spoken_call.jsonl", "0")
    timed = _replay(services, RECORDINGS / "spoken_call.jsonl", "1")

    assert fast == timed
    *controls, last = fast
    assert controls == golden
    for control in controls:
        assert wire_errors(control, direction="client") == [], control
    summary = last["summary"]
    assert summary["status"] == "ended"
    assert summary["end_reason"] == "provider_call_ended"
    assert [item["role"] for item in summary["transcript"]] == ["user", "assistant"] * 3
    assert summary["incidents"] == []
    assert summary["tool_steps"] == []
    assert summary["events"] == {"applied": 21}


def test_a_broken_recording_is_refused_with_the_line_that_is_wrong(
    tmp_path: Path, services: Services
) -> None:
    """A recording with a bad line exits 2 and names the line; nothing is started."""
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"recording": {"version": 1, "name": "x"}}\n{"t_ms": 1, "event": "not an object"}\n')
    finished = subprocess.run(
        [sys.executable, "-m", "switchboard", "replay", str(broken), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 2
    assert "line 2" in finished.stderr
