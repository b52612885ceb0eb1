"""The simulator's Live mode over a real sideband: call control (LIVE_PROTOCOL.md §2), the order
of a delegating turn (§1.5), appends and their acknowledgements (§3), usage and close (§4), the
SIP door (§2.2), the switches (§5.6), and the strict oracle both ways (§6)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import pytest
from openai.types.live import LiveCreateResponse
from openai.types.webhooks import LiveTransportIncomingWebhookEvent
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from simulator.live_oracle import live_wire_errors
from simulator.live_script import LiveCallerSays, LiveScript, LiveSwitches, LiveTiming, load_live_script
from simulator.recording import CloseFrame, RecordedClose, RecordedEvent, Recording, RecordingHeader
from simulator.script import CallerHangsUp, CallerPresses
from simulator.server import Simulator
from simulator.sip import PlaceCall
from tests.simulator.support import AUTH, EVENT_TIMEOUT_S, http, running

JSON = {**AUTH, "Content-Type": "application/json"}
QUICK = LiveTiming(fragment_ms=10, reply_after_ms=5, answer_wait_ms=1_500)
REFLECTED_AUDIO = ("session.input_audio.append", "session.output_audio.delta")
ASK = "Could you check where my order 4417 is?"
RESULT = "Order 4417 ships on Friday."
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"live-simulator-webhook-secret").decode()


def _script(*caller: Any, **changes: Any) -> LiveScript:
    return LiveScript(timing=QUICK, caller=list(caller), **changes)


def _config(acknowledgement_delay_ms: int | None = None) -> dict[str, Any]:
    delegation: dict[str, Any] = {"type": "client"}
    if acknowledgement_delay_ms is not None:
        delegation["acknowledgement_delay_ms"] = acknowledgement_delay_ms
    return {"model": "gpt-live-1", "instructions": "Delegate order lookups.", "delegation": delegation}


async def _create(simulator: Simulator, session: dict[str, Any]) -> str:
    body = {"session": session, "transport": {"type": "webrtc", "sdp": "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\n"}}
    status, _, raw = await http(
        simulator.http_url, "POST", "/v1/live/sessions", json.dumps(body).encode(), JSON
    )
    assert status == 200, raw
    answer = json.loads(raw)
    LiveCreateResponse.model_validate(answer, strict=True)
    assert answer["transport"]["sdp"].startswith("v=0")
    session_id: str = answer["session"]["id"]
    assert session_id.startswith("live_u7_")
    return session_id


async def _post(simulator: Simulator, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    raw_body = b"" if body is None else json.dumps(body).encode()
    status, _, raw = await http(simulator.http_url, "POST", path, raw_body, JSON)
    return status, json.loads(raw) if raw else {}


class LiveHost:
    """A host's end of a Live sideband: send commands, read events in order, wait for a type."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.seen: list[dict[str, Any]] = []

    async def send(self, command: dict[str, Any] | str) -> None:
        await self.socket.send(command if isinstance(command, str) else json.dumps(command))

    async def next(self) -> dict[str, Any]:
        event: dict[str, Any] = json.loads(await asyncio.wait_for(self.socket.recv(), EVENT_TIMEOUT_S))
        self.seen.append(event)
        return event

    async def until(self, event_type: str, **matching: Any) -> dict[str, Any]:
        """The first event of `event_type` (with these fields) from here on."""
        while True:
            event = await self.next()
            if event["type"] == event_type and all(event.get(k) == v for k, v in matching.items()):
                return event

    async def to_the_end(self) -> None:
        """Read until the sideband closes."""
        try:
            while True:
                await self.next()
        except ConnectionClosed:
            return


@asynccontextmanager
async def _attached(
    simulator: Simulator, session_id: str, *, graceful: bool = True
) -> AsyncIterator[LiveHost]:
    query = "?graceful_close=true" if graceful else ""
    async with connect(
        f"{simulator.ws_url}/live/sessions/{session_id}/attach{query}", additional_headers=AUTH
    ) as s:
        yield LiveHost(s)


