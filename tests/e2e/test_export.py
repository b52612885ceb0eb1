"""`switchboard sessions export`: a stored session written as a recording that `switchboard
replay` and the simulator's playback read, so a call replays with its tools, limits and events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pipeline.platform.timestamps import rfc3339
from simulator.recording import parse_recording, read_recording, recording_lines
from switchboard.client import Client
from switchboard.export import session_recording
from switchboard.replay import emitted_controls
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script

INSTRUCTIONS = "You are the order desk of a kitchenware shop."
SUMMARY = "Working notes: caller is Sam, order 4417, a kettle. Open: the refund. Next: confirm it."
LINES = [
    "Hello, this is Sam calling about my order number 4417, the kettle from your spring catalogue.",
    "It should have arrived on Monday but nothing has come yet, and I paid for the faster option.",
    "Could you tell me which carrier has the parcel and what the tracking number is at the moment?",
    "I would also like the extra delivery fee refunded, it was twelve euros and fifty cents in total.",
    "Does the refund go back to the card I paid with, or do you send a voucher by email instead?",
    "And how many working days does that usually take before I can see it on my bank statement?",
    "Can you also send a confirmation of all of this to the email address you have on file for me?",
    "Thank you very much for your help, that is everything I needed to know for today, goodbye.",
]


def _environment(services: Services) -> dict[str, str]:
    return {
        **os.environ,
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
    }


def _switchboard(services: Services, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", *arguments],
        env=_environment(services),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _export(services: Services, session_id: str, into: Path) -> Path:
    exported = _switchboard(services, "sessions", "export", session_id)
    assert exported.returncode == 0, exported.stderr[-3000:]
    into.write_text(exported.stdout)
    return into


def _replay_summary(services: Services, recording: Path) -> dict[str, Any]:
    replayed = _switchboard(services, "replay", str(recording), "--json", "--speed", "0")
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    summary: dict[str, Any] = json.loads(replayed.stdout.splitlines()[-1])["summary"]
    return summary


def _finished_call(client: Client, **spec: Any) -> dict[str, Any]:
    session = client.create_session(INSTRUCTIONS, **spec)
    client.connect(session["id"])
    record = client.wait_for_status(session["id"], timeout_s=90)
    assert record["status"] == "ended", record
    return record


def _without_ids(controls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: value for key, value in control.items() if key != "event_id"} for control in controls]


def _lines(record: dict[str, Any], role: str) -> list[str]:
    return [item["text"] for item in record["transcript"] if item["role"] == role]


def test_an_exported_call_replays_with_the_same_caller_lines_and_responses(
    tmp_path: Path, services: Services, stack: Stack, client: Client
) -> None:
    """A finished call, exported and replayed, hears the same caller lines and counts the same
    responses; the file is a recording the simulator reads, with the session it was made under."""
    set_script(stack, SCRIPTS / "spoken_call.json")
    record = _finished_call(client)
    recording = _export(services, record["id"], tmp_path / "call.jsonl")

    read = read_recording(recording)
    assert read.header.session is not None
    assert (read.header.session["instructions"], read.header.session["tools"]) == (INSTRUCTIONS, [])
    assert read.events and all(not line.event["type"].startswith("switchboard.") for line in read.events)
    assert read.close is not None and read.close.close.code == 1000
    summary = _replay_summary(services, recording)

    assert summary["status"] == "ended"
    assert _lines(summary, "user") == _lines(record, "user") != []
    assert summary["usage"]["responses"] == record["usage"]["responses"] > 0
    assert _lines(summary, "assistant") == _lines(record, "assistant")


def test_a_stored_call_with_a_tool_exports_and_replays_as_fast_as_possible_to_the_same_controls(
    tmp_path: Path, services: Services, stack: Stack, client: Client
) -> None:
    """A finished call in which the model called a tool: its export holds the controls the
    session sent, and a replay as fast as possible (closed loop) sends exactly those, the tool's
    output and continuation included: the provider's events after a control wait for it."""
    set_script(
        stack,
        {
            "name": "tool-call",
            "timing": {"delta_interval_ms": 10, "chars_per_delta": 12, "speech_ms": 200},
            "caller": [
                {"say": "Where is my order 4417?", "after_ms": 150},
                {"say": "Thanks, bye.", "after_ms": 300},
                {"hangup": True, "after_ms": 200},
            ],
            "model": [
                {"function_call": {"name": "lookup_order", "arguments": {"order_id": "4417"}}},
                {"say": "It ships Friday."},
                {"say": "Goodbye."},
            ],
        },
    )
    record = _finished_call(client, tools=["lookup_order"])
    stored = emitted_controls(client.session(record["id"], events=True))
    assert "conversation.item.create" in [control["type"] for control in stored]
    recording = _export(services, record["id"], tmp_path / "tool.jsonl")
    assert [line.line.control for line in read_recording(recording).controls] == stored

    replayed = _switchboard(services, "replay", str(recording), "--json", "--speed", "0")
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    *controls, last = [json.loads(line) for line in replayed.stdout.splitlines()]
    # A control's id names the input that sent it (`ctl_x{order}` for one a worker applied
    # itself, such as a tool's outcome), and which input sends a tool's output — its outcome, or
    # the response.done it waited for — is a race the provider cannot replay: the ids may differ.
    assert _without_ids(controls) == _without_ids(stored)
    summary = last["summary"]
    assert [(step["tool"], step["status"]) for step in summary["tool_steps"]] == [
        ("lookup_order", "succeeded")
    ]
    assert _lines(summary, "user") == _lines(record, "user")


