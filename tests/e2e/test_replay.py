"""`switchboard replay`: a shipped recording through the real gateway path, queues, workers
and PostgreSQL, with the same controls on every run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import psycopg2
import pytest

from pipeline.platform.config import Settings
from simulator.live_oracle import live_wire_errors
from simulator.oracle import wire_errors
from simulator.recording import ControlAt, RecordedControl, read_recording, recording_lines
from switchboard.replay import run_replay
from switchboard.services import Services
from switchboard.stack import wait_until
from tests.e2e.replays import RECORDINGS, replay, side_by_side, without_ids


def _without_session(printed: dict[str, Any]) -> dict[str, Any]:
    """A replay's summary line without the id of the session it made (each replay makes its own)."""
    return {"summary": {key: value for key, value in printed["summary"].items() if key != "session_id"}}


SPEEDS = ("0", "1", "4")
RECORDED_WITH_CONTROLS = ("spoken_call", "three_turn", "order_lookup")


@pytest.fixture(scope="module")
def replayed_at_every_speed(services: Services) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every recording of RECORDED_WITH_CONTROLS replayed at every speed, all at once (each its
    own replay): closed loop, nothing one replays waits on another's pace."""
    return side_by_side(
        {
            (name, speed): partial(replay, services, RECORDINGS / f"{name}.jsonl", speed)
            for name in RECORDED_WITH_CONTROLS
            for speed in SPEEDS
        }
    )


@pytest.mark.parametrize("name", RECORDED_WITH_CONTROLS)
def test_every_recording_replays_to_its_recorded_controls_at_every_speed(
    replayed_at_every_speed: dict[tuple[str, str], list[dict[str, Any]]], name: str
) -> None:
    """Closed loop: at the recorded pace, four times as fast and as fast as possible, a recording
    gives exactly the controls it holds (the host's, written beside the provider's events), and
    the same summary: an event that answered a control waits for it, so speed changes nothing."""
    recording = RECORDINGS / f"{name}.jsonl"
    recorded = [line.line.control for line in read_recording(recording).controls]
    assert recorded, "the recording holds no controls to replay in step with"
    replays = {
        speed: replayed_at_every_speed[name, speed]
        for speed in SPEEDS
        if (name, speed) in replayed_at_every_speed
    }
    assert sorted(replays) == sorted(SPEEDS), "a replay did not finish"
    for speed, (*controls, last) in replays.items():
        # Ids aside: a tool's output is sent by its outcome or by the response.done it waited
        # for, whichever is applied last, and a control's id names that input.
        assert without_ids(controls) == without_ids(recorded), speed
        assert _without_session(last) == _without_session(replays["1"][-1]), speed
    # Each names the session it made, and each made its own.
    made = {printed[-1]["summary"]["session_id"] for printed in replays.values()}
    assert len(made) == len(SPEEDS) and all(session_id.startswith("sess_") for session_id in made)
    for control in recorded:
        assert wire_errors(control, direction="client") == [], control
    summary = replays["0"][-1]["summary"]
    assert (summary["status"], summary["incidents"]) == ("ended", [])
    if name == "spoken_call":
        golden = [
            json.loads(line) for line in (RECORDINGS / "spoken_call.controls.jsonl").read_text().splitlines()
        ]
        # No tool: every control is sent by a provider event, so even the ids are the same.
        assert recorded == golden
        assert all(replay[:-1] == golden for replay in replays.values())
        assert summary["end_reason"] == "caller_hung_up"
        assert [item["role"] for item in summary["transcript"]] == ["user", "assistant"] * 3
        # The replay measures what the caller waited afresh (so only the count of answers is kept).
        assert summary["heard_latency"] == {"turns": 3}
        assert summary["events"] == {"applied": 21}
    if name == "order_lookup":
        # The tool its header offers really ran, and its output reached the provider before the
        # close: at any speed, since the close waits for it.
        assert [(step["tool"], step["status"]) for step in summary["tool_steps"]] == [
            ("lookup_order", "succeeded")
        ]
        [output] = [c["item"] for c in recorded if c["type"] == "conversation.item.create"]
        answer = json.loads(output["output"])
        assert (output["call_id"], answer["status"], answer["result"]["order_id"]) == (
            "call_1",
            "succeeded",
            "4417",
        )


