"""Scripted calls over a real sideband: turn order (PROTOCOL.md §4) and client events (§3)."""

from __future__ import annotations

import asyncio
from typing import Any

from simulator.host import host_call, response_create, session_update
from simulator.oracle import wire_errors
from simulator.script import CallScript, ModelSays
from simulator.server import Simulator
from tests.simulator.support import QUICK, Sideband, quick, running, sideband, types

USER_TURN = [
    "input_audio_buffer.speech_started",
    "input_audio_buffer.speech_stopped",
    "input_audio_buffer.committed",
    "conversation.item.added",
    "conversation.item.done",
]
AUDIO_ANSWER_HEAD = [
    "response.created",
    "rate_limits.updated",
    "response.output_item.added",
    "conversation.item.added",
    "response.content_part.added",
    "output_audio_buffer.started",
]
AUDIO_ANSWER_TAIL = [
    "response.output_audio.done",
    "response.output_audio_transcript.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
]


def _collapse(kinds: list[str]) -> list[str]:
    """The types with each run of deltas folded into one `…delta*` entry."""
    folded: list[str] = []
    for kind in kinds:
        marker = kind + "*"
        if kind.endswith(".delta"):
            if not folded or folded[-1] != marker:
                folded.append(marker)
        else:
            folded.append(kind)
    return folded


def _silent(**changes: Any) -> CallScript:
    return CallScript(timing=QUICK, **changes)


async def _answer_and_cut(host: Sideband) -> str:
    """Ask for an answer and wait for its first transcript delta; answer its response id."""
    await host.send({"type": "response.create", "event_id": "c1"})
    created = await host.until("response.created")
    await host.until("response.output_audio_transcript.delta")
    response_id: str = created[-1]["response"]["id"]
    return response_id


def test_three_turn_call_follows_the_documented_order() -> None:
    """A host-driven three-turn call yields §4.1's order per turn, valid events, and a 1000 close."""

    async def scenario() -> None:
        async with running(Simulator(quick("three_turn"))) as simulator:
            call_id = simulator.create_call()
            received = await host_call(simulator.ws_url, call_id)
            log = simulator.calls[call_id]

        assert received == [entry["event"] for entry in log.events]
        assert log.errors == []
        assert all(wire_errors(event, direction="server") == [] for event in received)
        assert (log.status, log.close_code) == ("ended", 1000)
        transcript = [
            "conversation.item.input_audio_transcription.delta*",
            "conversation.item.input_audio_transcription.completed",
        ]
        audio_answer = [
            *AUDIO_ANSWER_HEAD,
            "response.output_audio_transcript.delta*",
            *AUDIO_ANSWER_TAIL,
            "output_audio_buffer.stopped",
        ]
        function_call = [
            "response.created",
            "rate_limits.updated",
            "response.output_item.added",
            "conversation.item.added",
            "response.function_call_arguments.delta*",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ]
        tool_output = ["conversation.item.added", "conversation.item.done"]
        assert _collapse(types(received)) == [
            "session.updated",
            *USER_TURN,
            *transcript,
            *audio_answer,
            *USER_TURN,
            *transcript,
            *function_call,
            *tool_output,
            *audio_answer,
            *USER_TURN,
            *transcript,
            *audio_answer,
        ]
        dones = [event["response"] for event in received if event["type"] == "response.done"]
        inputs = [done["usage"]["input_tokens"] for done in dones]
        assert inputs == sorted(inputs) and inputs[0] < inputs[-1]
        assert dones[1]["output"][0]["arguments"] == '{"order_id": "4417"}'
        assert [entry["control"]["type"] for entry in log.controls] == [
            "session.update",
            "response.create",
            "response.create",
            "conversation.item.create",
            "response.create",
            "response.create",
        ]

    asyncio.run(scenario())


def test_second_response_create_conflicts_with_the_active_one() -> None:
    """A response.create during an active response gets only conversation_already_has_active_response."""

    async def scenario() -> None:
        slow = QUICK.model_copy(update={"delta_interval_ms": 50})
        script = CallScript(timing=slow, model=[ModelSays(say="one two three four five six")])
        async with running(Simulator(script)) as simulator, sideband(simulator) as host:
            await host.send({"type": "response.create", "event_id": "c1"})
            created = await host.until("response.created")
            await host.send({"type": "response.create", "event_id": "c2"})
            error = await host.until("error")
            assert "response.created" not in types(error)
            assert error[-1]["error"]["code"] == "conversation_already_has_active_response"
            assert error[-1]["error"]["event_id"] == "c2"
            assert created[-1]["response"]["id"] in error[-1]["error"]["message"]

    asyncio.run(scenario())