def _spoken(events: list[dict[str, Any]], event_type: str) -> str:
    return "".join(event["delta"] for event in events if event["type"] == event_type)


def _without_audio(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] not in REFLECTED_AUDIO]


def test_a_delegating_turn_follows_the_documented_order() -> None:
    """Transcript, delegation at the covering word, thinking that stops the acknowledgement,
    commentary acknowledged and then spoken, and `session.closed` on hangup: §1.5's order."""

    async def scenario() -> None:
        script = _script(
            LiveCallerSays(say=ASK, after_ms=20, delegate=True), CallerHangsUp(hangup=True, after_ms=50)
        )
        async with running(Simulator(live_script=script)) as simulator:
            session_id = await _create(simulator, _config(acknowledgement_delay_ms=300))
            async with _attached(simulator, session_id) as host:
                delegated = await host.until("session.delegation.created")
                delegation_id = delegated["delegation"]["id"]
                await host.send(
                    {
                        "type": "session.thinking.append",
                        "event_id": "k1",
                        "delegation_id": delegation_id,
                        "content": "Looking it up.",
                    }
                )
                await host.send(
                    {
                        "type": "session.commentary.append",
                        "event_id": "k2",
                        "delegation_id": delegation_id,
                        "content": RESULT,
                    }
                )
                await host.to_the_end()
                close_code = host.socket.close_code
            log = simulator.live.sessions[session_id].log

        received = host.seen
        assert log.errors == []
        assert [entry["event"] for entry in log.events] == received
        assert all(live_wire_errors(event, direction="server") == [] for event in received)
        assert all("event_id" not in event for event in received if event["type"] in REFLECTED_AUDIO)
        kinds = [event["type"] for event in received]
        assert kinds[0] == "session.input_audio.append"  # reflected audio before its transcript
        assert "session.started" not in kinds  # a sideband sees no start (§2.3)

        events = _without_audio(received)
        at = {id(event): index for index, event in enumerate(events)}
        caller = [event for event in events if event["type"] == "session.input_transcript.delta"]
        covering = caller[-1]
        assert covering["delta"] == " is?"
        assert delegated["offset_ms"] == covering["start_ms"]
        assert delegated["delegation"] == {"id": delegation_id, "type": "delegation", "target": "client"}
        # Every word before the covering one arrives first; the covering fragment, just after.
        assert all(at[id(word)] < at[id(delegated)] for word in caller[:-1])
        assert at[id(covering)] > at[id(delegated)]
        assert "".join(word["delta"] for word in caller) == ASK
        assert all(word["end_ms"] > word["start_ms"] for word in caller)

        thought = next(e for e in events if e["type"] == "session.thinking.appended")
        commented = next(e for e in events if e["type"] == "session.commentary.appended")
        assert (thought["client_event_id"], commented["client_event_id"]) == ("k1", "k2")
        assert at[id(thought)] < at[id(commented)]
        # Thinking came within the acknowledgement delay: nothing but the commentary is said.
        said_after = [
            e for e in events[at[id(commented)] :] if e["type"] == "session.output_transcript.delta"
        ]
        assert "".join(e["delta"] for e in said_after) == RESULT
        assert _spoken(events, "session.output_transcript.delta") == RESULT
        assert "session.output_audio.delta" in kinds

        closed = events[-1]
        assert closed["type"] == "session.closed" and closed["reason"] == "remote_hangup"
        assert closed["session"]["id"] == session_id
        assert (
            closed["usage"]["seconds"]
            == closed["usage"]["active_seconds"] + closed["usage"]["paused_seconds"]
        )
        assert close_code == 1000 and log.close_reason == "remote_hangup"
        assert log.control_types() == ["session.thinking.append", "session.commentary.append"]

    asyncio.run(scenario())