def test_an_exported_call_that_compacted_replays_its_compaction(
    tmp_path: Path, services: Services, stack: Stack, client: Client
) -> None:
    """The export carries the session's compaction threshold, so the replay compacts where the
    call did, and its summary shows that compaction as the session record has it."""
    set_script(
        stack,
        {
            "name": "long-call",
            "timing": {
                "delta_interval_ms": 5,
                "chars_per_delta": 40,
                "speech_ms": 150,
                "response_wait_ms": 20000,
            },
            "caller": [{"say": line, "after_ms": 20} for line in LINES] + [{"hangup": True, "after_ms": 100}],
            "model": [
                {"say": f"Of course, I have noted point {index}."} for index in range(1, len(LINES) + 1)
            ],
            "out_of_band": [{"text": SUMMARY}, {"text": SUMMARY}],
        },
    )
    record = _finished_call(client, limits={"compaction_input_tokens": 150})
    assert [c["status"] for c in record["compactions"]][:1] == ["completed"], record["compactions"]
    recording = _export(services, record["id"], tmp_path / "compacted.jsonl")
    session = read_recording(recording).header.session
    assert session is not None and session["limits"]["compaction_input_tokens"] == 150

    summary = _replay_summary(services, recording)

    def shown(compaction: dict[str, Any]) -> tuple[Any, ...]:
        return (compaction["status"], compaction["summary"], compaction["items_deleted"])

    assert [shown(c) for c in summary["compactions"]] == [shown(c) for c in record["compactions"]]
    assert summary["compactions"][0]["summary"] == SUMMARY
    assert _lines(summary, "user") == LINES


def test_exporting_an_unknown_session_says_so_and_exits_1(services: Services) -> None:
    """No such session: a one-line error naming it, exit 1, nothing on stdout."""
    exported = _switchboard(services, "sessions", "export", "sess_does_not_exist")
    assert exported.returncode == 1
    assert "sess_does_not_exist" in exported.stderr
    assert "Traceback" not in exported.stderr
    assert exported.stdout == ""


def _logged(
    seq: int | None, received_at: float, payload: dict[str, Any], disposition: str = "applied"
) -> dict[str, Any]:
    # As the record shows its log: no seq for an input a worker applied itself.
    return {
        **({"seq": seq} if seq is not None else {}),
        "kind": payload["type"],
        "disposition": disposition,
        "received_at": rfc3339(received_at),
        "payload": payload,
    }


def test_the_export_keeps_what_the_provider_sent_and_nothing_else() -> None:
    """Host inputs and lost-seq markers are left out; duplicates and late events stay; an event
    that arrived after its seq was declared lost is exported at its seq; the gateway's playback
    note and its heard stamp are taken off; offsets never go back; a dropped connection closes as
    1011."""
    speech = {"type": "input_audio_buffer.speech_started", "event_id": "e2", "item_id": "i1"}
    heard = {
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": "e3",
        "item_id": "i1",
        "transcript": "Hi.",
    }
    done = {"type": "response.done", "event_id": "e4", "response": {"id": "r1", "status": "completed"}}
    record = {
        "id": "sess_1",
        "status": "failed",
        "end_reason": "sideband_lost",
        "created_at": "2026-01-01T00:00:00",
        "log": [
            _logged(
                None,
                99.0,
                {
                    "type": "switchboard.session_created",
                    "instructions": "Be brief.",
                    "tools": [{"type": "function", "name": "lookup_order", "parameters": {}}],
                    "tool_versions": {"lookup_order": "1"},
                    # A deployment's default may exceed what the API lets a caller ask for.
                    "limits": {
                        "max_output_tokens": "inf",
                        "max_session_seconds": 7_200,
                        "compaction_input_tokens": 200,
                    },
                },
            ),
            _logged(1, 100.0, {"type": "switchboard.sideband_connected", "call_id": "rtc_1"}),
            _logged(2, 100.25, {**speech, "playback": {"item_id": "i0", "played_ms": 300}}),
            _logged(3, 130.0, {"type": "switchboard.arrived_late", "event": heard}, "late"),
            _logged(4, 100.5, {**done, "heard": {"speech_ended_at": 100.2, "first_audio_at": 100.45}}),
            _logged(5, 100.6, done, "duplicate"),
            _logged(6, 120.6, {"type": "switchboard.seq_lost", "seq": 6}, "lost"),
            _logged(None, 120.7, {"type": "switchboard.timer_fired", "name": "x"}),
            # Numbered by a gateway whose clock is behind the first one's.
            _logged(7, 100.4, {"type": "error", "event_id": "e5", "error": {"type": "server_error"}}, "late"),
            _logged(8, 101.0, {"type": "switchboard.sideband_closed", "code": 1006, "by_host": False}),
        ],
    }

    recording, unsaid = session_recording(record)

    assert recording.header.session == {
        "instructions": "Be brief.",
        "tools": ["lookup_order"],
        "limits": {"max_output_tokens": "inf", "compaction_input_tokens": 200},
    }
    assert unsaid == ["limits.max_session_seconds = 7200 cannot be said in a session spec; left out"]
    assert [(line.t_ms, line.event) for line in recording.events] == [
        (250.0, speech),
        (250.0, heard),
        (500.0, done),
        (600.0, done),
        (600.0, {"type": "error", "event_id": "e5", "error": {"type": "server_error"}}),
    ]
    assert recording.close is not None
    assert (recording.close.t_ms, recording.close.close.code) == (1000.0, 1011)
    assert parse_recording(recording_lines(recording)) == recording


