"""Test helpers: a raw HTTP client, a running simulator, and a sideband client that keeps order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect

from simulator.script import CallScript, Timing, load_script
from simulator.server import Simulator

# No single wait in these tests should come near this; it only stops a broken test from hanging.
EVENT_TIMEOUT_S = 3.0
AUTH = {"Authorization": "Bearer sk-test"}
# Fast pacing for scripted calls, so a whole call takes well under a second.
QUICK = Timing(delta_interval_ms=2, chars_per_delta=12, speech_ms=20, response_wait_ms=500)


def quick(script_name: str, **changes: Any) -> CallScript:
    """A packaged script with fast timing (and any other field replaced)."""
    return load_script(script_name).model_copy(update={"timing": QUICK, **changes})


async def http(
    url: str,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request on a fresh connection: status, lower-case headers, body."""
    address = urlsplit(url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    try:
        head = [
            f"{method} {path} HTTP/1.1",
            f"Host: {address.netloc}",
            "Connection: close",
            f"Content-Length: {len(body)}",
        ]
        head += [f"{name}: {value}" for name, value in (headers or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()
        return await read_response(reader)
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """Read one response from the stream."""
    status_line = await reader.readline()
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


@asynccontextmanager
async def running(simulator: Simulator) -> AsyncIterator[Simulator]:
    """The simulator, listening on free ports for the duration of the block."""
    await simulator.start()
    try:
        yield simulator
    finally:
        await simulator.stop()


class Sideband:
    """A host's end of a sideband: send controls, read events in order, wait for a type."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.seen: list[dict[str, Any]] = []

    async def send(self, control: dict[str, Any] | str) -> None:
        await self.socket.send(control if isinstance(control, str) else json.dumps(control))

    async def next(self) -> dict[str, Any]:
        event: dict[str, Any] = json.loads(await asyncio.wait_for(self.socket.recv(), EVENT_TIMEOUT_S))
        self.seen.append(event)
        return event

    async def until(self, event_type: str) -> list[dict[str, Any]]:
        """Every event up to and including the first of `event_type`."""
        events = []
        while True:
            event = await self.next()
            events.append(event)
            if event["type"] == event_type:
                return events


@asynccontextmanager
async def sideband(simulator: Simulator, call_id: str | None = None) -> AsyncIterator[Sideband]:
    """A sideband to a new (or the given) call of the simulator."""
    call_id = call_id or simulator.create_call()
    url = f"{simulator.ws_url}/realtime?call_id={call_id}"
    async with connect(url, additional_headers=AUTH) as socket:
        yield Sideband(socket)


def types(events: list[dict[str, Any]]) -> list[str]:
    """The types of these events, in order."""
    return [event["type"] for event in events]
