"""A real MCP server for the tests, built with the `mcp` package (streamable HTTP, on uvicorn in
a thread of the test process, on a free loopback port). It refuses any request without the
bearer token it was given, and records what its slow tool saw, so a test can tell that a
cancelled call reached the server as a cancellation."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

TOKEN = "test-token-4f1c"
TEN_MEGABYTES = 10 * 1_048_576

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass
class Seen:
    """What the server saw: the authorization headers of its requests, and its slow tool's
    runs (started, then finished or cancelled)."""

    authorizations: list[str] = field(default_factory=list)
    slow_started: threading.Event = field(default_factory=threading.Event)
    slow_cancelled: threading.Event = field(default_factory=threading.Event)


def build_server(seen: Seen) -> MCPServer:
    """The server and its tools."""
    server = MCPServer("switchboard-tests", log_level="WARNING")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @server.tool()
    def greet(name: str) -> str:
        """Greet someone by name."""
        return f"Hello, {name}."

    @server.tool(structured_output=False)
    def describe_order(order_id: str) -> str:
        """Describe an order in two lines of text."""
        return f"Order {order_id}\nStatus: shipped"

    @server.tool()
    def find_order(order_id: str) -> dict[str, Any]:
        """Look an order up."""
        if order_id == "missing":
            raise ToolError(f"order {order_id} does not exist")
        return {"order_id": order_id, "status": "shipped", "items": 2}

    @server.tool()
    def crash() -> str:
        """Fail without saying why."""
        raise RuntimeError("internal detail the model must not see")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Take its time."""
        seen.slow_started.set()
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            seen.slow_cancelled.set()
            raise
        return "done"

    @server.tool()
    def huge() -> str:
        """Answer ten megabytes."""
        return "x" * TEN_MEGABYTES

    @server.tool()
    def sized(characters: int) -> str:
        """Answer this many characters."""
        return "y" * characters

    @server.tool()
    def note(text: str | None = None) -> str:
        """Its optional parameter is an anyOf, which the argument validator cannot check."""
        return text or ""

    @server.tool(name="orders.cancel")
    def cancel_order(order_id: str) -> str:
        """Its name has a dot, which a provider's tool name cannot."""
        return order_id

    return server


class _RequireToken:
    """Refuses (401) any request whose Authorization is not the bearer token, noting each."""

    def __init__(self, app: Any, seen: Seen) -> None:
        self._app = app
        self._seen = seen

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            authorization = headers.get(b"authorization", b"").decode()
            self._seen.authorizations.append(authorization)
            if authorization != f"Bearer {TOKEN}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"no"})
                return
        await self._app(scope, receive, send)


@dataclass
class Running:
    url: str
    seen: Seen


@contextmanager
def running_server() -> Iterator[Running]:
    """The server, serving on a free loopback port until the block ends."""
    seen = Seen()
    app = _RequireToken(build_server(seen).streamable_http_app(), seen)
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    started = time.monotonic()
    while not server.started:
        assert time.monotonic() - started < 10, "the MCP test server did not start"
        time.sleep(0.01)
    try:
        yield Running(url=f"http://127.0.0.1:{port}/mcp", seen=seen)
    finally:
        server.should_exit = True
        thread.join(10)
        listening.close()
