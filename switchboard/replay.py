"""`switchboard replay FILE`: push a recorded call through the real gateway, queues, workers
and PostgreSQL, and report the controls it caused.

The simulator plays the recording back as the provider (a Live call's on a Live session, when
the header's session says `"provider": "live"`); the gateway numbers its events as it would a
live call's. The session is created from the recording header's `session` (the body of
`POST /v1/sessions`), so its tools really run; a recording without one gets its instructions
alone. The controls printed are read from the durable log in apply order — the exact wire form
sent to the provider — so a recording prints the same controls on every run; the summary names
the session the replay made.

The requests an app or a person made of the recorded call (its `request` lines: an app's say, an
end) are made again through the API at their place, each once the event before it is in the
replayed session's log, and the playback is told so (closed loop, the events after a request wait
for it). A recording made with another program as host (its header's `"host": "other"`) is played
open loop. Stopped (SIGTERM, SIGINT), the replay ends the session it made if it is not over and
stops every process it started.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic import ValidationError

from pipeline.api.requests import SessionSpec
from pipeline.platform.config import Settings
from simulator.recording import OTHER_HOST, Recording, RecordingError, RequestAt, read_recording
from switchboard.client import TERMINAL, ApiError, Client
from switchboard.requests import api_call
from switchboard.services import resolve_services
from switchboard.stack import Stack

REPLAY_TIMEOUT_S = 300.0
# How often the replayed session's log is read while a request waits for the event before it.
REQUEST_POLL_S = 0.05
# The signals that stop a replay (which then exits 128 + the signal, as a shell reports it).
STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# A recording made before headers carried a session still needs instructions to be created with.
DEFAULT_INSTRUCTIONS = "Replay of a recorded call."

# What differs between two replays of one recording: the new session's ids (the summary names the
# session once, as `session_id`), who held it, and its raw log (its controls are printed on their
# own). Everything else of the session record is the replay's result and goes into the summary as
# the record has it.
_RUN_SPECIFIC = frozenset({"id", "provider_call_id", "owning_gateway", "created_at", "ended_at", "log"})


class SessionSpecRefused(Exception):
    """The recording header's `session` is not a valid `POST /v1/sessions` body."""


class ReplayStopped(BaseException):
    """A signal stopped the replay (a BaseException, as KeyboardInterrupt is, so that no
    `except Exception` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGINT raise `ReplayStopped` once (in the main thread), so the
    replay unwinds, ends its session and stops its processes; a second signal is ignored while it
    does, and the previous handlers come back after. Off the main thread (where no handler can be
    set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal raised
        if not raised:
            raised = True
            raise ReplayStopped(signum)

    previous = {signum: signal.signal(signum, stop) for signum in STOPPING_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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
    if closed_loop and recording.header.host == OTHER_HOST:
        print(
            f"switchboard replay: {path}: recorded with another program as host"
            f' ("host": "{OTHER_HOST}"): played open loop',
            file=sys.stderr,
        )
    try:
        with _stopped_by_signals():
            return _replay(
                settings, path, recording, spec, as_json, speed, provider_log, closed_loop, gate_timeout_s
            )
    except ReplayStopped as stopped:
        print(f"switchboard replay: {path}: stopped by {stopped}", file=sys.stderr)
        return 128 + stopped.signum


def _replay(
    settings: Settings,
    path: Path,
    recording: Recording,
    spec: SessionSpec,
    as_json: bool,
    speed: float,
    provider_log: Path | None,
    closed_loop: bool,
    gate_timeout_s: float,
) -> int:
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
        # A replay stopped before its session was over ends it (`host_stopped`), through its own
        # gateway and worker, as the stack stops: no session of a replay is left listening.
        with Stack(
            services.database_url, services.redis_url, simulator_args=simulator_args, ends_its_calls=True
        ) as stack:
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
            # Said at once: a replay that is stopped or stalls has made a session all the same.
            print(f"switchboard replay: {path}: replaying into session {session['id']}", file=sys.stderr)
            try:
                client.connect(session["id"])
                live = spec.provider == "live"
                _make_requests(client, stack, session["id"], recording, live=live, timeout_s=gate_timeout_s)
                client.wait_for_status(session["id"], timeout_s=REPLAY_TIMEOUT_S)
            except ReplayStopped:
                print(f"switchboard replay: {path}: stopped; ending session {session['id']}", file=sys.stderr)
                raise
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


def _make_requests(
    client: Client, stack: Stack, session_id: str, recording: Recording, *, live: bool, timeout_s: float
) -> None:
    """Make each recorded request again at its place: once the provider event before it is in
    the replayed session's log (so the request is numbered after it, as it was), then tell the
    playback it was made. A request whose event never comes is made when `timeout_s` is over
    (the playback will have failed by then, and says why)."""
    call_id: str | None = None
    for number, placed in enumerate(recording.requests, start=1):
        _await_event_before(client, session_id, recording, placed, timeout_s)
        kind = str(placed.line.request.get("type"))
        method, route, body = api_call(session_id, placed.line.request)
        status, answer = client.request(method, route, body)
        if status >= 400:
            # Made as recorded, and refused as it may have been then: the controls tell.
            print(
                f"switchboard replay: the recorded request #{number} ({kind}) was answered"
                f" {status}: {json.dumps(answer)}",
                file=sys.stderr,
            )
        call_id = call_id or client.session(session_id).get("provider_call_id")
        if call_id:
            _tell_simulator(stack, call_id, kind, live=live)


def _await_event_before(
    client: Client, session_id: str, recording: Recording, placed: RequestAt, timeout_s: float
) -> None:
    """Wait until the replayed session's log holds the last provider event before `placed` that
    has an id (as many times as the recording has it by then), or the session is over."""
    before = [line.event.get("event_id") for line in recording.events[: placed.after_events]]
    wanted = next((event_id for event_id in reversed(before) if isinstance(event_id, str)), None)
    if wanted is None:
        return
    times = before.count(wanted)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = client.session(session_id, events=True)
        if _logged_event_ids(record)[wanted] >= times or record["status"] in TERMINAL:
            return
        time.sleep(REQUEST_POLL_S)


def _logged_event_ids(record: dict[str, Any]) -> Counter[str]:
    """The provider event ids in a session's log, each as often as it was numbered (a Live
    transcript piece holds its fragments' ids; an event that arrived late, its own)."""
    counted: Counter[str] = Counter()
    for entry in record["log"]:
        if entry.get("seq") is None:
            continue
        payload = entry.get("payload") or {}
        late = payload.get("event")
        inner = late if isinstance(late, dict) else payload
        ids = [inner.get("event_id")] + [
            fragment.get("event_id") for fragment in payload.get("fragments") or []
        ]
        counted.update(event_id for event_id in ids if isinstance(event_id, str))
    return counted


def _tell_simulator(stack: Stack, call_id: str, kind: str, *, live: bool) -> None:
    """Tell the playback a recorded request was made again: the events after it may go on."""
    base = stack.simulator_url.removesuffix("/v1")
    path = f"/_sim/live/sessions/{call_id}/requests" if live else f"/_sim/calls/{call_id}/requests"
    request = urllib.request.Request(
        f"{base}{path}",
        data=json.dumps({"type": kind}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


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
    differ between runs (ids, timestamps and measured durations), and the id of the session the
    replay made."""
    kept = {key: value for key, value in record.items() if key not in _RUN_SPECIFIC}
    return {
        "recording": name,
        "provider_events": provider_events,
        **_without_the_clock(kept),
        # The session the replay made (`switchboard sessions show` or `export` reads it).
        "session_id": record["id"],
    }


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
