"""The gateway's HTTP server (Starlette on uvicorn) holds its stated limits, and every refusal
is the API's JSON error — driven over real sockets, with small limits so the tests are quick."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from gateway.keys import DEPLOYMENT_TOKEN, KeyRing
from gateway.web import EXCEPTION_HANDLERS, HandshakeRefused, HttpLimits, RunningServer, start_server

SMALL = HttpLimits(
    maximum_body_bytes=1_000,
    maximum_head_bytes=2_000,
    maximum_connections=8,
    maximum_requests_in_flight=2,
    keep_alive_s=5,
    head_timeout_s=0.5,
    body_timeout_s=0.5,
)


async def _echo(request: Request) -> Response:
    body = await request.body()
    return JSONResponse({"length": len(body)})


async def _boom(_request: Request) -> Response:
    raise RuntimeError("a bug in a handler")


async def _slow(_request: Request) -> Response:
    await asyncio.sleep(1.0)
    return JSONResponse({"slow": True})


async def _listen(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.close()


_APP = Starlette(
    routes=[
        Route("/echo", _echo, methods=["POST"]),
        Route("/boom", _boom, methods=["GET"]),
        Route("/slow", _slow, methods=["GET"]),
        WebSocketRoute("/live", _listen),
    ],
    exception_handlers=EXCEPTION_HANDLERS,
)


@asynccontextmanager
async def _serving(
    limits: HttpLimits = SMALL, on_handshake_refused: HandshakeRefused | None = None
) -> AsyncIterator[RunningServer]:
    server = await start_server(_APP, "127.0.0.1", 0, limits, on_handshake_refused)
    try:
        yield server
    finally:
        await server.stop()


async def _exchange(port: int, raw: bytes, read_timeout_s: float = 5.0) -> tuple[int, dict[str, Any]]:
    """Send raw bytes, read one response; answers (status, JSON body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), read_timeout_s)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
        assert headers.get("content-type", "").startswith("application/json"), headers
        body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), read_timeout_s)
        return status, json.loads(body)
    finally:
        writer.close()


def _code(body: dict[str, Any]) -> str:
    return str(body["error"]["code"])


def test_a_body_over_the_limit_is_413_whether_declared_or_streamed() -> None:
    """A declared Content-Length over the limit and a chunked body that grows past it are both
    refused with 413 body_too_large, and the client reads the answer."""

    async def scenario() -> None:
        async with _serving() as server:
            declared = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n" + b"x" * 2000
            status, body = await _exchange(server.port, declared)
            assert (status, _code(body)) == (413, "body_too_large")
            chunk = b"x" * 600
            chunked = (
                b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"%x\r\n%s\r\n" % (len(chunk), chunk) * 2
                + b"0\r\n\r\n"
            )
            status, body = await _exchange(server.port, chunked)
            assert (status, _code(body)) == (413, "body_too_large")
            fine = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
            assert await _exchange(server.port, fine) == (200, {"length": 5})

    asyncio.run(scenario())


