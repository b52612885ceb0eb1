"""Call control over REST (PROTOCOL.md §1.1-1.3) and the simulator's control API."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from simulator.server import Simulator
from tests.simulator.support import AUTH, http, running, sideband

OFFER = b"v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
BOUNDARY = "sb-boundary"


def _multipart(session: dict[str, object]) -> bytes:
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


def test_create_call_answers_201_with_location_and_sdp() -> None:
    """A multipart offer creates a call: 201, an SDP answer, and its id in Location."""

    async def scenario() -> None:
        async with running(Simulator()) as simulator:
            session = {"type": "realtime", "model": "gpt-realtime", "instructions": "Be brief."}
            headers = {**AUTH, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
            status, answer_headers, body = await http(
                simulator.http_url, "POST", "/v1/realtime/calls", _multipart(session), headers
            )
            assert status == 201
            assert answer_headers["content-type"] == "application/sdp"
            assert body.startswith(b"v=0\r\n")
            call_id = answer_headers["location"].rsplit("/", 1)[-1]
            assert answer_headers["location"] == f"/v1/realtime/calls/{call_id}"
            assert call_id.startswith("rtc_") and call_id in simulator.calls

            raw_headers = {**AUTH, "Content-Type": "application/sdp"}
            status, _, _ = await http(simulator.http_url, "POST", "/v1/realtime/calls", OFFER, raw_headers)
            assert status == 201

            _, _, listing = await http(simulator.http_url, "GET", "/_sim/calls")
            assert call_id in json.loads(listing)["calls"]

    asyncio.run(scenario())


def test_rest_requires_a_bearer_token() -> None:
    """Without `Authorization: Bearer …` call control answers 401 with a JSON error."""

    async def scenario() -> None:
        async with running(Simulator()) as simulator:
            status, headers, body = await http(
                simulator.http_url,
                "POST",
                "/v1/realtime/calls",
                OFFER,
                {"Content-Type": "application/sdp"},
            )
            assert status == 401
            assert headers["content-type"] == "application/json"
            assert json.loads(body)["error"]["type"] == "invalid_request_error"

    asyncio.run(scenario())


def test_hangup_closes_the_sideband_and_unknown_calls_are_404() -> None:
    """Hangup answers 200 and closes the sideband with 1000; unknown or ended calls get 404."""

    async def scenario() -> None:
        async with running(Simulator()) as simulator:
            status, _, body = await http(
                simulator.http_url, "POST", "/v1/realtime/calls/rtc_nope/hangup", b"", AUTH
            )
            assert status == 404 and json.loads(body)["error"]["code"] == "call_not_found"

            call_id = simulator.create_call()
            async with sideband(simulator, call_id) as host:
                path = f"/v1/realtime/calls/{call_id}/hangup"
                status, _, _ = await http(simulator.http_url, "POST", path, b"", AUTH)
                assert status == 200
                with pytest.raises(ConnectionClosed) as closed:
                    await host.next()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
            status, _, _ = await http(simulator.http_url, "POST", path, b"", AUTH)
            assert status == 404
            assert simulator.calls[call_id].status == "ended"

    asyncio.run(scenario())


def test_sideband_handshake_needs_bearer_and_a_known_call() -> None:
    """The sideband refuses a missing bearer with 401 and an unknown call id with 404."""

    async def scenario() -> None:
        async with running(Simulator()) as simulator:
            call_id = simulator.create_call()
            with pytest.raises(InvalidStatus) as refused:
                async with connect(f"{simulator.ws_url}/realtime?call_id={call_id}"):
                    pass
            assert refused.value.response.status_code == 401
            with pytest.raises(InvalidStatus) as refused:
                url = f"{simulator.ws_url}/realtime?call_id=rtc_unknown"
                async with connect(url, additional_headers=AUTH):
                    pass
            assert refused.value.response.status_code == 404

    asyncio.run(scenario())


def test_put_script_applies_to_new_calls_and_bad_scripts_are_400() -> None:
    """PUT /_sim/script sets the script for later calls; an invalid script is refused."""

    async def scenario() -> None:
        async with running(Simulator()) as simulator:
            script = {"name": "put", "model": [{"text": "hello"}]}
            status, _, _ = await http(simulator.http_url, "PUT", "/_sim/script", json.dumps(script).encode())
            assert status == 200 and simulator.script.name == "put"
            status, _, _ = await http(
                simulator.http_url, "PUT", "/_sim/script", b'{"caller": [{"sya": "typo"}]}'
            )
            assert status == 400 and simulator.script.name == "put"

            call_id = simulator.create_call()
            _, _, body = await http(simulator.http_url, "GET", f"/_sim/calls/{call_id}")
            log = json.loads(body)
            assert (log["call_id"], log["status"], log["events"]) == (call_id, "created", [])

    asyncio.run(scenario())


def test_sideband_closes_beta_clients_with_4000() -> None:
    """A sideband client sending OpenAI-Beta is closed with 4000 beta_api_shape_disabled."""

    async def scenario() -> None:
        async with running(Simulator()) as simulator:
            call_id = simulator.create_call()
            url = f"{simulator.ws_url}/realtime?call_id={call_id}"
            headers = {**AUTH, "OpenAI-Beta": "realtime=v1"}
            async with connect(url, additional_headers=headers) as socket:
                with pytest.raises(ConnectionClosed) as closed:
                    await socket.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4000

    asyncio.run(scenario())


def test_a_dropped_sideband_can_reattach_to_the_call() -> None:
    """POST /_sim/calls/{id}/drop closes the sideband with the code; the call takes a new one."""

    async def scenario() -> None:
        async with running(Simulator()) as simulator:
            call_id = simulator.create_call()
            async with sideband(simulator, call_id) as host:
                path = f"/_sim/calls/{call_id}/drop?code=1011"
                status, _, _ = await http(simulator.http_url, "POST", path)
                assert status == 200
                with pytest.raises(ConnectionClosed) as closed:
                    await host.next()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
            async with sideband(simulator, call_id) as host:
                await host.send({"type": "input_audio_buffer.clear"})
                assert (await host.next())["type"] == "input_audio_buffer.cleared"
            assert simulator.calls[call_id].status == "active"

    asyncio.run(scenario())