def test_cancel_finishes_the_response_as_client_cancelled() -> None:
    """response.cancel yields the tail events and response.done cancelled/client_cancelled."""

    async def scenario() -> None:
        slow = QUICK.model_copy(update={"delta_interval_ms": 30})
        script = CallScript(timing=slow, model=[ModelSays(say="a long answer " * 10)])
        async with running(Simulator(script)) as simulator, sideband(simulator) as host:
            response_id = await _answer_and_cut(host)
            await host.send({"type": "response.cancel", "event_id": "c2"})
            tail = await host.until("response.done")
            assert _collapse(types(tail))[-6:] == AUDIO_ANSWER_TAIL
            done = tail[-1]["response"]
            assert done["id"] == response_id and done["status"] == "cancelled"
            assert done["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
            assert done["output"][0]["status"] == "incomplete"
            await host.send({"type": "output_audio_buffer.clear"})
            cleared = await host.next()
            assert cleared["type"] == "output_audio_buffer.cleared"
            assert cleared["response_id"] == response_id

            await host.send({"type": "response.cancel", "event_id": "c3"})
            error = await host.next()
            assert error["error"]["code"] == "response_cancel_not_active"
            assert error["error"]["event_id"] == "c3"

    asyncio.run(scenario())


def test_truncate_checks_bounds_and_cuts_the_transcript() -> None:
    """Truncation refuses negative and overlong audio_end_ms, and otherwise cuts the item."""

    async def scenario() -> None:
        # Six words at the default 300 ms per word: 1800 ms of audio.
        script = _silent(model=[ModelSays(say="one two three four five six")])
        async with running(Simulator(script)) as simulator, sideband(simulator) as host:
            await host.send({"type": "response.create"})
            done = (await host.until("response.done"))[-1]
            await host.until("output_audio_buffer.stopped")
            item_id = done["response"]["output"][0]["id"]

            async def truncate(audio_end_ms: int) -> dict[str, Any]:
                await host.send(
                    {
                        "type": "conversation.item.truncate",
                        "event_id": "t",
                        "item_id": item_id,
                        "content_index": 0,
                        "audio_end_ms": audio_end_ms,
                    }
                )
                return await host.next()

            negative = await truncate(-11)
            assert negative["error"]["code"] == "integer_below_min_value"
            assert negative["error"]["param"] == "audio_end_ms"
            beyond = await truncate(55960)
            assert beyond["error"]["message"] == ("Audio content of 1800ms is already shorter than 55960ms")
            truncated = await truncate(900)
            assert truncated == {
                **truncated,
                "type": "conversation.item.truncated",
                "item_id": item_id,
                "audio_end_ms": 900,
            }
            await host.send({"type": "conversation.item.retrieve", "item_id": item_id})
            retrieved = await host.next()
            assert retrieved["item"]["content"][0]["transcript"] == "one two three"
            await host.send(
                {
                    "type": "conversation.item.truncate",
                    "item_id": "item_nope",
                    "content_index": 0,
                    "audio_end_ms": 0,
                }
            )
            assert (await host.next())["error"]["code"] == "item_truncate_invalid_item_id"

    asyncio.run(scenario())


def test_malformed_client_events_get_documented_errors() -> None:
    """Invalid JSON, a missing or unknown type, and an unknown field each get an error event."""

    async def scenario() -> None:
        async with running(Simulator(_silent())) as simulator, sideband(simulator) as host:
            await host.send("{not json")
            assert (await host.next())["error"]["code"] == "invalid_json"
            await host.send({"event_id": "c1"})
            missing = await host.next()
            assert missing["error"]["message"] == "The 'type' field is missing."
            assert missing["error"]["event_id"] == "c1"
            await host.send({"type": "scooby.dooby.doo"})
            unknown = await host.next()
            assert (unknown["error"]["code"], unknown["error"]["param"]) == (
                "invalid_value",
                "type",
            )
            await host.send({"type": "response.create", "response": {"modalities": ["text"]}})
            beta = await host.next()
            assert beta["error"]["code"] == "unknown_parameter"
            assert beta["error"]["param"] == "response.modalities"
            log = next(iter(simulator.calls.values()))
            assert any("response.modalities" in error for error in log.errors)
            assert all(wire_errors(e["event"], direction="server") == [] for e in log.events)

    asyncio.run(scenario())


def test_conversation_items_are_created_deleted_and_checked() -> None:
    """Item create answers added+done, unknown previous ids and deletes of missing items fail."""

    async def scenario() -> None:
        async with running(Simulator(_silent())) as simulator, sideband(simulator) as host:
            note = {
                "type": "message",
                "role": "system",
                "content": [{"type": "input_text", "text": "Customer is VIP."}],
            }
            await host.send({"type": "conversation.item.create", "item": note})
            added, done = await host.next(), await host.next()
            assert (added["type"], done["type"]) == (
                "conversation.item.added",
                "conversation.item.done",
            )
            item_id = added["item"]["id"]
            await host.send(
                {
                    "type": "conversation.item.create",
                    "event_id": "c2",
                    "previous_item_id": "item_nope",
                    "item": note,
                }
            )
            assert (await host.next())["error"]["event_id"] == "c2"
            await host.send({"type": "conversation.item.delete", "item_id": item_id})
            deleted = await host.next()
            assert (deleted["type"], deleted["item_id"]) == ("conversation.item.deleted", item_id)
            await host.send({"type": "conversation.item.delete", "item_id": item_id})
            assert (await host.next())["type"] == "error"

    asyncio.run(scenario())


def test_server_vad_barge_in_cancels_the_answer_itself() -> None:
    """With interrupt_response on, a caller speaking mid-answer cancels it as turn_detected."""

    async def scenario() -> None:
        timing = QUICK.model_copy(update={"delta_interval_ms": 20, "chars_per_delta": 4})
        script = quick("barge_in", timing=timing)
        async with running(Simulator(script)) as simulator, sideband(simulator) as host:
            await host.send(session_update())
            await host.until("conversation.item.input_audio_transcription.completed")
            await host.send(response_create())
            answer = await host.until("response.done")
            kinds = types(answer)
            assert kinds.index("input_audio_buffer.speech_started") > kinds.index("response.created")
            done = answer[-1]["response"]
            assert done["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
            after = [await host.next(), await host.next()]
            assert types(after) == ["output_audio_buffer.cleared", "conversation.item.truncated"]
            assert after[1]["item_id"] == done["output"][0]["id"]

    asyncio.run(scenario())


def test_create_response_on_lets_the_simulator_answer_by_itself() -> None:
    """With the default turn detection (create_response true) each user turn is answered unasked."""

    async def scenario() -> None:
        async with running(Simulator(quick("function_call"))) as simulator:
            call_id = simulator.create_call()
            async with sideband(simulator, call_id) as host:
                events = await host.until("response.done")
            assert "response.created" in types(events)
            assert simulator.calls[call_id].controls == []

    asyncio.run(scenario())


def test_text_and_out_of_band_responses() -> None:
    """Text modality streams output_text; conversation "none" adds no items and echoes metadata."""

    async def scenario() -> None:
        async with running(Simulator(_silent())) as simulator, sideband(simulator) as host:
            await host.send({"type": "response.create", "response": {"output_modalities": ["text"]}})
            text = await host.until("response.done")
            assert "response.output_text.done" in types(text)
            assert "output_audio_buffer.started" not in types(text)
            assert text[-1]["response"]["output"][0]["content"][0]["type"] == "output_text"

            await host.send(
                {
                    "type": "response.create",
                    "response": {
                        "conversation": "none",
                        "metadata": {"purpose": "summary"},
                        "output_modalities": ["text"],
                        "instructions": "Summarize.",
                    },
                }
            )
            summary = await host.until("response.done")
            assert not any(kind.startswith("conversation.item") for kind in types(summary))
            assert summary[0]["response"]["conversation_id"] is None
            assert summary[-1]["response"]["metadata"] == {"purpose": "summary"}
            log = next(iter(simulator.calls.values()))
            assert log.errors == []

    asyncio.run(scenario())


def test_session_update_merges_into_the_effective_config() -> None:
    """session.created is sent on attach when scripted; session.updated carries the merged config."""

    async def scenario() -> None:
        script = _silent(session_created_on_attach=True)
        async with running(Simulator(script)) as simulator, sideband(simulator) as host:
            created = await host.next()
            assert created["type"] == "session.created"
            await host.send(session_update("Be brief."))
            updated = (await host.next())["session"]
            detection = updated["audio"]["input"]["turn_detection"]
            assert updated["instructions"] == "Be brief."
            assert updated["id"] == created["session"]["id"]
            assert (detection["create_response"], detection["threshold"]) == (False, 0.5)
            assert updated["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24000}
            assert wire_errors({**created, "session": updated}, direction="server") == []

    asyncio.run(scenario())
