"""Recordings: reading, writing, and replaying them in playback mode."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from simulator.oracle import wire_errors
from simulator.recording import (
    Gate,
    RecordingError,
    closed_loop_gates,
    parse_recording,
    read_recording,
    record_call,
    recording_lines,
)
from simulator.server import Simulator
from tests.simulator.support import http, running, sideband

SHIPPED = Path(__file__).parents[2] / "recordings" / "three_turn.jsonl"


def test_shipped_recording_is_valid_on_the_wire() -> None:
    """Every event of the shipped three-turn recording passes the strict server oracle."""
    recording = read_recording(SHIPPED)
    assert recording.header.name == "three-turn"
    assert recording.close is not None and recording.close.close.code == 1000
    assert all(wire_errors(line.event, direction="server") == [] for line in recording.events)


def test_playback_replays_in_order_and_records_controls() -> None:
    """Open loop, a call in playback mode sends the recorded events in order whatever the host
    sends, listens, and closes as recorded."""

    async def scenario() -> None:
        recording = read_recording(SHIPPED)
        async with running(Simulator(recording=SHIPPED, speed=0, closed_loop=False)) as simulator:
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


def _lines(*lines: dict[str, Any]) -> list[str]:
    return [json.dumps({"recording": {"version": 1, "name": "gated"}}), *map(json.dumps, lines)]


UPDATED = {"type": "session.updated", "event_id": "e1", "session": {"type": "realtime"}}
CREATED = {
    "type": "response.created",
    "event_id": "e2",
    "response": {"id": "resp_1", "status": "in_progress"},
}
CLEARED = {"type": "input_audio_buffer.cleared", "event_id": "e3"}


def test_closed_loop_playback_holds_each_event_until_the_host_has_sent_what_came_before_it() -> None:
    """A recording holding the host's controls is played in step with them, at any speed: an
    event waits until the host has sent as many controls of each type as the recording has
    before it, and so does the close."""
    recording = parse_recording(
        _lines(
            {"t_ms": 1, "control": {"type": "session.update", "session": {"type": "realtime"}}},
            {"t_ms": 2, "event": UPDATED},
            {"t_ms": 3, "event": CLEARED},
            {"t_ms": 4, "control": {"type": "response.create"}},
            {"t_ms": 5, "event": CREATED},
            {"t_ms": 6, "control": {"type": "response.cancel"}},
            {"t_ms": 7, "close": {"code": 1000}},
        )
    )

    async def quiet(host: Any) -> bool:
        try:
            await asyncio.wait_for(host.socket.recv(), 0.3)
        except TimeoutError:
            return True
        return False

    async def scenario() -> None:
        async with running(Simulator(recording=recording, speed=0)) as simulator, sideband(simulator) as host:
            assert await quiet(host)  # nothing before the host's session.update
            await host.send({"type": "session.update", "session": {"type": "realtime"}})
            assert [await host.next(), await host.next()] == [UPDATED, CLEARED]
            assert await quiet(host)
            await host.send({"type": "response.create"})
            assert await host.next() == CREATED
            assert await quiet(host)  # the close waits for the cancel
            await host.send({"type": "response.cancel"})
            with pytest.raises(ConnectionClosed) as closed:
                await host.next()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000

    asyncio.run(scenario())


def test_closed_loop_playback_fails_naming_the_control_the_host_never_sent() -> None:
    """A recording without the host's controls waits for the answers it counts (its 1st
    response.created for the host's 1st response.create); one that never comes closes the
    sideband 1011 and says so in the call's errors."""
    recording = parse_recording(_lines({"t_ms": 1, "event": CLEARED}, {"t_ms": 2, "event": CREATED}))

    async def scenario() -> None:
        async with running(Simulator(recording=recording, speed=0, gate_timeout_s=0.5)) as simulator:
            async with sideband(simulator) as host:
                assert await host.next() == CLEARED
                with pytest.raises(ConnectionClosed) as closed:
                    await host.next()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
            [error] = next(iter(simulator.calls.values())).errors
            assert error == (
                "closed-loop playback: the host never sent response.create #1, which the recording "
                "has before response.created at 2.0 ms (waited 0.5 s)"
            )

    asyncio.run(scenario())


