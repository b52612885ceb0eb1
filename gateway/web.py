"""The gateway's HTTP server: Starlette on uvicorn, with every limit set and stated.

uvicorn parses HTTP (h11) and WebSocket (the `websockets` library's sans-I/O protocol); this
module adds what neither bounds by itself:

- a request head (request line and headers) must arrive within `head_timeout_s` of the
  connection opening or of the previous response, or the connection is closed: uvicorn arms its
  keep-alive timer only after a response, so a client that opens a connection and sends half a
  request line would otherwise hold it for good;
- a request head (line and headers) beyond `maximum_head_bytes` is refused with 431 (h11
  alone bounds only a head still incomplete in its buffer);
- a body is refused with 413 beyond `maximum_body_bytes` (by its Content-Length at once, before
  the body arrives; or counted as it streams when it is chunked), with 400 for a
  Content-Length that is not a number, and with 408 when it does not arrive within
  `body_timeout_s`: Starlette reads whatever it is sent;
- connections beyond `maximum_connections` are closed as they open, and requests beyond
  `maximum_requests_in_flight` answered 503;
- every error is the API's JSON shape, `{"error": {"code", "message"}}` — a 500, uvicorn's
  own 400 for a request h11 cannot parse, and the 503 included;
- a WebSocket handshake that the `websockets` parser would refuse for its size (a request line
  or a header line over its 8 KiB, more than its 128 headers) is answered 414 or 431 here,
  before it is handed over, and the connection closed: uvicorn 0.54 left websockets' own answer
  unsent and held the connection, and 0.55 sends it as plain text;
- a refused WebSocket handshake is reported once, to `on_handshake_refused` (the gateway counts
  and logs it); uvicorn's and websockets' own INFO lines about each handshake are not logged
  (they repeated every refusal, and an accepted listener's line held its live token).

The server runs inside the gateway's own event loop (`start_server` / `RunningServer.stop`),
not through `uvicorn.run`, which would take over the process's signals and loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, overload

import h11
import uvicorn
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import MAX_LINE_LENGTH, MAX_NUM_HEADERS

logger = logging.getLogger(__name__)

# A refused body is still read (and dropped) up to this much, so its client reads the answer.
MAXIMUM_DISCARD_BYTES = 16 * 1024 * 1024

# What a WebSocket connection's protocol logs: warnings and errors only. Each handshake's
# outcome is the gateway's to log (once, at INFO, without the URL's token).
_websocket_logger = logging.getLogger("gateway.web.websocket")
_websocket_logger.setLevel(logging.WARNING)

Scope = MutableMapping[str, Any]
# A refused WebSocket handshake: its reason (an error code), its path (no query: it may hold a
# token) and its client's address.
HandshakeRefused = Callable[[str, str, str], None]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class HttpLimits:
    """What one gateway's HTTP server accepts; the README's "limits" table states these."""

    # SDP offers and session specs are a few KiB; nothing the API takes comes near this.
    maximum_body_bytes: int = 1024 * 1024
    # Request line plus headers (h11's own default is 16 KiB; a bearer token and an SDP
    # content type fit many times over).
    maximum_head_bytes: int = 16 * 1024
    # Connections held at once (live listeners included); one more is closed as it opens. A
    # gateway's own load is its listeners and API calls, not its calls' audio, so a few
    # thousand is ample and still bounds sockets and memory.
    maximum_connections: int = 4_096
    # Requests being handled at once; one more is answered 503 at once.
    maximum_requests_in_flight: int = 1_024
    # An idle keep-alive connection is closed after this.
    keep_alive_s: int = 5
    # A request's head must be complete this long after the connection opened (or after the
    # previous response on it), its body this long after the head.
    head_timeout_s: float = 10.0
    body_timeout_s: float = 10.0
    # A live-transcript listener sends nothing big; pings find dead ones.
    maximum_websocket_message_bytes: int = 64 * 1024
    websocket_ping_interval_s: float = 20.0
    websocket_ping_timeout_s: float = 20.0
    # In-flight requests get this long to finish when the gateway stops.
    graceful_shutdown_s: int = 5


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _error_bytes(code: str, message: str) -> bytes:
    return json.dumps(error_body(code, message)).encode()


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


def _status_code_name(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return f"http_{status}"


class BodyRefused(HTTPException):
    """A request body refused while it was read (too large as it streamed, or too slow)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(status, message)
        self.code = code


async def http_exception(_request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no route, wrong method) and body refusals, in the API's shape."""
    assert isinstance(exc, HTTPException)
    code = exc.code if isinstance(exc, BodyRefused) else _status_code_name(exc.status_code)
    return error_response(exc.status_code, code, str(exc.detail), dict(exc.headers or {}))


