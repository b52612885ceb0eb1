"""`switchboard replay FILE`: push a recorded call through the real gateway, queues, workers
and PostgreSQL, and report the controls it caused.

The simulator plays the recording back as the provider; the gateway numbers its events as it
would a live call's. The controls printed are read from the durable log in apply order — the
exact wire form sent to the provider — so a recording prints the same controls on every run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from simulator.recording import RecordingError, read_recording
from switchboard.client import Client
from switchboard.services import resolve_services
from switchboard.stack import Stack

REPLAY_TIMEOUT_S = 300.0


def run_replay(settings: Settings, path: Path, *, as_json: bool, speed: float) -> int:
    try:
        recording = read_recording(path)
    except (OSError, RecordingError) as error:
        print(f"switchboard replay: {path}: {error}", file=sys.stderr)
        return 2
    log = lambda message: print(f"switchboard: {message}", file=sys.stderr)  # noqa: E731
    services = resolve_services(settings.database_url, settings.redis_url, settings.data_dir, log=log)
    try:
        from models.db import connect
        from models.migrate import migrate

        migrate(connect(services.database_url))
        simulator_args = ("--recording", str(path), "--speed", str(speed))
        with Stack(services.database_url, services.redis_url, simulator_args=simulator_args) as stack:
            stack.start(workers=1)
            client = Client(stack.api_url, stack.api_token, stack.live_url)
            session = client.create_session(recording.header.instructions or "Replay of a recorded call.")
            client.connect(session["id"])
            client.wait_for_status(session["id"], timeout_s=REPLAY_TIMEOUT_S)
            record = client.session(session["id"], events=True)
    finally:
        services.stop()
    controls = emitted_controls(record)
    summary = replay_summary(record, recording.header.name, len(recording.events))
    if as_json:
        for control in controls:
            print(json.dumps(control, sort_keys=True))
        print(json.dumps({"summary": summary}, sort_keys=True))
    else:
        print(f"replayed {recording.header.name}: {len(recording.events)} provider events")
        for control in controls:
            print(f"  {control.get('event_id', ''):>10}  {json.dumps(control, sort_keys=True)}")
        print(json.dumps(summary, indent=2, sort_keys=True))
    return 0 if summary["status"] in ("ended", "failed") else 1


def emitted_controls(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every control the session emitted, as sent, in apply order."""
    ordered = sorted(record["log"], key=lambda event: event["applied_order"] or 0)
    return [item["control"] for event in ordered for item in event["controls"] if item["kind"] == "control"]


def replay_summary(record: dict[str, Any], name: str, provider_events: int) -> dict[str, Any]:
    """What the replay left in PostgreSQL, without the parts that differ between runs (ids,
    timestamps)."""
    return {
        "recording": name,
        "provider_events": provider_events,
        "status": record["status"],
        "end_reason": record["end_reason"],
        "usage": record["usage"],
        "events": record["events"],
        "transcript": [{"role": item["role"], "text": item["text"]} for item in record["transcript"]],
        "tool_steps": record["tool_steps"],
        "incidents": [{"code": item["code"], "severity": item["severity"]} for item in record["incidents"]],
    }
