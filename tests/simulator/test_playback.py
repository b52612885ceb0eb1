"""Recordings: reading, writing, and replaying them in playback mode."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from simulator.oracle import wire_errors
from simulator.recording import RecordingError, parse_recording, read_recording, record_call
from simulator.server import Simulator
from tests.simulator.support import running, sideband

SHIPPED = Path(__file__).parents[2] / "recordings" / "three_turn.jsonl"


def test_shipped_recording_is_valid_on_the_wire() -> None:
    """Every event of the shipped three-turn recording passes the strict server oracle."""
    recording = read_recording(SHIPPED)
    assert recording.header.name == "three-turn"
    assert recording.close is not None and recording.close.close.code == 1000
    assert all(wire_errors(line.event, direction="server") == [] for line in recording.events)


def test_playback_replays_in_order_and_records_controls() -> None:
    """A call in playback mode sends the recorded events in order, listens, and closes as recorded."""

    async def scenario() -> None:
        recording = read_recording(SHIPPED)
        async with running(Simulator(recording=SHIPPED, speed=0)) as simulator:
            call_id = simulator.create_call()
            async with sideband(simulator, call_id) as host:
                await host.send({"type": "response.create"})
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await host.next()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
            assert host.seen == [line.event for line in recording.events]
            log = simulator.calls[call_id]
            assert [entry["control"] for entry in log.controls] == [{"type": "response.create"}]
            assert log.errors == []

    asyncio.run(scenario())


def test_playback_keeps_the_recorded_pace() -> None:
    """At speed 1 events leave no earlier than their offsets from attach."""
    lines = [
        json.dumps({"recording": {"version": 1, "name": "paced"}}),
        json.dumps({"t_ms": 0, "event": {"type": "input_audio_buffer.cleared", "event_id": "e1"}}),
        json.dumps({"t_ms": 120, "event": {"type": "input_audio_buffer.cleared", "event_id": "e2"}}),
        json.dumps({"t_ms": 150, "close": {"code": 4001}}),
    ]

    async def scenario() -> None:
        async with running(Simulator(recording=parse_recording(lines))) as simulator:
            call_id = simulator.create_call()
            async with sideband(simulator, call_id) as host:
                await host.next()
                await host.next()
                with pytest.raises(ConnectionClosed) as closed:
                    await host.next()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4001
            log = simulator.calls[call_id]
            assert log.attached_at is not None
            assert (log.events[1]["t"] - log.attached_at) * 1000 >= 120

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("lines", "bad_line"),
    [
        (['{"recording": {"version": 1, "name": "x"}}', "{oops"], 2),
        (['{"t_ms": 0, "event": {}}'], 1),
        (['{"recording": {"version": 2, "name": "x"}}'], 1),
        (
            [
                '{"recording": {"version": 1, "name": "x"}}',
                '{"t_ms": 5, "event": {}}',
                '{"t_ms": 4, "event": {}}',
            ],
            3,
        ),
        (
            [
                '{"recording": {"version": 1, "name": "x"}}',
                '{"t_ms": 5, "close": {"code": 1000}}',
                '{"t_ms": 6, "event": {}}',
            ],
            3,
        ),
    ],
)
def test_bad_recording_lines_are_named(lines: list[str], bad_line: int) -> None:
    """A malformed, misplaced or out-of-order line raises RecordingError with its line number."""
    with pytest.raises(RecordingError) as refused:
        parse_recording(lines)
    assert refused.value.line == bad_line


def test_record_call_round_trips_through_the_reader() -> None:
    """A call log written by record_call reads back with the same events and close."""
    log = {
        "call_id": "rtc_1",
        "attached_at": 100.0,
        "closed_at": 100.5,
        "close_code": 1000,
        "events": [{"t": 100.25, "event": {"type": "input_audio_buffer.cleared", "event_id": "event_1"}}],
    }
    recording = parse_recording(record_call(log, name="tiny"))
    assert recording.header.name == "tiny"
    assert [(line.t_ms, line.event) for line in recording.events] == [
        (250.0, {"type": "input_audio_buffer.cleared", "event_id": "event_1"})
    ]
    assert recording.close is not None and recording.close.t_ms == 500.0


def test_a_header_carries_the_session_a_replay_is_created_with() -> None:
    """A header's `session` object reads back as written, and a header without one is written as
    the first format had it (no `session` key), so older readers still take it."""
    log = {"call_id": "rtc_1", "attached_at": 100.0, "closed_at": None, "close_code": None, "events": []}
    session = {"instructions": "Be brief.", "tools": ["lookup_order"], "limits": {"max_session_seconds": 60}}

    with_session = record_call(log, name="tiny", session=session)
    without = record_call(log, name="tiny")

    assert parse_recording(with_session).header.session == session
    assert parse_recording(without).header.session is None
    assert "session" not in json.loads(without[0])["recording"]


def test_the_shipped_tool_recording_offers_the_tool_it_calls() -> None:
    """order_lookup.jsonl's header session offers lookup_order, the function its events call,
    and stays open after the call so a replay's tool output can reach the provider."""
    recording = read_recording(SHIPPED.with_name("order_lookup.jsonl"))
    assert recording.header.session is not None
    assert recording.header.session["tools"] == ["lookup_order"]
    called = [
        line for line in recording.events if line.event["type"] == "response.function_call_arguments.done"
    ]
    assert [line.event["name"] for line in called] == ["lookup_order"]
    assert recording.close is not None and recording.close.t_ms - called[0].t_ms >= 3_000
    assert all(wire_errors(line.event, direction="server") == [] for line in recording.events)