async def server_error(_request: Request, _exc: Exception) -> Response:
    """A bug answers 500 with a code, never a traceback (uvicorn logs the traceback)."""
    return error_response(500, "internal_error", "the request could not be handled")


EXCEPTION_HANDLERS: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    HTTPException: http_exception,
    Exception: server_error,
}


class BoundedRequests:
    """ASGI middleware: at most `maximum_requests_in_flight` HTTP requests at once."""

    def __init__(self, app: ASGIApp, limits: HttpLimits) -> None:
        self.app = app
        self.maximum = limits.maximum_requests_in_flight
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.maximum:
            await _refuse(send, 503, "overloaded", f"more than {self.maximum} requests at once; retry")
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


class BoundedBody:
    """ASGI middleware: refuse a body that is too large, malformed in length, or too slow.

    A declared length is checked before the app runs; a streamed body is counted as the app
    reads it, and a refusal then is raised into the app as `BodyRefused` (its exception
    handler answers it)."""

    def __init__(self, app: ASGIApp, limits: HttpLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head_bytes = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        head_bytes += sum(len(name) + len(value) + 4 for name, value in scope["headers"])
        if head_bytes > self.limits.maximum_head_bytes:
            # h11 bounds only a head still incomplete in its buffer; one that arrives whole in
            # a single read is measured here.
            limit = self.limits.maximum_head_bytes
            await _refuse(send, 431, "headers_too_large", f"the request head exceeds {limit} bytes")
            return
        maximum = self.limits.maximum_body_bytes
        declared = [value for name, value in scope["headers"] if name == b"content-length"]
        if declared:
            if len(declared) > 1 or not declared[0].isdigit():
                await _refuse(send, 400, "bad_request", "Content-Length is not a number")
                return
            if int(declared[0]) > maximum:
                await _refuse_declared(
                    scope, receive, send, int(declared[0]), maximum, self.limits.body_timeout_s
                )
                return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.body_timeout_s
        received = 0

        async def bounded_receive() -> Message:
            nonlocal received
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.001))
            except TimeoutError:
                raise BodyRefused(408, "request_timeout", "the body did not arrive in time") from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > maximum:
                    raise BodyRefused(413, "body_too_large", f"the body exceeds {maximum} bytes")
            return message

        await self.app(scope, bounded_receive, send)


async def _refuse_declared(
    scope: Scope, receive: Receive, send: Send, declared: int, maximum: int, timeout_s: float
) -> None:
    """Refuse a body declared larger than `maximum` with 413 at once, before any of it arrives:
    the client hears it then, not after sending megabytes (or after the body's deadline, had it
    sent only the head). The response is held open while what the client sends anyway is read
    and dropped (for `timeout_s` at most), since closing on an unread body resets the connection
    and the client could lose the 413 it has not read yet. A client that asked to be told first
    (`Expect: 100-continue`) sends no body after a refusal, so none is waited for."""
    body = _error_bytes("body_too_large", f"the body exceeds {maximum} bytes")
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": True})
    if header(scope, b"expect").lower() != b"100-continue":
        await _discard(receive, declared, timeout_s)
    await send({"type": "http.response.body", "body": b""})


async def _discard(receive: Receive, length: int, timeout_s: float) -> None:
    """Read and drop up to `length` body bytes (at most MAXIMUM_DISCARD_BYTES) for a while."""
    remaining = min(length, MAXIMUM_DISCARD_BYTES)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            while remaining > 0:
                message = await receive()
                if message["type"] != "http.request":
                    return
                remaining -= len(message.get("body", b""))
                if not message.get("more_body", False):
                    return


