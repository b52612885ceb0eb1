"""The models the simulator serves: every current and deprecated name accepted and echoed, the
defaults, refusals worded as the service's (REST 400 and `error` events naming the field), and a
reasoning model's preambles (PROTOCOL.md "Models and their lifecycle", §4.5)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from simulator.host import host_call, response_create, session_update
from simulator.live_script import LiveScript, LiveSwitches, LiveTiming
from simulator.oracle import wire_errors
from simulator.script import CallerHangsUp, CallerSays, CallScript, FunctionCall, ModelCalls, ModelSays
from simulator.server import Simulator
from tests.simulator.support import AUTH, QUICK, Sideband, http, quick, running, sideband, types

REALTIME_MODELS = (
    "gpt-realtime",
    "gpt-realtime-mini",
    "gpt-realtime-1.5",
    "gpt-realtime-2",
    "gpt-realtime-2.1",
    "gpt-realtime-2.1-mini",
)
NOT_REASONING = ("gpt-realtime", "gpt-realtime-mini", "gpt-realtime-1.5")
LIVE_MODELS = ("gpt-live-1", "gpt-live-1.1")
TRANSCRIPTION_MODELS = (
    "whisper-1",
    "gpt-4o-transcribe",
    "gpt-4o-mini-transcribe",
    "gpt-4o-transcribe-diarize",
    "gpt-live-transcribe",
    "gpt-transcribe",
    "gpt-realtime-whisper",
)
# LIVE_PROTOCOL.md "Custom voices": the 23 built-in names (the Realtime ten among them).
VOICES = [
    "alloy",
    "ash",
    "ballad",
    "beacon",
    "bossa",
    "cedar",
    "cinder",
    "coral",
    "delta",
    "echo",
    "gleam",
    "marin",
    "meridian",
    "quartz",
    "ripple",
    "sage",
    "shida",
    "shimmer",
    "stone",
    "tempo",
    "verse",
    "vesper",
    "willow",
]
EFFORTS = ("minimal", "low", "medium", "high", "xhigh")
OFFER = b"v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
BOUNDARY = "sb-boundary"
JSON = {**AUTH, "Content-Type": "application/json"}
PREAMBLE = "Let me check that order."
ANSWER = "It ships Friday."


def _multipart(session: dict[str, Any]) -> bytes:
    return (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="sdp"\r\n'
            "Content-Type: application/sdp\r\n\r\n"
        ).encode()
        + OFFER
        + (
            f'\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name="session"\r\n'
            f"Content-Type: application/json\r\n\r\n{json.dumps(session)}\r\n--{BOUNDARY}--\r\n"
        ).encode()
    )


async def _create_call(simulator: Simulator, session: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    """POST /v1/realtime/calls with this session: the status, the call id, the JSON error body."""
    headers = {**AUTH, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    status, answer_headers, body = await http(
        simulator.http_url, "POST", "/v1/realtime/calls", _multipart({"type": "realtime", **session}), headers
    )
    if status == 201:
        return status, answer_headers["location"].rsplit("/", 1)[-1], {}
    return status, "", json.loads(body)


def _refused(body: dict[str, Any]) -> tuple[str, str, str]:
    error = body["error"]
    return error["type"], error["code"], error["param"]


async def _update(host: Sideband, session: dict[str, Any], event_id: str = "u") -> dict[str, Any]:
    """Send a session.update; answer the session.updated or the error it got."""
    await host.send(
        {"type": "session.update", "event_id": event_id, "session": {"type": "realtime", **session}}
    )
    answer = await host.next()
    assert answer["type"] in ("session.updated", "error"), answer
    return answer


def _transcription(model: str) -> dict[str, Any]:
    return {"audio": {"input": {"transcription": {"model": model}}}}


def test_every_realtime_model_is_accepted_and_echoed_in_session_created() -> None:
    """Each Realtime model (current and deprecated) makes a call whose session.created names it,
    with the transcription model and voice the call was created with."""

    async def scenario() -> None:
        script = CallScript(timing=QUICK, session_created_on_attach=True)
        async with running(Simulator(script)) as simulator:
            for index, model in enumerate(REALTIME_MODELS):
                transcriber = TRANSCRIPTION_MODELS[index]
                voice = VOICES[index * 3]
                session = {**_transcription(transcriber), "model": model}
                session["audio"]["output"] = {"voice": voice}
                status, call_id, _ = await _create_call(simulator, session)
                assert status == 201, model
                async with sideband(simulator, call_id) as host:
                    created = (await host.next())["session"]
                assert created["model"] == model
                assert created["audio"]["input"]["transcription"] == {"model": transcriber}
                assert created["audio"]["output"]["voice"] == voice
                assert simulator.calls[call_id].errors == []

    asyncio.run(scenario())


def test_a_call_that_names_no_model_gets_the_current_defaults() -> None:
    """Without a model the call runs gpt-realtime-2.1 transcribed by gpt-transcribe, and the
    example host asks for gpt-transcribe too: no default has a shutdown date."""

    async def scenario() -> None:
        script = CallScript(timing=QUICK, session_created_on_attach=True)
        async with running(Simulator(script)) as simulator, sideband(simulator) as host:
            created = (await host.next())["session"]
        assert created["model"] == "gpt-realtime-2.1"
        assert created["audio"]["input"]["transcription"] == {"model": "gpt-transcribe"}
        assert session_update()["session"]["audio"]["input"]["transcription"] == {"model": "gpt-transcribe"}

    asyncio.run(scenario())


def test_every_transcription_model_and_voice_is_echoed_in_session_updated() -> None:
    """session.update to each transcription model and each built-in voice is answered with the
    effective session naming it; the voice of a response.create is taken too."""

    async def scenario() -> None:
        async with running(Simulator(CallScript(timing=QUICK))) as simulator:
            call_id = simulator.create_call()
            async with sideband(simulator, call_id) as host:
                for model in TRANSCRIPTION_MODELS:
                    updated = await _update(host, _transcription(model))
                    assert updated["session"]["audio"]["input"]["transcription"]["model"] == model
                for voice in VOICES:
                    updated = await _update(host, {"audio": {"output": {"voice": voice}}})
                    assert updated["session"]["audio"]["output"]["voice"] == voice
                custom = await _update(host, {"audio": {"output": {"voice": {"id": "voice_1234"}}}})
                assert custom["session"]["audio"]["output"]["voice"] == {"id": "voice_1234"}
                await host.send(
                    {"type": "response.create", "response": {"audio": {"output": {"voice": "cedar"}}}}
                )
                done = (await host.until("response.done"))[-1]
                assert done["response"]["audio"]["output"]["voice"] == "cedar"
            assert simulator.calls[call_id].errors == []

    asyncio.run(scenario())


def test_a_model_the_call_cannot_take_is_refused_with_400_naming_the_field() -> None:
    """Create and accept refuse an unknown model, a Live model, an unknown transcription model or
    voice, and reasoning settings for a model without them: 400 invalid_request_error, the
    field as param; no call is made."""

    async def scenario() -> None:
        async with running(Simulator()) as simulator:
            cases = [
                ({"model": "gpt-realtime-3"}, ("invalid_value", "session.model")),
                ({"model": "gpt-live-1.1"}, ("invalid_model", "session.model")),
                (
                    {"model": "gpt-realtime-2.1", **_transcription("whisper-2")},
                    ("invalid_value", "session.audio.input.transcription.model"),
                ),
                ({"audio": {"output": {"voice": "nova"}}}, ("invalid_value", "session.audio.output.voice")),
                (
                    {"model": "gpt-realtime", "reasoning": {"effort": "low"}},
                    ("unsupported_parameter", "session.reasoning"),
                ),
                (
                    {"model": "gpt-realtime-1.5", "parallel_tool_calls": True},
                    ("unsupported_parameter", "session.parallel_tool_calls"),
                ),
            ]
            for session, (code, param) in cases:
                status, _, body = await _create_call(simulator, session)
                assert status == 400, session
                assert _refused(body) == ("invalid_request_error", code, param)
            assert "'gpt-realtime-2.1'" in _refused_message(
                await _create_call(simulator, {"model": "gpt-4o"})
            )
            assert list(simulator.calls) == []

            call_id = simulator.create_call()
            path = f"/v1/realtime/calls/{call_id}/accept"
            for model, code in (("gpt-live-1", "invalid_model"), ("nope", "invalid_value")):
                body = json.dumps({"type": "realtime", "model": model}).encode()
                status, _, raw = await http(simulator.http_url, "POST", path, body, JSON)
                assert status == 400
                assert _refused(json.loads(raw)) == ("invalid_request_error", code, "model")
            accepted = json.dumps({"type": "realtime", "model": "gpt-realtime-2.1-mini"}).encode()
            status, _, _ = await http(simulator.http_url, "POST", path, accepted, JSON)
            assert status == 200
            assert simulator.calls[call_id].accepts != []

    asyncio.run(scenario())


def _refused_message(created: tuple[int, str, dict[str, Any]]) -> str:
    status, _, body = created
    assert status == 400
    return str(body["error"]["message"])


def test_session_update_refusals_are_error_events_and_change_nothing() -> None:
    """On the sideband a bad model, transcription model, voice or reasoning setting is an
    `error` naming the field and the client event; the session keeps its config. Reasoning and
    parallel_tool_calls are taken by the reasoning models, at every effort."""

    async def scenario() -> None:
        async with running(Simulator(CallScript(timing=QUICK))) as simulator:
            status, call_id, _ = await _create_call(simulator, {"model": "gpt-realtime"})
            assert status == 201
            async with sideband(simulator, call_id) as host:
                refused = [
                    await _update(host, {"model": "gpt-live-1"}, "u1"),
                    await _update(host, {"model": "o4-realtime"}, "u2"),
                    await _update(host, _transcription("gpt-5-transcribe"), "u3"),
                    await _update(host, {"audio": {"output": {"voice": "onyx"}}}, "u4"),
                    await _update(host, {"reasoning": {"effort": "high"}}, "u5"),
                    await _update(host, {"parallel_tool_calls": True}, "u6"),
                ]
                both = {"model": "gpt-transcribe", "language": "en", "languages": ["en", "de"]}
                refused.append(await _update(host, {"audio": {"input": {"transcription": both}}}, "u7"))
                assert [(e["type"], e["error"]["param"], e["error"]["event_id"]) for e in refused] == [
                    ("error", "session.model", "u1"),
                    ("error", "session.model", "u2"),
                    ("error", "session.audio.input.transcription.model", "u3"),
                    ("error", "session.audio.output.voice", "u4"),
                    ("error", "session.reasoning", "u5"),
                    ("error", "session.parallel_tool_calls", "u6"),
                    ("error", "session.audio.input.transcription.languages", "u7"),
                ]
                assert {e["error"]["type"] for e in refused} == {"invalid_request_error"}
                assert refused[0]["error"]["code"] == "invalid_model"

                await host.send(
                    {
                        "type": "response.create",
                        "event_id": "r1",
                        "response": {"reasoning": {"effort": "low"}},
                    }
                )
                error = await host.next()
                assert (error["type"], error["error"]["param"], error["error"]["event_id"]) == (
                    "error",
                    "response.reasoning",
                    "r1",
                )
                unchanged = await _update(host, {})
                assert unchanged["session"]["model"] == "gpt-realtime"
                assert "reasoning" not in unchanged["session"]

                for model in ("gpt-realtime-2", "gpt-realtime-2.1", "gpt-realtime-2.1-mini"):
                    for effort in EFFORTS:
                        updated = await _update(
                            host,
                            {"model": model, "reasoning": {"effort": effort}, "parallel_tool_calls": True},
                        )
                        assert updated["type"] == "session.updated", updated
                        session = updated["session"]
                        assert (session["model"], session["reasoning"], session["parallel_tool_calls"]) == (
                            model,
                            {"effort": effort},
                            True,
                        )
                # The oracle knows the efforts: another is refused as the SDK's types refuse it.
                bad_effort = await _update(host, {"reasoning": {"effort": "maximal"}}, "u8")
                assert (bad_effort["error"]["code"], bad_effort["error"]["param"]) == (
                    "invalid_value",
                    "session.reasoning.effort",
                )
                # A model without reasoning is refused while the session still asks for it.
                still = await _update(host, {"model": "gpt-realtime-mini"}, "u9")
                assert still["error"]["param"] == "session.reasoning"
            log = simulator.calls[call_id]
        assert all(wire_errors(entry["event"], direction="server") == [] for entry in log.events)
        assert all(not error.startswith("server") for error in log.errors)

    asyncio.run(scenario())


async def _live_started(simulator: Simulator, model: str) -> tuple[int, dict[str, Any]]:
    """Create a Live WebRTC session of `model`; answer the status and, if made, its session."""
    body = {
        "session": {"model": model, "audio": {"output": {"voice": "meridian"}}},
        "transport": {"type": "webrtc", "sdp": "v=0\r\n"},
    }
    status, _, raw = await http(
        simulator.http_url, "POST", "/v1/live/sessions", json.dumps(body).encode(), JSON
    )
    answer = json.loads(raw)
    if status != 200:
        return status, answer
    url = f"{simulator.ws_url}/live/sessions/{answer['session']['id']}/attach"
    async with connect(url, additional_headers=AUTH) as socket:
        while True:
            event = json.loads(await asyncio.wait_for(socket.recv(), 3))
            if event["type"] == "session.started":
                return status, event["session"]


def test_live_sessions_take_the_live_models_only() -> None:
    """Both Live models are accepted and echoed in the session object; a Realtime model on a Live
    session is invalid_model, an unknown one invalid_value, both naming session.model."""

    async def scenario() -> None:
        live_script = LiveScript(
            timing=LiveTiming(fragment_ms=10, reply_after_ms=5, answer_wait_ms=500),
            switches=LiveSwitches(session_started_on_attach=True),
        )
        async with running(Simulator(live_script=live_script)) as simulator:
            for model in LIVE_MODELS:
                status, session = await _live_started(simulator, model)
                assert status == 200
                assert (session["model"], session["audio"]["output"]["voice"]) == (model, "meridian")
            for model, code in (("gpt-realtime-2.1", "invalid_model"), ("gpt-live-2", "invalid_value")):
                status, answer = await _live_started(simulator, model)
                assert status == 400
                assert _refused(answer) == ("invalid_request_error", code, "session.model")
            # An outbound call's session is checked the same way, before anything is dialled.
            outbound = {
                "session": {"model": "gpt-realtime-2.1-mini"},
                "transport": {
                    "type": "sip",
                    "destination": "+15550000001",
                    "trunk": {
                        "provider_url": "sips:sip.example.com:5061",
                        "auth": {"type": "digest", "username": "acme", "password": "s3cret"},
                        "caller_number": "+14155550100",
                    },
                },
            }
            status, _, raw = await http(
                simulator.http_url, "POST", "/v1/live/sessions", json.dumps(outbound).encode(), JSON
            )
            assert status == 400
            assert _refused(json.loads(raw)) == ("invalid_request_error", "invalid_model", "session.model")
            assert simulator.live.dials.dials == [] and simulator.live.dials.refused == 1
            assert all(session.log.errors == [] for session in simulator.live.sessions.values())
            assert len(simulator.live.sessions) == len(LIVE_MODELS)

    asyncio.run(scenario())


async def _read_until_closed(host: Sideband) -> None:
    try:
        while True:
            await host.next()
    except ConnectionClosed:
        return


def _response_events(events: list[dict[str, Any]], response_id: str) -> list[dict[str, Any]]:
    return [event for event in events if event.get("response_id") == response_id]


def test_a_reasoning_model_speaks_its_preamble_as_a_message_of_its_own() -> None:
    """One response, two spoken messages: each its own output item (output_index 0 then 1), the
    second added after the first, one playback for both, and every event valid."""

    async def scenario() -> None:
        script = CallScript(timing=QUICK, model=[ModelSays(say=ANSWER, preamble=PREAMBLE)])
        async with running(Simulator(script)) as simulator:
            status, call_id, _ = await _create_call(simulator, {"model": "gpt-realtime-2.1"})
            assert status == 201
            async with sideband(simulator, call_id) as host:
                await host.send({"type": "response.create"})
                events = await host.until("response.done")
                events += await host.until("output_audio_buffer.stopped")
            log = simulator.calls[call_id]
        assert log.errors == []
        done = next(e for e in events if e["type"] == "response.done")["response"]
        assert done["status"] == "completed"
        first, second = done["output"]
        assert [item["content"][0]["transcript"] for item in done["output"]] == [PREAMBLE, ANSWER]
        added = [e for e in events if e["type"] == "response.output_item.added"]
        assert [(e["output_index"], e["item"]["id"]) for e in added] == [(0, first["id"]), (1, second["id"])]
        transcripts = [e for e in events if e["type"] == "response.output_audio_transcript.done"]
        assert [(e["output_index"], e["item_id"], e["transcript"]) for e in transcripts] == [
            (0, first["id"], PREAMBLE),
            (1, second["id"], ANSWER),
        ]
        for event in events:
            if "item_id" in event and "output_index" in event:
                assert event["output_index"] == (0 if event["item_id"] == first["id"] else 1), event
        second_added = next(
            e for e in events if e["type"] == "conversation.item.added" and e["item"]["id"] == second["id"]
        )
        assert second_added["previous_item_id"] == first["id"]
        kinds = types(events)
        assert kinds.count("output_audio_buffer.started") == kinds.count("output_audio_buffer.stopped") == 1
        assert kinds.index("output_audio_buffer.started") < kinds.index(
            "response.output_audio_transcript.delta"
        )

    asyncio.run(scenario())


def test_a_preamble_comes_before_a_function_call_and_only_from_a_reasoning_model() -> None:
    """On gpt-realtime-2.1-mini the response is [message, function_call] with indexes 0 and 1;
    on gpt-realtime the same script entry is the function call alone."""

    async def scenario() -> None:
        call = FunctionCall(name="lookup_order", arguments={"order_id": "4417"})
        entry = ModelCalls(function_call=call, preamble=PREAMBLE)
        outputs = {}
        async with running(Simulator(CallScript(timing=QUICK, model=[entry]))) as simulator:
            for model in ("gpt-realtime-2.1-mini", "gpt-realtime"):
                status, call_id, _ = await _create_call(simulator, {"model": model})
                assert status == 201
                async with sideband(simulator, call_id) as host:
                    await host.send({"type": "response.create"})
                    events = await host.until("response.done")
                assert simulator.calls[call_id].errors == []
                outputs[model] = (events, events[-1]["response"]["output"])
        events, output = outputs["gpt-realtime-2.1-mini"]
        assert [item["type"] for item in output] == ["message", "function_call"]
        assert output[0]["content"] == [{"type": "output_audio", "transcript": PREAMBLE}]
        arguments = next(e for e in events if e["type"] == "response.function_call_arguments.done")
        assert (arguments["output_index"], arguments["call_id"]) == (1, output[1]["call_id"])
        assert "output_audio_buffer.started" in types(events)
        plain_events, plain = outputs["gpt-realtime"]
        assert [item["type"] for item in plain] == ["function_call"]
        assert "output_audio_buffer.started" not in types(plain_events)

    asyncio.run(scenario())


def test_a_barge_in_during_the_preamble_cuts_it_and_the_unplayed_answer() -> None:
    """The caller talks while the preamble plays: the response is cancelled, the preamble is
    truncated where playback stood and the answer, whose audio never played, at 0 ms."""

    async def scenario() -> None:
        timing = QUICK.model_copy(update={"delta_interval_ms": 20, "chars_per_delta": 8})
        long_answer = "It ships on Friday with the courier and should reach you by noon. " * 3
        script = CallScript(
            timing=timing,
            caller=[
                CallerSays(say="Where is my order?"),
                CallerSays(say="Wait, one more thing", after_ms=250, during_response=True),
                CallerHangsUp(hangup=True, after_ms=50),
            ],
            # Seven words: 2100 ms of preamble audio, far more than plays before the barge-in.
            model=[ModelSays(say=long_answer.strip(), preamble="Let me check that order for you.")],
        )
        async with running(Simulator(script)) as simulator:
            status, call_id, _ = await _create_call(simulator, {"model": "gpt-realtime-2"})
            assert status == 201
            async with sideband(simulator, call_id) as host:
                await host.send(session_update())
                await host.until("conversation.item.input_audio_transcription.completed")
                await host.send(response_create())
                await _read_until_closed(host)
            log = simulator.calls[call_id]
        assert log.errors == []
        events = [entry["event"] for entry in log.events]
        done = next(e for e in events if e["type"] == "response.done")["response"]
        assert done["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
        preamble, answer = done["output"]
        assert (preamble["status"], answer["status"]) == ("completed", "incomplete")
        cut = [
            (e["item_id"], e["audio_end_ms"]) for e in events if e["type"] == "conversation.item.truncated"
        ]
        assert [item_id for item_id, _ in cut] == [preamble["id"], answer["id"]]
        assert 0 < cut[0][1] < 2100 and cut[1][1] == 0

    asyncio.run(scenario())


def test_the_packaged_preambles_script_runs_on_the_default_model() -> None:
    """`preambles` against the example host on a call that names no model (so gpt-realtime-2.1):
    [message, function_call], then [message, message], then one message, all events valid."""

    async def scenario() -> None:
        async with running(Simulator(quick("preambles"))) as simulator:
            call_id = simulator.create_call()
            received = await host_call(simulator.ws_url, call_id)
            log = simulator.calls[call_id]
        assert log.errors == []
        shapes = [
            [item["type"] for item in event["response"]["output"]]
            for event in received
            if event["type"] == "response.done"
        ]
        assert shapes == [["message", "function_call"], ["message", "message"], ["message"]]

    asyncio.run(scenario())