def test_the_automatic_acknowledgement_is_spoken_when_nothing_is_appended_in_time() -> None:
    """With no append within `acknowledgement_delay_ms`, the model says the acknowledgement;
    the commentary that comes later is then spoken after it."""

    async def scenario() -> None:
        script = _script(LiveCallerSays(say=ASK, delegate=True), acknowledgement="Okay, checking now.")
        async with running(Simulator(live_script=script)) as simulator:
            session_id = await _create(simulator, _config(acknowledgement_delay_ms=20))
            async with _attached(simulator, session_id) as host:
                delegated = await host.until("session.delegation.created")
                said = ""
                while said != "Okay, checking now.":
                    said += (await host.until("session.output_transcript.delta"))["delta"]
                await host.send(
                    {
                        "type": "session.commentary.append",
                        "event_id": "k2",
                        "delegation_id": delegated["delegation"]["id"],
                        "content": RESULT,
                    }
                )
                await host.until("session.commentary.appended", client_event_id="k2")
                answer = ""
                while answer != RESULT:
                    answer += (await host.until("session.output_transcript.delta"))["delta"]
            assert simulator.live.sessions[session_id].log.errors == []

    asyncio.run(scenario())


def test_the_covering_fragment_can_arrive_just_before_the_delegation() -> None:
    """A negative lag switch sends the covering fragment first; the offset is still its start."""

    async def scenario() -> None:
        script = _script(
            LiveCallerSays(say="Please check staging.", delegate=True, delegate_at_word=1),
            switches=LiveSwitches(covering_fragment_lag_ms=-30, reflect_audio=False),
        )
        async with running(Simulator(live_script=script)) as simulator:
            session_id = await _create(simulator, _config(acknowledgement_delay_ms=1_000))
            async with _attached(simulator, session_id) as host:
                delegated = await host.until("session.delegation.created")
                await host.until("session.input_transcript.delta", delta=" staging.")
            events = host.seen
        assert not any(event["type"] in REFLECTED_AUDIO for event in events)
        assert [e.get("delta", e["type"]) for e in events] == [
            "Please",
            " check",
            "session.delegation.created",
            " staging.",
        ]
        assert delegated["offset_ms"] == events[1]["start_ms"]

    asyncio.run(scenario())


def test_usage_is_cumulative_and_close_answers_session_closed() -> None:
    """`session.usage.updated` comes on its interval; `session.close` is answered by
    `session.closed` with its id, and without graceful_close the connection just drops."""

    async def scenario() -> None:
        script = _script(switches=LiveSwitches(usage_interval_ms=30))
        async with running(Simulator(live_script=script)) as simulator:
            session_id = await _create(simulator, _config())
            async with _attached(simulator, session_id, graceful=False) as host:
                first = await host.until("session.usage.updated")
                second = await host.until("session.usage.updated")
                await host.send({"type": "session.close", "event_id": "k9"})
                closed = await host.until("session.closed")
                with pytest.raises(ConnectionClosed):
                    await host.next()
                close_code = host.socket.close_code
            log = simulator.live.sessions[session_id].log
            status, _ = await _post(simulator, f"/v1/live/sessions/{session_id}/hangup")

        for usage in (first, second):
            assert set(usage["usage"]) == {"seconds", "active_seconds", "paused_seconds"}
            assert 0 <= usage["context_window"]["usage_ratio"] < 1
        assert first["usage"]["seconds"] <= second["usage"]["seconds"] <= closed["usage"]["seconds"]
        assert (closed["reason"], closed["client_event_id"]) == ("close_requested", "k9")
        assert closed["session"]["delegation"] == {"type": "client"}
        assert close_code == 1006  # no closing handshake without graceful_close
        assert (log.close_reason, log.errors) == ("close_requested", [])
        assert status == 404  # the session is gone

    asyncio.run(scenario())


def test_a_rest_hangup_closes_the_session_and_its_sideband() -> None:
    """`POST /hangup` ends a WebRTC session: `session.closed` (close_requested), close 1000."""

    async def scenario() -> None:
        async with running(Simulator(live_script=_script())) as simulator:
            session_id = await _create(simulator, _config())
            async with _attached(simulator, session_id) as host:
                status, _ = await _post(simulator, f"/v1/live/sessions/{session_id}/hangup")
                closed = await host.until("session.closed")
                await host.to_the_end()
                close_code = host.socket.close_code
            refer_status, refer = await _post(
                simulator, f"/v1/live/sessions/{session_id}/refer", {"target_uri": "tel:+14155550123"}
            )
        assert status == 200 and closed["reason"] == "close_requested"
        assert close_code == 1000
        assert refer_status == 404 and refer["error"]["code"] == "session_not_found"

    asyncio.run(scenario())