@overload
def header(scope: Scope, name: bytes) -> bytes: ...
@overload
def header(scope: Scope, name: bytes, default: None) -> bytes | None: ...
def header(scope: Scope, name: bytes, default: bytes | None = b"") -> bytes | None:
    """A request header's value by its lower-case name (the first, if sent twice); `default`
    when it was not sent (None tells an absent header from an empty one)."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return default


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = _error_bytes(code, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _websocket_head_refusal(
    target: bytes, headers: list[tuple[bytes, bytes]], maximum_head_bytes: int
) -> tuple[int, str, str] | None:
    """Why this handshake's head is refused (status, code, message), or None: past the head
    limit the HTTP path holds (BoundedBody, which a WebSocket does not pass through), or past
    what the `websockets` parser reads, measured as uvicorn hands the head over (one line per
    header, CRLF included)."""
    if len(b"GET  HTTP/1.1\r\n") + len(target) > MAX_LINE_LENGTH:
        return 414, "uri_too_long", f"the request line exceeds {MAX_LINE_LENGTH} bytes"
    lines = [len(name) + len(value) + 4 for name, value in headers]
    if len(target) + sum(lines) > maximum_head_bytes:
        return 431, "headers_too_large", f"the request head exceeds {maximum_head_bytes} bytes"
    if len(headers) > MAX_NUM_HEADERS:
        return 431, "headers_too_large", f"a WebSocket handshake has at most {MAX_NUM_HEADERS} headers"
    if any(line > MAX_LINE_LENGTH for line in lines):
        return 431, "headers_too_large", f"a header line exceeds {MAX_LINE_LENGTH} bytes"
    return None


def _refusal_bytes(status: int, code: str, message: str) -> bytes:
    body = _error_bytes(code, message)
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class _QuietWebSockets(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol (on websockets' sans-I/O one), logging only its warnings
    and errors: the INFO line it and websockets write for every handshake repeated each
    refusal (which the gateway logs once) and held an accepted listener's live token."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger = _websocket_logger
        self.conn.logger = _websocket_logger


class _BoundedH11(H11Protocol):
    """uvicorn's h11 protocol, closing a connection beyond the cap as it opens and one whose
    request head does not arrive in time, answering an unparsable request in JSON, and refusing
    a WebSocket handshake too large for the `websockets` parser before handing it over."""

    head_timeout_s = HttpLimits.head_timeout_s
    maximum_connections = HttpLimits.maximum_connections
    maximum_head_bytes = HttpLimits.maximum_head_bytes
    on_handshake_refused: HandshakeRefused | None = None

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        refusal = _websocket_head_refusal(event.target, list(event.headers), self.maximum_head_bytes)
        if refusal is None:
            super().handle_websocket_upgrade(event)
            return
        status, code, message = refusal
        self.transport.write(_refusal_bytes(status, code, message))
        self.transport.close()
        if self.on_handshake_refused is not None:
            path = event.target.partition(b"?")[0].decode("latin-1")[:200]
            client = f"{self.client[0]}:{self.client[1]}" if self.client else ""
            self.on_handshake_refused(code, path, client)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        if len(self.connections) > self.maximum_connections:
            transport.close()
            return
        self._arm_head_timer()

    def send_400_response(self, msg: str) -> None:
        body = _error_bytes("bad_request", msg)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # Their side is IDLE until a whole request head is parsed; once it is, the request is
        # the app's (its body has its own deadline) or the connection is a WebSocket.
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self._head_timer is None:
                self._arm_head_timer()
        else:
            self._disarm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The keep-alive timer now covers the idle connection; a next request that starts and
        # stalls is caught when its first bytes arrive (data_received above).
        self._disarm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


@dataclass
class RunningServer:
    """A uvicorn server started in the current event loop."""

    server: uvicorn.Server
    port: int
    _ticker: asyncio.Task[None]

    async def stop(self) -> None:
        self.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._ticker
        await self.server.shutdown()


async def start_server(
    app: ASGIApp,
    host: str,
    port: int,
    limits: HttpLimits | None = None,
    on_handshake_refused: HandshakeRefused | None = None,
) -> RunningServer:
    """Serve `app` on host:port (0 picks a free port) in the running loop; raises OSError when
    the address cannot be bound. `on_handshake_refused` hears of each WebSocket handshake the
    server itself refuses (the app reports its own)."""
    limits = limits or HttpLimits()
    protocol = type(
        "BoundedH11",
        (_BoundedH11,),
        {
            "head_timeout_s": limits.head_timeout_s,
            "maximum_connections": limits.maximum_connections,
            "maximum_head_bytes": limits.maximum_head_bytes,
            "on_handshake_refused": staticmethod(on_handshake_refused) if on_handshake_refused else None,
        },
    )
    config = uvicorn.Config(
        BoundedRequests(BoundedBody(app, limits), limits),
        http=protocol,
        ws=_QuietWebSockets,
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_keep_alive=limits.keep_alive_s,
        timeout_graceful_shutdown=limits.graceful_shutdown_s,
        h11_max_incomplete_event_size=limits.maximum_head_bytes,
        ws_max_size=limits.maximum_websocket_message_bytes,
        ws_ping_interval=limits.websocket_ping_interval_s,
        ws_ping_timeout=limits.websocket_ping_timeout_s,
        ws_per_message_deflate=False,
    )
    config.load()
    # Bound here rather than by uvicorn, which calls sys.exit when it cannot bind.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError:
        listener.close()
        raise
    listener.setblocking(False)
    server = uvicorn.Server(config)
    # What Server.serve() does before startup(); serve() itself would take over the process's
    # SIGINT/SIGTERM handlers, which belong to the gateway.
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[listener])
    ticker = asyncio.get_running_loop().create_task(server.main_loop(), name="http-server")
    return RunningServer(server, listener.getsockname()[1], ticker)
