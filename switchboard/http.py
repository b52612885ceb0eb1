"""A small HTTP/1.1 server on bare asyncio streams: Content-Length bodies, keep-alive, nothing more.

`serve_http(handler, host, port)` runs `handler(Request) -> Response` for each request. A client
that sends garbage, too much, or nothing at all gets a status line or a closed socket; it can never
take the server down, and a handler that raises answers 500 while the connection stays usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

logger = logging.getLogger(__name__)

# A request body beyond this is refused with 413: SDP offers and session configs are a few KiB.
MAXIMUM_BODY_BYTES = 1024 * 1024
# A refused body is still read (and dropped) up to this much, for at most this long.
MAXIMUM_DISCARD_BYTES = 16 * 1024 * 1024
DISCARD_TIMEOUT_S = 5.0
# The request line plus headers; asyncio's default stream limit (64 KiB) would say the same.
MAXIMUM_HEAD_BYTES = 64 * 1024
# A client that starts a request must finish its head and body within this.
REQUEST_READ_TIMEOUT_S = 10.0
# An idle keep-alive connection is closed after this, so dead clients do not hold sockets.
KEEP_ALIVE_IDLE_S = 60.0


@dataclass(frozen=True)
class Request:
    """One parsed request: method, decoded path, query (last value wins), lower-case headers, body."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (raises ValueError when it is not)."""
        return json.loads(self.body)


@dataclass(frozen=True)
class Response:
    """One response: status code, body bytes and extra headers (Content-Length is added on write)."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> Response:
        """A JSON response."""
        return cls(
            status,
            json.dumps(payload).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )

    @classmethod
    def text(cls, status: int, text: str, content_type: str = "text/plain") -> Response:
        """A text response."""
        return cls(status, text.encode(), {"Content-Type": f"{content_type}; charset=utf-8"})


Handler = Callable[[Request], Awaitable[Response]]


class BadRequest(Exception):
    """The client sent something that is not a request we serve; `status` says how to answer."""

    def __init__(self, status: HTTPStatus, reason: str, unread_body: int = 0) -> None:
        super().__init__(reason)
        self.status = status
        # Body bytes the client is still sending: read and dropped after the answer, so the
        # client can finish writing and read it (closing at once would break its pipe).
        self.unread_body = unread_body


async def serve_http(handler: Handler, host: str, port: int) -> asyncio.Server:
    """Listen on host:port (0 picks a free port) and answer every request with `handler`."""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _serve_connection(handler, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except Exception:  # a bug here must cost one connection, not the server
            logger.exception("http connection failed")
        finally:
            writer.close()

    return await asyncio.start_server(on_connection, host, port, limit=MAXIMUM_HEAD_BYTES)


async def _serve_connection(
    handler: Handler, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    while True:
        try:
            first_line = await asyncio.wait_for(reader.readline(), KEEP_ALIVE_IDLE_S)
        except ValueError:  # the line outgrew the stream limit
            await _write(writer, _refusal(HTTPStatus.BAD_REQUEST, "request line too long"), keep_alive=False)
            return
        if not first_line:
            return
        try:
            request, keep_alive = await asyncio.wait_for(
                _read_request(first_line, reader), REQUEST_READ_TIMEOUT_S
            )
        except BadRequest as refused:
            await _write(writer, _refusal(refused.status, str(refused)), keep_alive=False)
            if refused.unread_body:
                await _discard(reader, refused.unread_body)
            return
        response = await _answer(handler, request)
        await _write(writer, response, keep_alive=keep_alive, head_only=request.method == "HEAD")
        if not keep_alive:
            return


async def _answer(handler: Handler, request: Request) -> Response:
    try:
        return await handler(request)
    except Exception:
        logger.exception("http handler failed on %s %s", request.method, request.path)
        return Response.json(500, {"error": {"type": "server_error", "message": "internal error"}})


async def _read_request(first_line: bytes, reader: asyncio.StreamReader) -> tuple[Request, bool]:
    method, target, version = _parse_request_line(first_line)
    headers = await _read_headers(reader)
    if "transfer-encoding" in headers:
        raise BadRequest(HTTPStatus.NOT_IMPLEMENTED, "only Content-Length bodies are served")
    body = await _read_body(reader, headers.get("content-length", "0"))
    connection = headers.get("connection", "").lower()
    keep_alive = connection == "keep-alive" if version == "HTTP/1.0" else connection != "close"
    url = urlsplit(target)
    request = Request(
        method=method,
        path=unquote(url.path),
        query=dict(parse_qsl(url.query, keep_blank_values=True)),
        headers=headers,
        body=body,
    )
    return request, keep_alive


def _parse_request_line(line: bytes) -> tuple[str, str, str]:
    try:
        method, target, version = line.decode("ascii").strip().split(" ")
    except (UnicodeDecodeError, ValueError):
        raise BadRequest(HTTPStatus.BAD_REQUEST, "malformed request line") from None
    if version not in ("HTTP/1.0", "HTTP/1.1") or not method.isalpha() or not target:
        raise BadRequest(HTTPStatus.BAD_REQUEST, "malformed request line")
    return method.upper(), target, version


async def _read_headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    head_bytes = 0
    while True:
        try:
            line = await reader.readline()
        except ValueError:
            raise BadRequest(HTTPStatus.BAD_REQUEST, "header line too long") from None
        head_bytes += len(line)
        if head_bytes > MAXIMUM_HEAD_BYTES:
            raise BadRequest(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "headers too large")
        if not line:
            raise asyncio.IncompleteReadError(b"", None)
        if line in (b"\r\n", b"\n"):
            return headers
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not name.strip() or name != name.strip():
            raise BadRequest(HTTPStatus.BAD_REQUEST, "malformed header line")
        headers[name.lower()] = value.strip()


async def _read_body(reader: asyncio.StreamReader, declared_length: str) -> bytes:
    if not declared_length.isdigit():
        raise BadRequest(HTTPStatus.BAD_REQUEST, "malformed Content-Length")
    length = int(declared_length)
    if length > MAXIMUM_BODY_BYTES:
        raise BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "body too large", unread_body=length)
    return await reader.readexactly(length)


async def _discard(reader: asyncio.StreamReader, length: int) -> None:
    """Read and drop up to `length` bytes (at most MAXIMUM_DISCARD_BYTES, for a little while)."""
    remaining = min(length, MAXIMUM_DISCARD_BYTES)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DISCARD_TIMEOUT_S
    with contextlib.suppress(TimeoutError, ConnectionError, asyncio.IncompleteReadError):
        while remaining > 0 and loop.time() < deadline:
            chunk = await asyncio.wait_for(reader.read(min(remaining, 65_536)), deadline - loop.time())
            if not chunk:
                return
            remaining -= len(chunk)


async def _write(
    writer: asyncio.StreamWriter, response: Response, *, keep_alive: bool, head_only: bool = False
) -> None:
    lines = [f"HTTP/1.1 {response.status} {_reason_phrase(response.status)}"]
    lines += [f"{name}: {value}" for name, value in response.headers.items()]
    lines.append(f"Content-Length: {len(response.body)}")
    lines.append(f"Connection: {'keep-alive' if keep_alive else 'close'}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    writer.write(head if head_only else head + response.body)
    await writer.drain()


def _refusal(status: HTTPStatus, reason: str) -> Response:
    """A request refused before any handler saw it, as a typed JSON error."""
    code = status.phrase.lower().replace(" ", "_")
    return Response.json(
        status, {"error": {"type": "invalid_request_error", "code": code, "message": reason}}
    )


def _reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:  # a handler may answer with a code http.HTTPStatus does not know
        return "Unknown"