class _WebhookReceiver:
    """A host's webhook endpoint: answers the statuses given in turn, keeps every delivery."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.deliveries: list[tuple[dict[str, str], bytes]] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/webhooks/openai"

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.deliveries.append((headers, body))
        status = self.statuses[min(len(self.deliveries), len(self.statuses)) - 1]
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        writer.close()


def test_a_phone_call_is_announced_signed_retried_then_accepted_and_referred() -> None:
    """`live.transport.incoming` is signed as Standard Webhooks, retried until answered 2xx with
    the same id; the session is attachable only once accepted, accepted once, and a refer ends it."""

    async def scenario() -> None:
        script = _script(LiveCallerSays(say="I need a person.", after_ms=20))
        receiver = _WebhookReceiver([500, 200])
        async with running(Simulator(live_script=script)) as simulator, receiver as webhook_url:
            status, _, raw = await http(
                simulator.http_url.removesuffix("/v1"),
                "POST",
                "/_sim/live/sip/calls",
                json.dumps(
                    {"to": "+18005551212", "webhook_url": webhook_url, "secret": WEBHOOK_SECRET}
                ).encode(),
                {"Content-Type": "application/json"},
            )
            assert status == 201, raw
            ringing = json.loads(raw)
            session_id = ringing["session_id"]
            for _ in range(100):
                if len(receiver.deliveries) >= 2:
                    break
                await asyncio.sleep(0.02)
            with pytest.raises(InvalidStatus) as early:
                async with _attached(simulator, session_id):
                    pass
            accept = {"session": {"type": "live", "model": "gpt-live-1", "instructions": "Help the caller."}}
            first_status, _ = await _post(simulator, f"/v1/live/sessions/{session_id}/accept", accept)
            again_status, again = await _post(simulator, f"/v1/live/sessions/{session_id}/accept", accept)
            async with _attached(simulator, session_id) as host:
                await host.until("session.output_transcript.delta")
                refer_status, _ = await _post(
                    simulator, f"/v1/live/sessions/{session_id}/refer", {"target_uri": "tel:+14155550123"}
                )
                closed = await host.until("session.closed")
                await host.to_the_end()
            log = simulator.live.sessions[session_id].log

        client = openai.OpenAI(api_key="sk-test", webhook_secret=WEBHOOK_SECRET)
        assert [delivery["status"] for delivery in log.deliveries] == [500, 200]
        assert len({headers["webhook-id"] for headers, _ in receiver.deliveries}) == 1
        assert receiver.deliveries[0][0]["webhook-id"] == ringing["webhook_id"]
        for headers, body in receiver.deliveries:
            event = client.webhooks.unwrap(body, headers)  # raises unless the signature holds
            assert isinstance(event, LiveTransportIncomingWebhookEvent)
            assert event.data.session_id == session_id and event.data.type == "sip"
            LiveTransportIncomingWebhookEvent.model_validate(json.loads(body), strict=True)
        assert early.value.response.status_code == 409
        assert first_status == 200
        assert again_status == 400 and again["error"]["code"] == "decision_already_made"
        assert refer_status == 200 and closed["reason"] == "remote_hangup"
        assert log.referred_to == "tel:+14155550123"
        assert "client" not in closed["session"] and "type" not in closed["session"]
        assert set(closed["usage"]) == {"seconds"}  # a SIP session has no active/paused split
        assert log.errors == []

    asyncio.run(scenario())


def test_a_phone_call_can_be_rejected_with_a_sip_status() -> None:
    """A reject needs its status code; a rejected call cannot be accepted or attached."""

    async def scenario() -> None:
        async with running(Simulator(live_script=_script())) as simulator, _WebhookReceiver([200]) as url:
            session_id, _ = simulator.live.place_sip_call(PlaceCall(webhook_url=url, secret=WEBHOOK_SECRET))
            missing_status, missing = await _post(simulator, f"/v1/live/sessions/{session_id}/reject", {})
            rejected_status, _ = await _post(
                simulator, f"/v1/live/sessions/{session_id}/reject", {"status_code": 486}
            )
            accept_status, _ = await _post(
                simulator,
                f"/v1/live/sessions/{session_id}/accept",
                {"session": {"type": "live", "model": "gpt-live-1"}},
            )
            with pytest.raises(InvalidStatus) as attach:
                async with _attached(simulator, session_id):
                    pass
            log = simulator.live.sessions[session_id].log
        assert missing_status == 400
        assert (missing["error"]["code"], missing["error"]["param"]) == (
            "missing_required_parameter",
            "status_code",
        )
        assert rejected_status == 200 and log.rejected_with == 486
        assert accept_status == 404
        assert attach.value.response.status_code == 404

    asyncio.run(scenario())


def test_invalid_client_events_are_answered_with_typed_errors_and_recorded() -> None:
    """Each command that fails the strict oracle (or that the session refuses) gets an `error`
    naming it by `error.client_event_id`; the session goes on and keeps answering."""

    async def scenario() -> None:
        async with running(Simulator(live_script=_script())) as simulator:
            session_id = await _create(simulator, _config())
            bad: list[dict[str, Any] | str] = [
                {"type": "session.commentary.append", "event_id": "b1", "content": "No delegation id."},
                {"type": "session.update", "event_id": "b2", "session": {"instructions": "New rules."}},
                {"type": "session.input_audio.append", "event_id": "b3", "audio": "AAAA"},
                {"type": "response.cancel", "event_id": "b4"},
                {
                    "type": "session.thinking.append",
                    "event_id": "b5",
                    "delegation_id": "item_unknown",
                    "content": "For nobody.",
                },
                {"type": "response.create", "event_id": "b6"},
                {
                    "type": "session.update",
                    "event_id": "b7",
                    "session": {"delegation": {"type": "decisions"}},
                },
                # Under 2,000 characters, over 500 tokens by the oracle's estimate (§1.3).
                {
                    "type": "session.commentary.append",
                    "event_id": "b8",
                    "delegation_id": None,
                    "content": "中" * 501,
                },
                "{not json",
            ]
            async with _attached(simulator, session_id) as host:
                errors = []
                for command in bad:
                    await host.send(command)
                    errors.append(await host.until("error"))
                await host.send({"type": "session.input_audio.mute", "event_id": "m1"})
                muted = await host.until("session.input_audio.muted")
            log = simulator.live.sessions[session_id].log

        answered = [
            (e["error"]["code"], e["error"].get("param"), e["error"].get("client_event_id")) for e in errors
        ]
        assert answered == [
            ("missing_required_parameter", "delegation_id", "b1"),
            ("unknown_parameter", "session.instructions", "b2"),
            ("invalid_value", "type", "b3"),
            ("invalid_value", "type", "b4"),
            ("invalid_value", "delegation_id", "b5"),
            ("invalid_request", "type", "b6"),
            ("immutable_field_update", "session.delegation.type", "b7"),
            ("string_above_max_length", "content", "b8"),
            ("invalid_json", None, None),
        ]
        assert all(live_wire_errors(event, direction="server") == [] for event in host.seen)
        assert muted["client_event_id"] == "m1"
        assert log.control_types() == [
            "session.commentary.append",
            "session.update",
            "session.input_audio.append",
            "response.cancel",
            "session.thinking.append",
            "response.create",
            "session.update",
            "session.commentary.append",
            None,
            "session.input_audio.mute",
        ]
        # The oracle's findings are in the log (the valid-but-refused commands are not).
        assert log.errors == [
            "client session.commentary.append b1: delegation_id: Field required",
            "client session.update b2: unknown field $.session.instructions",
            next(
                e for e in log.errors if e.startswith("client session.input_audio.append b3: type: Input tag")
            ),
            next(e for e in log.errors if e.startswith("client response.cancel b4: type: Input tag")),
            "client session.commentary.append b8: content: "
            "content is limited to 500 tokens; this is about 501",
            "client frame is not JSON",
        ]

    asyncio.run(scenario())


def test_muting_silences_the_transcript_but_audio_is_still_reflected() -> None:
    """While muted the model hears silence (no transcript, no delegation); the caller's audio
    is still reflected, since reflection happens before model-input muting."""

    async def scenario() -> None:
        script = _script(LiveCallerSays(say="Can you hear me now?", after_ms=100, delegate=True))
        async with running(Simulator(live_script=script)) as simulator:
            session_id = await _create(simulator, _config())
            async with _attached(simulator, session_id) as host:
                await host.send({"type": "session.input_audio.mute", "event_id": "m1"})
                await host.until("session.input_audio.muted")
                for _ in range(5):
                    await host.until("session.input_audio.append")
                await host.send({"type": "session.input_audio.unmute", "event_id": "m2"})
                unmuted = await host.until("session.input_audio.unmuted")
        kinds = [event["type"] for event in host.seen]
        assert unmuted["client_event_id"] == "m2"
        assert "session.input_transcript.delta" not in kinds
        assert "session.delegation.created" not in kinds

    asyncio.run(scenario())


def test_one_sideband_at_a_time_and_a_dropped_one_reattaches_without_replay() -> None:
    """A second attach is refused 409 while one is attached; after a drop a new sideband
    attaches and sees only what happens from then on."""

    async def scenario() -> None:
        script = _script(
            LiveCallerSays(say="Hello there.", after_ms=10),
            LiveCallerSays(say="Still there?", after_ms=150),
        )
        async with running(Simulator(live_script=script)) as simulator:
            session_id = await _create(simulator, _config())
            async with _attached(simulator, session_id) as first:
                with pytest.raises(InvalidStatus) as second:
                    async with _attached(simulator, session_id):
                        pass
                await first.until("session.input_transcript.delta", delta=" there.")
                status, _, _ = await http(
                    simulator.http_url.removesuffix("/v1"),
                    "POST",
                    f"/_sim/live/sessions/{session_id}/drop",
                    b"",
                )
                with pytest.raises(ConnectionClosed):
                    while True:
                        await first.next()
            async with _attached(simulator, session_id) as again:
                later = await again.until("session.input_transcript.delta")
            log = simulator.live.sessions[session_id].log
        assert second.value.response.status_code == 409
        assert status == 200
        assert later["delta"] != "Hello"  # nothing is replayed to a new sideband
        assert log.refused_attaches == 1 and len(log.attaches) == 2
        assert log.errors == []

    asyncio.run(scenario())


def test_rest_bodies_are_checked_strictly() -> None:
    """Unknown or missing fields, a missing token and an unsimulated delegation are refused 4xx."""

    async def scenario() -> None:
        async with running(Simulator(live_script=_script())) as simulator:
            url = simulator.http_url

            async def create(body: Any, headers: dict[str, str] = JSON) -> tuple[int, dict[str, Any]]:
                status, _, raw = await http(
                    url, "POST", "/v1/live/sessions", json.dumps(body).encode(), headers
                )
                return status, json.loads(raw)

            webrtc = {"type": "webrtc", "sdp": "v=0\r\n"}
            unknown = await create(
                {"session": {"model": "gpt-live-1", "voice": "marin"}, "transport": webrtc}
            )
            missing = await create({"session": {"model": "gpt-live-1"}})
            no_token = await create({"session": {"model": "gpt-live-1"}, "transport": webrtc}, {})
            backend = {"type": "responses", "responses": {"model": "gpt-5.5"}}
            responses = await create(
                {"session": {"model": "gpt-live-1", "delegation": backend}, "transport": webrtc}
            )
        assert unknown[0] == 400
        assert (unknown[1]["error"]["code"], unknown[1]["error"]["param"]) == (
            "unknown_parameter",
            "session.voice",
        )
        assert missing[0] == 400
        assert (missing[1]["error"]["code"], missing[1]["error"]["param"]) == (
            "missing_required_parameter",
            "transport",
        )
        assert no_token[0] == 401
        assert responses[0] == 400 and responses[1]["error"]["code"] == "unsupported_delegation"

    asyncio.run(scenario())


def test_the_openai_sdk_drives_a_live_session_against_the_simulator() -> None:
    """The SDK's own paths work unchanged: `live.create`, `live.sideband.connect` with
    graceful_close, appends sent as TypedDicts, and `live.sessions.hangup`."""

    async def scenario() -> None:
        script = _script(
            LiveCallerSays(say=ASK, after_ms=20, delegate=True), switches=LiveSwitches(reflect_audio=False)
        )
        async with running(Simulator(live_script=script)) as simulator:
            client = openai.AsyncOpenAI(
                api_key="sk-test",
                base_url=simulator.http_url,
                websocket_base_url=simulator.ws_url,
                max_retries=0,
            )
            created = await client.live.create(
                session={
                    "model": "gpt-live-1",
                    "delegation": {"type": "client", "acknowledgement_delay_ms": 500},
                },
                transport={"type": "webrtc", "sdp": "v=0\r\n"},
            )
            session_id = created.session.id
            async with client.live.sideband.connect(session_id=session_id, graceful_close=True) as sideband:
                kinds = []
                while True:
                    event = await asyncio.wait_for(sideband.recv(), EVENT_TIMEOUT_S)
                    kinds.append(event.type)
                    if event.type == "session.delegation.created":
                        await sideband.send(
                            {
                                "type": "session.commentary.append",
                                "event_id": "k2",
                                "delegation_id": event.delegation.id,
                                "content": RESULT,
                            }
                        )
                    if event.type == "session.commentary.appended":
                        break
                await client.live.sessions.hangup(session_id)
                while event.type != "session.closed":
                    event = await asyncio.wait_for(sideband.recv(), EVENT_TIMEOUT_S)
            log = simulator.live.sessions[session_id].log
        assert "session.delegation.created" in kinds
        assert event.type == "session.closed" and event.reason == "close_requested"
        assert log.attaches[0]["graceful_close"] is True
        assert log.control_types() == ["session.commentary.append"]
        assert log.errors == []

    asyncio.run(scenario())


def test_update_fixture_and_keypad_commands_are_acknowledged_or_refused() -> None:
    """`session.update` answers the full resource; a fixture plays (appends refused meanwhile);
    DTMF is refused on WebRTC and sent on SIP, where the caller's keypresses arrive too."""

    async def scenario() -> None:
        script = _script(CallerPresses(dtmf="5", after_ms=10), switches=LiveSwitches(reflect_audio=False))
        async with running(Simulator(live_script=script)) as simulator:
            session_id = await _create(simulator, _config())
            async with _attached(simulator, session_id) as host:
                await host.send(
                    {
                        "type": "session.update",
                        "event_id": "k3",
                        "session": {"delegation": {"type": "client", "acknowledgement_delay_ms": 400}},
                    }
                )
                updated = await host.until("session.updated")
                fixture = base64.b64encode(bytes(48 * 300)).decode()  # 300 ms of PCM16 at 24 kHz
                await host.send(
                    {"type": "session.output_audio.fixture.play", "event_id": "k7", "audio": fixture}
                )
                playing = await host.until("session.output_audio.fixture.playing")
                await host.send(
                    {
                        "type": "session.commentary.append",
                        "event_id": "k8",
                        "delegation_id": None,
                        "content": "Hi.",
                    }
                )
                refused = await host.until("error")
                played = await host.until("session.output_audio.fixture.played")
                await host.send({"type": "transport.dtmf.send", "event_id": "k6", "event": "1"})
                no_keypad = await host.until("error")
            webrtc_log = simulator.live.sessions[session_id].log

            async with _WebhookReceiver([200]) as url:
                phone_id, _ = simulator.live.place_sip_call(PlaceCall(webhook_url=url, secret=WEBHOOK_SECRET))
                accept = {"session": {"type": "live", "model": "gpt-live-1"}}
                assert (await _post(simulator, f"/v1/live/sessions/{phone_id}/accept", accept))[0] == 200
                async with _attached(simulator, phone_id) as phone:
                    pressed = await phone.until("transport.dtmf.received")
                    await phone.send({"type": "transport.dtmf.send", "event_id": "k6", "event": "#"})
                    sent = await phone.until("transport.dtmf.sent")
            phone_log = simulator.live.sessions[phone_id].log

        assert updated["client_event_id"] == "k3"
        assert updated["session"]["delegation"] == {"type": "client", "acknowledgement_delay_ms": 400}
        assert updated["session"]["id"] == session_id and updated["session"]["status"] == "active"
        assert (playing["client_event_id"], played["client_event_id"]) == ("k7", "k7")
        assert (refused["error"]["code"], refused["error"]["client_event_id"]) == ("fixture_playing", "k8")
        assert (no_keypad["error"]["code"], no_keypad["error"]["client_event_id"]) == (
            "invalid_request",
            "k6",
        )
        assert pressed["event"] == "5"
        assert (sent["event"], sent["client_event_id"]) == ("#", "k6")
        assert "keypress (5) on a webrtc session" in webrtc_log.errors[0]
        assert phone_log.errors == []
        assert all(live_wire_errors(e, direction="server") == [] for e in host.seen + phone.seen)

    asyncio.run(scenario())


