"""What the gateway's tests share: a bare provider endpoint that records what it is sent, a
sideband socket opened to it, and a bounded wait."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from gateway.sideband import SidebandSocket
from pipeline.realtime.sideband import RealtimeSideband


class Provider:
    """A bare sideband endpoint that records every frame it receives."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.url = ""
        # Its open sidebands, by the call id they were opened for (so a test can drop one).
        self.open: dict[str, ServerConnection] = {}

    async def handler(self, connection: ServerConnection) -> None:
        path = connection.request.path if connection.request is not None else ""
        call_id = path.partition("call_id=")[2]
        self.open[call_id] = connection
        try:
            async for frame in connection:
                self.received.append(json.loads(frame))
        finally:
            self.open.pop(call_id, None)


@asynccontextmanager
async def running_provider() -> AsyncIterator[Provider]:
    endpoint = Provider()
    async with serve(endpoint.handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        endpoint.url = f"ws://127.0.0.1:{port}/v1"
        yield endpoint


async def open_socket(provider: Provider, host_events: list[Any]) -> SidebandSocket:
    socket = SidebandSocket(
        "sess_x",
        "rtc_x",
        1,
        f"{provider.url}/realtime?call_id=rtc_x",
        {"Authorization": "Bearer sk-test"},
        RealtimeSideband(),
        on_actions=lambda *_: None,
        on_host_event=lambda _socket, event: host_events.append(event),
    )
    socket.start()
    for _ in range(200):
        if host_events:
            break
        await asyncio.sleep(0.01)
    return socket


async def until(predicate: Callable[[], bool], bound_s: float = 10.0) -> None:
    """Wait for `predicate` (the bound only turns a hang into a failure)."""
    deadline = time.monotonic() + bound_s
    while not predicate():
        assert time.monotonic() < deadline, "not reached within the bound"
        await asyncio.sleep(0.01)