def test_a_recording_holding_a_control_the_host_never_sends_fails_closed_and_plays_open(
    tmp_path: Path, services: Services
) -> None:
    """A recording holding a control this host never sends (a delete, here): the closed-loop
    replay waits for it, then fails, exit 1, naming what never came. `--open-loop` (for
    recordings made without a host) plays on the recorded clock and waits for nothing."""
    spoken = read_recording(RECORDINGS / "spoken_call.jsonl")
    # Its first exchange only: the session.update and what answers it.
    source = spoken.model_copy(
        update={"events": spoken.events[:1], "controls": spoken.controls[:1], "close": None}
    )
    extra = ControlAt(
        after_events=1,
        line=RecordedControl(t_ms=100.0, control={"type": "conversation.item.delete", "item_id": "item_x"}),
    )
    stalls = tmp_path / "stalls.jsonl"
    stalls.write_text(
        "\n".join(recording_lines(source.model_copy(update={"controls": [*source.controls, extra]})))
    )
    env = {
        **os.environ,
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
    }
    closed = subprocess.run(
        [
            sys.executable,
            "-m",
            "switchboard",
            "replay",
            str(stalls),
            "--json",
            "--speed",
            "0",
            "--gate-timeout",
            "1",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert closed.returncode == 1, closed.stderr[-2000:]
    never = "the host never sent conversation.item.delete #1, which the recording has before the close"
    assert f"{never} (waited 1 s)" in closed.stderr
    *controls, _summary = replay(services, stalls, "0", "--open-loop")
    assert [control["type"] for control in controls] == ["session.update"]


CAPTURED = RECORDINGS / "captured"
# The captured sessions offered `get_weather`: the replays offer it too (tests/tools), and its body
# writes to the witness file each time it runs.
WEATHER_TOOLS = "workers.tools.reference,tests.tools.weather_tools"


@pytest.fixture(scope="module")
def foreign_replays(services: Services, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every recording made against another host, replayed as plainly as `switchboard replay
    FILE`, all at once (each its own replay): the streams captured from the real APIs
    (recordings/captured/) and the hand-written one in their shape. Their controls were another
    client's, so their headers say `"host": "other"` and they play open loop, waiting for
    nothing (a closed-loop gate left waiting would fail the replay after --gate-timeout)."""
    witness = tmp_path_factory.mktemp("weather") / "runs"
    env = {"SWITCHBOARD_TOOL_MODULES": WEATHER_TOOLS, "TEST_TOOL_WITNESS": str(witness)}
    plays = {
        "tool_call_round": (CAPTURED / "tool_call_round.jsonl", "0"),
        "sideband_text_turn": (CAPTURED / "sideband_text_turn.jsonl", "0"),
        "live_bound_history@1": (CAPTURED / "live_bound_history.jsonl", "1"),
        "live_bound_history@0": (CAPTURED / "live_bound_history.jsonl", "0"),
        "client_response_tool": (RECORDINGS / "client_response_tool.jsonl", "2"),
        "server_vad_barge_in@1": (RECORDINGS / "server_vad_barge_in.jsonl", "1"),
        "server_vad_barge_in@0": (RECORDINGS / "server_vad_barge_in.jsonl", "0"),
    }
    for recording, _speed in plays.values():
        assert read_recording(recording).header.host == "other", recording
    replays: dict[str, Any] = side_by_side(
        {
            name: partial(replay, services, recording, speed, "--gate-timeout", "5", env=env)
            for name, (recording, speed) in plays.items()
        }
    )
    missing = sorted(set(plays) - set(replays))
    assert not missing, f"replays that did not finish: {missing}"
    return {**replays, "witness": witness}


def test_the_captured_streams_are_the_real_apis_with_fields_newer_than_the_types() -> None:
    """The captured Realtime streams differ from `openai`'s types in one field only: the
    `obfuscation` every streamed delta carries (newer than the types, and ignored). The Live
    capture is valid as it stands."""
    for name in ("tool_call_round", "sideband_text_turn"):
        events = [line.event for line in read_recording(CAPTURED / f"{name}.jsonl").events]
        deltas = [event for event in events if event["type"].endswith(".delta")]
        assert deltas and all("obfuscation" in event for event in deltas)
        for event in events:
            expected = ["unknown field $.obfuscation"] if event in deltas else []
            assert wire_errors(event, direction="server") == expected, event
    live = read_recording(CAPTURED / "live_bound_history.jsonl").events
    assert all(live_wire_errors(line.event, direction="server") == [] for line in live)


def test_a_tool_the_model_calls_in_a_response_another_client_asked_for_never_runs(
    foreign_replays: dict[str, Any],
) -> None:
    """Captured: a client adds a message and asks for a response itself, and the model calls
    get_weather in it. Switchboard did not ask for that response: the call is answered at once,
    refused (`response_context_missing`, a warning), the tool's body never runs, no response is
    asked for (it is not the host's), and the call goes on to the model's answer. The client's
    message is the caller's line of the record."""
    *controls, last = foreign_replays["tool_call_round"]
    assert [control["type"] for control in controls] == ["session.update", "conversation.item.create"]
    refusal = controls[1]["item"]
    assert (refusal["type"], refusal["call_id"]) == ("function_call_output", "call_9ghqokxJmZFwiAM0")
    assert json.loads(refusal["output"])["error"]["code"] == "response_context_missing"
    assert all(wire_errors(control, direction="client") == [] for control in controls)
    assert not foreign_replays["witness"].exists(), "get_weather ran"
    summary = last["summary"]
    assert (summary["status"], summary["end_reason"]) == ("ended", "caller_hung_up")
    assert [(step["tool"], step["status"]) for step in summary["tool_steps"]] == [("get_weather", "refused")]
    assert [(i["code"], i["severity"]) for i in summary["incidents"]] == [
        ("response_context_missing", "warning")
    ]
    assert [(t["role"], t["text"]) for t in summary["transcript"]] == [
        ("user", "What is the weather in London?"),
        ("assistant", "It is foggy and 12 degrees in London."),
    ]
    assert summary["usage"]["responses"] == 2


def test_a_turn_another_host_drives_on_a_captured_sideband_is_recorded_and_left_to_it(
    foreign_replays: dict[str, Any],
) -> None:
    """Captured on a WebRTC call's sideband: another host types a line and asks for the answer.
    Switchboard configures its sideband, asks for nothing, and records the line and the answer."""
    *controls, last = foreign_replays["sideband_text_turn"]
    assert [control["type"] for control in controls] == ["session.update"]
    summary = last["summary"]
    assert (summary["status"], summary["incidents"]) == ("ended", [])
    assert [(t["role"], t["text"]) for t in summary["transcript"]] == [
        ("user", "Say hello."),
        ("assistant", "Hello there!"),
    ]


@pytest.mark.parametrize("speed", ["1", "0"])
def test_a_captured_live_call_whose_speakers_overlap_is_recorded_as_two_whole_lines(
    foreign_replays: dict[str, Any], speed: str
) -> None:
    """Captured on a Live call's sideband: the model answers while the caller's last words are
    still being transcribed, and the two speakers' deltas alternate. At the recorded pace (the
    gateway writes words down after 1 s) and as fast as possible (at turns and the close), the
    record holds each speaker's line whole."""
    summary = foreign_replays[f"live_bound_history@{speed}"][-1]["summary"]
    assert (summary["status"], summary["incidents"]) == ("ended", [])
    assert [(t["role"], t["text"]) for t in summary["transcript"]] == [
        ("user", "Can you remind me what my name is?"),
        ("assistant", "You mentioned your name is Ada."),
    ]


def test_a_tool_called_in_a_response_the_host_did_not_ask_for_is_refused_and_the_call_goes_on(
    foreign_replays: dict[str, Any],
) -> None:
    """A WebRTC client's own response.create, and the model calls a tool in it
    (recordings/client_response_tool.jsonl, hand-written in that shape, played open loop). The
    tool does not run; its call is answered refused at once with a warning; the client's typed
    line is the caller's in the record; the caller's next (spoken) line is answered and the call
    ends as the caller ends it."""
    recording = RECORDINGS / "client_response_tool.jsonl"
    assert all(wire_errors(line.event, direction="server") == [] for line in read_recording(recording).events)
    *controls, last = foreign_replays["client_response_tool"]
    refusal, create = controls[1:]
    assert refusal["type"] == "conversation.item.create" and refusal["item"]["call_id"] == "call_client_1"
    assert json.loads(refusal["item"]["output"])["error"]["code"] == "response_context_missing"
    assert create["type"] == "response.create"
    summary = last["summary"]
    assert (summary["status"], summary["end_reason"]) == ("ended", "caller_hung_up")
    assert [(step["tool"], step["status"]) for step in summary["tool_steps"]] == [("lookup_order", "refused")]
    assert [(i["code"], i["severity"]) for i in summary["incidents"]] == [
        ("response_context_missing", "warning")
    ]
    assert [(t["role"], t["text"]) for t in summary["transcript"]] == [
        ("user", "Where is order 4417?"),
        ("user", "Hello? Are you still there?"),
        ("assistant", "Yes, I'm here. How can I help?"),
    ]


@pytest.mark.parametrize("speed", ["1", "0"])
def test_a_record_reads_in_the_conversation_s_order_whatever_order_the_finals_came_in(
    foreign_replays: dict[str, Any], speed: str
) -> None:
    """recordings/server_vad_barge_in.jsonl (every event valid against `openai`'s types): another
    client seeds the call so far, a caller line and an agent line; with server VAD the caller's
    long question is cut into by a short line, which cuts the provider's own answer short. The
    finals come in as the cut answer, the short line, the question, the answer: the record reads
    as the conversation went (`previous_item_id`), the seeded agent line kept beside the seeded
    caller line."""
    recording = read_recording(RECORDINGS / "server_vad_barge_in.jsonl")
    assert all(wire_errors(line.event, direction="server") == [] for line in recording.events)
    finals = [
        line.event.get("transcript")
        for line in recording.events
        if line.event["type"].endswith(("transcription.completed", "audio_transcript.done"))
    ]
    assert finals == [
        "Sure, let me",
        "Please look it up.",
        "When will it arrive, and can you check whether it has left the warehouse yet?",
        "It left the warehouse this morning and arrives on Friday.",
    ]
    summary = foreign_replays[f"server_vad_barge_in@{speed}"][-1]["summary"]
    assert (summary["status"], summary["incidents"]) == ("ended", [])
    assert [(t["role"], t["text"]) for t in summary["transcript"]] == [
        ("user", "Hi, this is Sam, about order 4417."),
        ("assistant", "Hello Sam, I have order 4417 here. What would you like to know?"),
        ("user", "When will it arrive, and can you check whether it has left the warehouse yet?"),
        ("assistant", "Sure, let me"),
        ("user", "Please look it up."),
        ("assistant", "It left the warehouse this morning and arrives on Friday."),
    ]


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
    tmp_path: Path, session: object, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A header session that is not a valid POST /v1/sessions body exits 2 and names the
    field; nothing is started (run in this process: the command line is the broken-recording
    test's)."""
    recording = tmp_path / "bad_session.jsonl"
    header = {"recording": {"version": 1, "name": "bad", "session": session}}
    recording.write_text(json.dumps(header) + "\n")
    assert run_replay(Settings(), recording, as_json=True, speed=1.0) == 2
    written = capsys.readouterr()
    assert named in written.err
    assert written.out == ""


def test_a_live_recording_replays_through_a_live_session_with_its_golden_controls(
    services: Services, tmp_path: Path
) -> None:
    """A recorded Live call (its header's session says "provider": "live") is played by a Live
    session of the simulator, closed loop: the model's delegation runs the recorded session's
    handler, and at every speed the replay sends the golden controls (each valid against
    `openai.types.live`); the recorded pace gives even their ids. (Faster, the gateway writes the
    transcript down in other pieces, so the seqs, and the ids they give, differ.)"""
    golden = [
        json.loads(line)
        for line in (RECORDINGS / "live_order_lookup.controls.jsonl").read_text().splitlines()
    ]
    assert [
        line.line.control for line in read_recording(RECORDINGS / "live_order_lookup.jsonl").controls
    ] == golden
    provider_log = tmp_path / "provider.json"
    replays: dict[str, list[dict[str, Any]]] = {}

    def play(speed: str, *flags: str) -> None:
        replays[speed] = replay(services, RECORDINGS / "live_order_lookup.jsonl", speed, *flags)

    speeds = [
        threading.Thread(target=play, args=("1", "--provider-log", str(provider_log))),
        threading.Thread(target=play, args=("0",)),
        threading.Thread(target=play, args=("4",)),
    ]
    for thread in speeds:
        thread.start()
    for thread in speeds:
        thread.join(200)
    assert sorted(replays) == ["0", "1", "4"]
    *controls, last = replays["1"]
    assert controls == golden
    for speed, (*others, _summary) in replays.items():
        assert without_ids(others) == without_ids(golden), speed
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


def test_a_replay_stopped_by_sigterm_ends_its_session_and_stops_every_process_it_started(
    services: Services,
) -> None:
    """SIGTERM to `switchboard replay` while its session listens: the session is ended
    (`host_stopped`) through the replay's own gateway and worker, and its simulator, gateway and
    worker are gone when it exits (128 + 15)."""
    env = {
        **os.environ,
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
    }
    # A fifth of the recorded pace: the call is still on when the signal comes.
    replay = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "switchboard",
            "replay",
            str(RECORDINGS / "spoken_call.jsonl"),
            "--speed",
            "0.2",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    started: list[psutil.Process] = []
    try:
        assert replay.stderr is not None
        said = ""
        for said in replay.stderr:
            if "replaying into session" in said:
                break
        session_id = said.rsplit(" ", 1)[-1].strip()
        assert session_id.startswith("sess_"), said
        database = psycopg2.connect(services.database_url)
        database.autocommit = True

        def status() -> str:
            with database.cursor() as cursor:
                cursor.execute("SELECT status FROM sessions WHERE id = %s", (session_id,))
                row = cursor.fetchone()
            return str(row[0]) if row else ""

        assert wait_until(lambda: status() == "listening", 60), status()
        started += psutil.Process(replay.pid).children(recursive=True)
        assert len(started) >= 3, [child.cmdline() for child in started]
        replay.send_signal(signal.SIGTERM)
        rest = replay.stderr.read()
        exited = replay.wait(60)
        left = [child for child in started if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
    finally:
        # Whatever the outcome, nothing this test started outlives it.
        if replay.poll() is None:
            replay.kill()
        for child in started:
            if child.is_running():
                child.kill()
        replay.wait()
    assert exited == 128 + signal.SIGTERM, rest
    assert left == [], [child.cmdline() for child in left]
    assert f"stopped; ending session {session_id}" in rest
    assert "stopped by SIGTERM" in rest
    with database.cursor() as cursor:
        cursor.execute("SELECT status, end_reason FROM sessions WHERE id = %s", (session_id,))
        assert cursor.fetchone() == ("ended", "host_stopped")
    database.close()
