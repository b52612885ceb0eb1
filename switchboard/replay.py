"""`switchboard replay FILE`: push a recorded call through the real gateway, queues, workers
and PostgreSQL, and report the controls it caused.

The simulator plays the recording back as the provider (a Live call's on a Live session, when
the header's session says `"provider": "live"`); the gateway numbers its events as it would a
live call's. The session is created from the recording header's `session` (the body of
`POST /v1/sessions`), so its tools really run; a recording without one gets its instructions
alone. The controls printed are read from the durable log in apply order — the exact wire form
sent to the provider — so a recording prints the same controls on every run.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.api import SessionSpec
from pipeline.config import Settings
from simulator.recording import Recording, RecordingError, read_recording
from switchboard.client import ApiError, Client
from switchboard.services import resolve_services
from switchboard.stack import Stack

REPLAY_TIMEOUT_S = 300.0

# A recording made before headers carried a session still needs instructions to be created with.
DEFAULT_INSTRUCTIONS = "Replay of a recorded call."

# What differs between two replays of one recording: the new session's ids, who held it, and its
# raw log (its controls are printed on their own). Everything else of the session record is the
# replay's result and goes into the summary as the record has it.
_RUN_SPECIFIC = frozenset({"id", "provider_call_id", "owning_gateway", "created_at", "ended_at", "log"})


class SessionSpecRefused(Exception):
    """The recording header's `session` is not a valid `POST /v1/sessions` body."""


def run_replay(
    settings: Settings,
    path: Path,
    *,
    as_json: bool,
    speed: float,
    provider_log: Path | None = None,
    closed_loop: bool = True,
    gate_timeout_s: float = 60.0,
) -> int:
    try:
        recording = read_recording(path)
        spec = session_spec(recording)
    except (OSError, RecordingError, SessionSpecRefused) as error:
        print(f"switchboard replay: {path}: {error}", file=sys.stderr)
        return 2
    log = lambda message: print(f"switchboard: {message}", file=sys.stderr)  # noqa: E731
    services = resolve_services(settings.database_url, settings.redis_url, settings.data_dir, log=log)
    try:
        from models.db import connect
        from models.migrate import migrate

        migrate(connect(services.database_url))
        simulator_args: tuple[str, ...] = (
            "--recording",
            str(path),
            "--speed",
            str(speed),
            "--gate-timeout",
            str(gate_timeout_s),
        )
        if not closed_loop:
            simulator_args += ("--open-loop",)
        with Stack(services.database_url, services.redis_url, simulator_args=simulator_args) as stack:
            stack.start(workers=1)
            client = Client(stack.api_url, stack.api_token, stack.live_url)
            try:
                session = client.create_session(**spec.model_dump(mode="json", exclude_none=True))
            except ApiError as error:
                # A spec can be well formed and still refused here: a tool this deployment lacks.
                print(
                    f"switchboard replay: {path}: the session was refused: {json.dumps(error.body)}",
                    file=sys.stderr,
                )
                return 2
            client.connect(session["id"])
            client.wait_for_status(session["id"], timeout_s=REPLAY_TIMEOUT_S)
            record = client.session(session["id"], events=True)
            call_id = record["provider_call_id"]
            # A session that never reached the provider has no call there to show.
            call = _simulator_call(stack, call_id, live=record["provider"] == "live") if call_id else None
            if provider_log is not None:
                provider_log.write_text(json.dumps(call, indent=2) + "\n")
    finally:
        services.stop()
    stalled = [
        str(problem) for problem in (call or {}).get("errors", []) if str(problem).startswith("closed-loop")
    ]
    if stalled:
        # The recording's provider answered a control this host never sent: the replay differs.
        for problem in stalled:
            print(f"switchboard replay: {path}: {problem}", file=sys.stderr)
        return 1
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


def session_spec(recording: Recording) -> SessionSpec:
    """What the replayed session is created with: the header's `session`, checked as the API
    checks a `POST /v1/sessions` body, or for an older recording its instructions alone."""
    header = recording.header
    if header.session is None:
        return SessionSpec(instructions=header.instructions or DEFAULT_INSTRUCTIONS)
    try:
        return SessionSpec.model_validate(header.session)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(["recording", "session", *(str(part) for part in first["loc"])])
        raise SessionSpecRefused(
            f"the header's session is not a POST /v1/sessions body: {where}: {first['msg']}"
        ) from exc


def emitted_controls(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every control the session emitted, as sent, in apply order."""
    ordered = sorted(record["log"], key=lambda event: event["applied_order"] or 0)
    return [item["control"] for event in ordered for item in event["controls"] if item["kind"] == "control"]


def replay_summary(record: dict[str, Any], name: str, provider_events: int) -> dict[str, Any]:
    """What the replay left in PostgreSQL — the session record (status, end reason, usage,
    dispositions, transcript, tool steps, compactions, incidents…) — without the parts that
    differ between runs: ids, timestamps and measured durations."""
    kept = {key: value for key, value in record.items() if key not in _RUN_SPECIFIC}
    return {"recording": name, "provider_events": provider_events, **_without_the_clock(kept)}


# Durations a replay measures afresh: a tool's run, and what the callers waited for answers
# (`heard_latency`: its count of turns stays).
_MEASURED = frozenset({"elapsed_ms", "p50_ms", "p95_ms"})


def _without_the_clock(value: Any) -> Any:
    """`value` without its moments (`at`, `…_at`) and measured durations (`_MEASURED`), at any
    depth, so the record's shape is taken as it comes and not restated here."""
    if isinstance(value, dict):
        return {
            key: _without_the_clock(item)
            for key, item in value.items()
            if not (key == "at" or key.endswith("_at") or key in _MEASURED)
        }
    if isinstance(value, list):
        return [_without_the_clock(item) for item in value]
    return value


def _simulator_call(stack: Stack, call_id: str, *, live: bool = False) -> dict[str, Any]:
    """The simulator's log of the replayed call (a Live session's on a Live call): every event it
    sent, every control it received."""
    base = stack.simulator_url.removesuffix("/v1")
    path = f"/_sim/live/sessions/{call_id}" if live else f"/_sim/calls/{call_id}"
    with urllib.request.urlopen(f"{base}{path}", timeout=10) as response:
        return dict(json.loads(response.read()))