def test_a_declared_body_over_the_limit_is_refused_before_it_arrives() -> None:
    """A head declaring 10 MB, with the gateway's own limits (1 MiB, 10 s for a body), is
    answered 413 body_too_large within a second, before a byte of the body is sent; one that
    asked to be told first (`Expect: 100-continue`) too, and its connection is closed at once."""

    async def scenario() -> None:
        async with _serving(HttpLimits()) as server:
            head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n"
            status, body = await _exchange(server.port, head, read_timeout_s=1.0)
            assert (status, _code(body)) == (413, "body_too_large")
            assert "1048576" in body["error"]["message"]

            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            try:
                writer.write(head.replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n"))
                await writer.drain()
                answer = await asyncio.wait_for(reader.read(), 1.0)  # to the end: closed
            finally:
                writer.close()
            assert answer.startswith(b"HTTP/1.1 413 ") and b"body_too_large" in answer

    asyncio.run(scenario())


def test_a_content_length_that_is_not_a_number_is_a_json_400() -> None:
    """`Content-Length: ²` (a digit to str.isdigit, not to HTTP) and `-1` get a typed 400; the
    hand-written server dropped the connection with a traceback."""

    async def scenario() -> None:
        async with _serving() as server:
            for value in ("²".encode(), b"-1", b"12abc"):
                raw = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + value + b"\r\n\r\nhi"
                status, body = await _exchange(server.port, raw)
                assert (status, _code(body)) == (400, "bad_request"), value

    asyncio.run(scenario())


def test_a_half_sent_request_line_is_closed_after_the_head_timeout() -> None:
    """A client that opens a connection and sends half a request line, or nothing, is closed
    once the head timeout passes (uvicorn alone would hold it for good)."""

    async def scenario() -> None:
        async with _serving() as server:
            for opening in (b"GET /ech", b""):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(opening)
                await writer.drain()
                assert await asyncio.wait_for(reader.read(), 5.0) == b"", opening
                writer.close()

    asyncio.run(scenario())


def test_a_body_that_does_not_arrive_in_time_is_408() -> None:
    """A declared body that stops coming is answered 408 once the body timeout passes."""

    async def scenario() -> None:
        async with _serving() as server:
            raw = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly this"
            status, body = await _exchange(server.port, raw)
            assert (status, _code(body)) == (408, "request_timeout")

    asyncio.run(scenario())


def test_a_handler_bug_is_a_500_with_a_code_and_unknown_routes_are_typed() -> None:
    """A handler that raises answers 500 internal_error (no traceback in the body); an unknown
    route is 404 not_found and a wrong method 405 method_not_allowed."""

    async def scenario() -> None:
        async with _serving() as server:
            status, body = await _exchange(server.port, b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (status, _code(body)) == (500, "internal_error")
            assert "bug" not in json.dumps(body)
            status, body = await _exchange(server.port, b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (status, _code(body)) == (404, "not_found")
            status, body = await _exchange(server.port, b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (status, _code(body)) == (405, "method_not_allowed")

    asyncio.run(scenario())


def test_an_unparsable_request_and_oversized_headers_get_json_errors() -> None:
    """A request line h11 cannot parse is a JSON 400; headers past the head limit a JSON 431,
    whether they arrive whole or trickle in."""

    async def scenario() -> None:
        async with _serving() as server:
            status, body = await _exchange(server.port, b"NOT A REQUEST\r\n\r\n")
            assert (status, _code(body)) == (400, "bad_request")
            huge = b"GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 4_000 + b"\r\n\r\n"
            status, body = await _exchange(server.port, huge)
            assert (status, _code(body)) == (431, "headers_too_large")

    asyncio.run(scenario())


_HANDSHAKE = (
    b"GET /live HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


def _handshake_answer(port: int, extra_headers: bytes, until_closed: bool = True) -> tuple[bytes, bytes]:
    """A raw WebSocket handshake: the answer's status line, and all it sent until it closed
    (or, for an accepted one, its head). The socket timeout bounds a server that never
    answers or never closes: a failure."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(_HANDSHAKE + extra_headers + b"\r\n")
        received = b""
        while until_closed or b"\r\n\r\n" not in received:
            chunk = client.recv(65536)
            if not chunk:
                break
            received += chunk
    return received.split(b"\r\n", 1)[0], received


def test_a_websocket_handshake_too_large_is_refused_at_once_as_http_is() -> None:
    """A handshake with a 9 KiB header line (within the 16 KiB head limit, past the `websockets`
    parser's 8 KiB line) and one past the head limit are both answered the API's JSON 431 and
    closed, and the refusal reported once; a handshake of ordinary size still opens. (uvicorn
    0.54 prepared websockets' 431 and never sent it: the connection was held about 100 s.)"""
    refused: list[tuple[str, str, str]] = []

    async def scenario(limits: HttpLimits, extra_headers: bytes, refusal: bool = True) -> tuple[bytes, bytes]:
        async with _serving(limits, lambda *report: refused.append(report)) as server:
            return await asyncio.to_thread(_handshake_answer, server.port, extra_headers, refusal)

    for limits, header in ((HttpLimits(), b"X-Big: " + b"y" * 9 * 1024), (SMALL, b"X-Big: " + b"y" * 4_000)):
        status_line, received = asyncio.run(scenario(limits, header + b"\r\n"))
        assert status_line == b"HTTP/1.1 431 Request Header Fields Too Large", received[:200]
        head, _, body = received.partition(b"\r\n\r\n")
        assert b"connection: close" in head.lower()
        assert _code(json.loads(body)) == "headers_too_large"
    assert [(reason, path) for reason, path, _client in refused] == [("headers_too_large", "/live")] * 2
    status_line, _ = asyncio.run(scenario(HttpLimits(), b"X-Small: y\r\n", refusal=False))
    assert status_line == b"HTTP/1.1 101 Switching Protocols"
    assert len(refused) == 2


def test_requests_beyond_the_in_flight_limit_are_503_and_connections_beyond_the_cap_close() -> None:
    """With two requests in flight a third is answered 503 overloaded at once; connections past
    the cap are closed as they open, and the server serves again once they are gone."""

    async def scenario() -> None:
        async with _serving() as server:
            request = b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
            slow = [asyncio.ensure_future(_exchange(server.port, request)) for _ in range(2)]
            await asyncio.sleep(0.2)
            status, body = await _exchange(server.port, request)
            assert (status, _code(body)) == (503, "overloaded")
            assert [await task for task in slow] == [(200, {"slow": True})] * 2

            held = [
                await asyncio.open_connection("127.0.0.1", server.port)
                for _ in range(SMALL.maximum_connections)
            ]
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            assert await asyncio.wait_for(reader.read(), 5.0) == b""
            writer.close()
            for _, held_writer in held:
                held_writer.close()
            await asyncio.sleep(0.2)
            fine = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
            assert await _exchange(server.port, fine) == (200, {"length": 2})

    asyncio.run(scenario())


def test_a_bearer_token_is_compared_as_bytes_whatever_it_holds() -> None:
    """A header with non-ASCII bytes is simply not the token (comparing str raised, and every
    route answered 500); only the exact token matches. (No key is looked up: none of these is
    shaped like one.)"""

    async def identities() -> list[object]:
        keyring = KeyRing("switchboard-dev-token", rpc=None)  # type: ignore[arg-type]
        headers = [
            b"Bearer switchboard-dev-token",
            b"bearer switchboard-dev-token",
            "Bearer switchboard-dév-token".encode(),
            b"Bearer \xff\xfe",
            b"Basic switchboard-dev-token",
            b"",
        ]
        return [await keyring.identify(header) for header in headers]

    found = asyncio.run(identities())
    assert found[:2] == [DEPLOYMENT_TOKEN, DEPLOYMENT_TOKEN]
    assert found[2:] == [None, None, None, None]
