"""`switchboard replay`: a shipped recording through the real gateway path, queues, workers
and PostgreSQL, with the same controls on every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simulator.live_oracle import live_wire_errors
from simulator.oracle import wire_errors
from switchboard.services import Services

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"


def _replay(services: Services, recording: Path, speed: str, *flags: str) -> list[dict[str, Any]]:
    env = {
        **os.environ,
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
    }
    finished = subprocess.run(
        [sys.executable, "-m", "switchboard", "replay", str(recording), "--json", "--speed", speed, *flags],
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
    assert summary["end_reason"] == "caller_hung_up"
    assert [item["role"] for item in summary["transcript"]] == ["user", "assistant"] * 3
    assert summary["incidents"] == []
    # The replay measures what the caller waited afresh (so only the count of answers is kept).
    assert summary["heard_latency"] == {"turns": 3}
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


def test_a_function_call_in_a_recording_runs_the_tool_its_header_offers(
    tmp_path: Path, services: Services
) -> None:
    """A header whose session offers lookup_order makes the replayed session run it: its step
    succeeds and its output reaches the provider (the simulator's log of the call)."""
    provider_log = tmp_path / "provider.json"
    # At the recorded pace: the recording keeps the sideband open 4 s after the function call,
    # time for the tool's output to reach the provider before it closes.
    *controls, last = _replay(
        services, RECORDINGS / "order_lookup.jsonl", "1", "--provider-log", str(provider_log)
    )

    summary = last["summary"]
    assert [(step["tool"], step["status"]) for step in summary["tool_steps"]] == [
        ("lookup_order", "succeeded")
    ]
    call = json.loads(provider_log.read_text())
    assert call["errors"] == []
    outputs = [
        entry["control"]["item"]
        for entry in call["controls"]
        if entry["control"]["type"] == "conversation.item.create"
        and entry["control"]["item"]["type"] == "function_call_output"
    ]
    assert [item["call_id"] for item in outputs] == ["call_1"]
    output = json.loads(outputs[0]["output"])
    assert (output["status"], output["result"]["found"], output["result"]["order_id"]) == (
        "succeeded",
        True,
        "4417",
    )
    assert outputs[0] in [control.get("item") for control in controls]
    assert summary["status"] == "ended"
    assert summary["incidents"] == []
    assert summary["compactions"] == []


@pytest.mark.parametrize(
    ("session", "named"),
    [
        (
            {"instructions": "Hi.", "limits": {"max_session_seconds": 99_999}},
            "recording.session.limits.max_session_seconds",
        ),
        ({"instructions": ""}, "recording.session.instructions"),
        ({"instructions": "Hi.", "tools": ["look up order"]}, "recording.session.tools"),
        ({"instructions": "Hi.", "tool": ["lookup_order"]}, "recording.session.tool"),
        ("lookup_order", "recording.session"),
    ],
)
def test_a_header_with_a_bad_session_is_refused_naming_the_field(
    tmp_path: Path, session: object, named: str
) -> None:
    """A header session that is not a valid POST /v1/sessions body exits 2 and names the
    field; nothing is started."""
    recording = tmp_path / "bad_session.jsonl"
    header = {"recording": {"version": 1, "name": "bad", "session": session}}
    recording.write_text(json.dumps(header) + "\n")
    finished = subprocess.run(
        [sys.executable, "-m", "switchboard", "replay", str(recording), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 2
    assert named in finished.stderr
    assert finished.stdout == ""


def test_a_live_recording_replays_through_a_live_session_with_its_golden_controls(
    services: Services, tmp_path: Path
) -> None:
    """A recorded Live call (its header's session says "provider": "live") is played by a Live
    session of the simulator: the model's delegation runs the recorded session's handler, and
    two replays print the golden controls (each valid against `openai.types.live`)."""
    golden = [
        json.loads(line)
        for line in (RECORDINGS / "live_order_lookup.controls.jsonl").read_text().splitlines()
    ]
    provider_log = tmp_path / "provider.json"
    first = _replay(
        services, RECORDINGS / "live_order_lookup.jsonl", "1", "--provider-log", str(provider_log)
    )
    second = _replay(services, RECORDINGS / "live_order_lookup.jsonl", "1")

    assert first == second
    *controls, last = first
    assert controls == golden
    for control in controls:
        assert live_wire_errors(control, direction="client") == [], control
    summary = last["summary"]
    assert (summary["status"], summary["end_reason"], summary["provider"]) == (
        "ended",
        "caller_hung_up",
        "live",
    )
    assert [(s["tool"], s["status"]) for s in summary["tool_steps"]] == [("order_desk", "succeeded")]
    assert summary["incidents"] == []
    played = json.loads(provider_log.read_text())
    assert played["errors"] == [] and played["transport"] == "webrtc"
    assert [entry["control"]["type"] for entry in played["controls"]] == [c["type"] for c in golden]