def _applied(
    entry: dict[str, Any], order: int, applied_at: float, *controls: dict[str, Any]
) -> dict[str, Any]:
    # As the record shows an applied input: its place in the fold, when, and what it sent.
    sent = [{"kind": "control", "control": control} for control in controls]
    return {**entry, "applied_order": order, "applied_at": rfc3339(applied_at), "controls": sent}


def test_a_control_decided_after_the_provider_closed_is_written_before_the_close() -> None:
    """The provider closed the sideband while a worker was still deciding on its last event (the
    host asked for one more response): the control is written where it was decided, and the
    close line after it, never earlier than the line before it, so the file reads back and a
    closed-loop replay closes once the host has sent it."""
    heard = {
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": "e2",
        "item_id": "i1",
        "transcript": "Thanks, bye.",
    }
    create = {"type": "response.create", "event_id": "ctl_3_0", "response": {"tool_choice": "auto"}}
    closed = {"type": "switchboard.sideband_closed", "code": 1000, "by_host": False}
    record = {
        "id": "sess_1",
        "status": "ended",
        "end_reason": "caller_hung_up",
        "created_at": "2026-01-01T00:00:00",
        "log": [
            _logged(None, 99.0, {"type": "switchboard.session_created", "instructions": "Be brief."}),
            _applied(
                _logged(1, 100.0, {"type": "switchboard.sideband_connected", "call_id": "rtc_1"}), 1, 100.0
            ),
            # Its response.create was decided after the provider's close had come.
            _applied(_logged(2, 100.1, heard), 2, 100.14, create),
            _applied(_logged(3, 100.12, closed), 3, 100.15),
        ],
    }

    recording, _unsaid = session_recording(record)

    assert [line.line.control for line in recording.controls] == [create]
    assert recording.close is not None
    assert recording.controls[0].line.t_ms == 140.0 and recording.close.t_ms == 140.0
    assert parse_recording(recording_lines(recording)) == recording


def test_the_requests_an_app_made_are_exported_at_their_place_without_the_gateway_s_fields() -> None:
    """An app's say and end are the only host inputs a replay cannot make itself: each is a
    `request` line after the provider events numbered before it, without who waited for its
    answer or what was playing, at its own time kept between the events around it."""
    done = {"type": "response.done", "event_id": "e1", "response": {"id": "r1", "status": "completed"}}
    created = {
        "type": "response.created",
        "event_id": "e2",
        "response": {"id": "r2", "status": "in_progress"},
    }
    say = {
        "type": "switchboard.agent_say",
        "text": "Your order ships Friday.",
        "request_id": "req_1",
        "gateway_id": "gw_1",
    }
    end = {
        "type": "switchboard.end_requested",
        "reason": "app_ended",
        "request_id": "req_2",
        "gateway_id": "gw_1",
    }
    hold = {"type": "switchboard.hold", "held": True, "playback": {"item_id": "i2", "played_ms": 300}}
    record = {
        "id": "sess_1",
        "status": "ended",
        "end_reason": "app_ended",
        "created_at": "2026-01-01T00:00:00",
        "log": [
            _logged(None, 99.0, {"type": "switchboard.session_created", "instructions": "Be brief."}),
            _logged(1, 100.0, done),
            _logged(2, 100.5, say),
            # Numbered by a gateway whose clock is behind: kept between the events around it.
            _logged(3, 100.4, hold),
            _logged(4, 100.6, created),
            _logged(5, 101.0, end),
            _logged(None, 101.0, {"type": "switchboard.timer_fired", "name": "x"}),
        ],
    }

    recording, _unsaid = session_recording(record)

    assert [
        (placed.after_events, placed.line.t_ms, placed.line.request) for placed in recording.requests
    ] == [
        (1, 500.0, {"type": "switchboard.agent_say", "text": "Your order ships Friday."}),
        (1, 500.0, {"type": "switchboard.hold", "held": True}),
        (2, 1000.0, {"type": "switchboard.end_requested", "reason": "app_ended"}),
    ]
    assert [line.event for line in recording.events] == [done, created]
    assert parse_recording(recording_lines(recording)) == recording