def test_the_packaged_live_script_loads_and_a_bad_one_is_refused() -> None:
    """`live_lookup` is shipped; `PUT /_sim/live/script` takes a script and refuses a misspelt one."""

    async def scenario() -> None:
        packaged = load_live_script("live_lookup")
        assert any(isinstance(step, LiveCallerSays) and step.delegate for step in packaged.caller)
        async with running(Simulator()) as simulator:
            base = simulator.http_url.removesuffix("/v1")
            good = await http(base, "PUT", "/_sim/live/script", packaged.model_dump_json().encode())
            bad = await http(base, "PUT", "/_sim/live/script", b'{"caller": [{"sya": "Hi"}]}')
            listed = await http(base, "GET", "/_sim/live/sessions")
        assert good[0] == 200 and json.loads(good[2]) == {"script": "live-lookup"}
        assert bad[0] == 400
        assert json.loads(listed[2]) == {"sessions": []}

    asyncio.run(scenario())


def test_a_live_recording_is_played_on_a_live_session_and_answers_no_command() -> None:
    """A recording whose header says `"provider": "live"` is played by Live sessions (not by
    Realtime calls): its events at their offsets, its close last; a command is logged and
    checked by the oracle, and answered by nothing but the recording."""
    delegated = {
        "type": "session.delegation.created",
        "event_id": "event_d1",
        "offset_ms": 100,
        "delegation": {"id": "item_d1", "type": "delegation", "target": "client"},
    }
    heard = {
        "type": "session.input_transcript.delta",
        "event_id": "event_t1",
        "start_ms": 0,
        "end_ms": 200,
        "delta": "Hi",
    }
    recording = Recording(
        header=RecordingHeader(name="live", session={"instructions": "x", "provider": "live"}),
        events=[RecordedEvent(t_ms=10, event=heard), RecordedEvent(t_ms=20, event=delegated)],
        close=RecordedClose(t_ms=60, close=CloseFrame(code=1000)),
    )

    async def scenario() -> None:
        async with running(Simulator(recording=recording, speed=1)) as simulator:
            assert simulator.recording is None and simulator.live.recording is recording
            session_id = await _create(simulator, _config())
            async with _attached(simulator, session_id) as host:
                assert await host.next() == heard
                assert await host.next() == delegated
                await host.send(
                    {
                        "type": "session.commentary.append",
                        "event_id": "k1",
                        "delegation_id": "item_d1",
                        "content": "x",
                    }
                )
                await host.to_the_end()
            log = simulator.live.sessions[session_id].log
            assert log.errors == [] and log.close_code == 1000 and log.status == "ended"
            assert log.control_types() == ["session.commentary.append"]
            assert [entry["event"] for entry in log.events] == [heard, delegated]

    asyncio.run(scenario())