def test_the_gates_of_a_recording_with_and_without_the_host_s_controls() -> None:
    """With controls, each event waits for every control before it; without, each answer for
    its own control by count (a barge-in's cancelled response.done for the host's cancel; the
    provider's own cancel, `turn_detected`, for nothing)."""
    with_controls = parse_recording(
        _lines(
            {"t_ms": 1, "event": CLEARED},
            {"t_ms": 2, "control": {"type": "response.create"}},
            {"t_ms": 3, "control": {"type": "response.create"}},
            {"t_ms": 4, "event": CREATED},
        )
    )
    gates, closing = closed_loop_gates(with_controls)
    assert gates == [(), (Gate(control_type="response.create", count=2),)]
    assert closing == (Gate(control_type="response.create", count=2),)

    def cancelled(reason: str) -> dict[str, Any]:
        details = {"type": "cancelled", "reason": reason}
        return {
            "type": "response.done",
            "response": {"id": "r", "status": "cancelled", "status_details": details},
        }

    without = parse_recording(
        _lines(
            {"t_ms": 1, "event": UPDATED},
            {"t_ms": 2, "event": CREATED},
            {"t_ms": 3, "event": cancelled("client_cancelled")},
            {"t_ms": 4, "event": CREATED},
            {"t_ms": 5, "event": cancelled("turn_detected")},
        )
    )
    gates, closing = closed_loop_gates(without)
    assert gates == [
        (Gate(control_type="session.update", count=1),),
        (Gate(control_type="response.create", count=1),),
        (Gate(control_type="response.cancel", count=1),),
        (Gate(control_type="response.create", count=2),),
        (),
    ]
    assert closing == ()


def test_a_recording_made_with_another_program_as_host_is_played_open_loop() -> None:
    """A header saying `"host": "other"` (a capture in which another client asked for the
    responses): closed loop or not, nothing waits for the host, and every event goes at once;
    the header reads back as written, and one made with Switchboard as host is written without
    the field."""
    lines = [
        json.dumps({"recording": {"version": 1, "host": "other", "name": "captured"}}),
        json.dumps({"t_ms": 1, "event": UPDATED}),
        json.dumps({"t_ms": 2, "event": CREATED}),
    ]
    recording = parse_recording(lines)
    assert recording.header.host == "other"
    assert closed_loop_gates(recording) == ([(), ()], ())
    assert parse_recording(recording_lines(recording)) == recording
    assert "host" not in json.loads(recording_lines(parse_recording(_lines()))[0])["recording"]

    async def scenario() -> None:
        async with running(Simulator(recording=recording, speed=0, gate_timeout_s=0.5)) as simulator:
            async with sideband(simulator) as host:
                assert [await host.next(), await host.next()] == [UPDATED, CREATED]
            assert next(iter(simulator.calls.values())).errors == []

    asyncio.run(scenario())


def test_an_event_after_a_recorded_request_waits_until_the_request_is_made_again() -> None:
    """A request an app made of the host (`request` line) is never played: the events after it
    wait until `switchboard replay` says it made it again (`POST /_sim/calls/{id}/requests`), as
    does the close; the line reads back where it was, in the order of the times around it."""
    say = {"type": "switchboard.agent_say", "text": "Your order ships Friday."}
    recording = parse_recording(
        _lines(
            {"t_ms": 1, "event": CLEARED},
            {"t_ms": 2, "control": {"type": "response.create"}},
            {"t_ms": 3, "request": say},
            {"t_ms": 4, "event": UPDATED},
            {"t_ms": 5, "close": {"code": 1000}},
        )
    )
    assert [(placed.after_events, placed.line.request) for placed in recording.requests] == [(1, say)]
    assert parse_recording(recording_lines(recording)) == recording
    requested = Gate(control_type="switchboard.agent_say", count=1, is_request=True)
    assert closed_loop_gates(recording) == (
        [(), (Gate(control_type="response.create", count=1), requested)],
        (Gate(control_type="response.create", count=1), requested),
    )

    async def scenario() -> None:
        async with running(Simulator(recording=recording, speed=0)) as simulator:
            call_id = simulator.create_call()
            async with sideband(simulator, call_id) as host:
                assert await host.next() == CLEARED
                await host.send({"type": "response.create"})
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(host.socket.recv(), 0.3)
                base = simulator.http_url.removesuffix("/v1")
                status, _, body = await http(
                    base,
                    "POST",
                    f"/_sim/calls/{call_id}/requests",
                    json.dumps({"type": say["type"]}).encode(),
                )
                assert (status, json.loads(body)) == (200, {"requested": say["type"]})
                assert await host.next() == UPDATED
                with pytest.raises(ConnectionClosed) as closed:
                    await host.next()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
            assert simulator.calls[call_id].errors == []

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
