"""The small asyncio HTTP/1.1 server shared by the gateway API and the simulator."""

from __future__ import annotations

import asyncio

from switchboard.http import MAXIMUM_BODY_BYTES, Request, Response, serve_http
from tests.simulator.support import read_response


async def _echo(request: Request) -> Response:
    if request.path == "/boom":
        raise RuntimeError("handler bug")
    return Response.json(
        200,
        {
            "method": request.method,
            "path": request.path,
            "query": request.query,
            "length": len(request.body),
            "type": request.headers.get("content-type"),
        },
    )


async def _exchange(port: int, raw: bytes, responses: int = 1) -> list[tuple[int, bytes]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    answers = []
    for _ in range(responses):
        status, _, body = await read_response(reader)
        answers.append((status, body))
    writer.close()
    return answers


def _port(server: asyncio.Server) -> int:
    port: int = server.sockets[0].getsockname()[1]
    return port


def test_keeps_the_connection_alive_between_requests() -> None:
    """Two requests on one connection each get their answer, with path, query and body parsed."""

    async def scenario() -> None:
        server = await serve_http(_echo, "127.0.0.1", 0)
        async with server:
            raw = (
                b"GET /a%20b?x=1&y=2 HTTP/1.1\r\nHost: h\r\n\r\n"
                b"POST /c HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
            )
            (first, second) = await _exchange(_port(server), raw, responses=2)
            assert first[0] == 200 and b'"path": "/a b"' in first[1] and b'"x": "1"' in first[1]
            assert second[0] == 200 and b'"length": 5' in second[1]

    asyncio.run(scenario())


def test_refuses_bad_requests_and_keeps_serving() -> None:
    """Garbage gets 400, an oversized body 413, a handler bug 500, and the server still answers."""

    async def scenario() -> None:
        server = await serve_http(_echo, "127.0.0.1", 0)
        async with server:
            port = _port(server)
            too_big = f"POST / HTTP/1.1\r\nContent-Length: {MAXIMUM_BODY_BYTES + 1}\r\n\r\n"
            assert (await _exchange(port, b"\x00\xffnonsense\r\n\r\n"))[0][0] == 400
            assert (await _exchange(port, b"GET / HTTP/1.1\r\nno colon\r\n\r\n"))[0][0] == 400
            assert (await _exchange(port, too_big.encode()))[0][0] == 413
            assert (await _exchange(port, b"GET /boom HTTP/1.1\r\n\r\n"))[0][0] == 500
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTT")  # a client that gives up mid-request
            writer.close()
            assert (await _exchange(port, b"GET /ok HTTP/1.1\r\n\r\n"))[0][0] == 200

    asyncio.run(scenario())
