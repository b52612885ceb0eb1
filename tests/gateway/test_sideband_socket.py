"""The one socket class drives its sideband's protocol: every frame fed in order, ticks while it
is open, and what the protocol still holds carried out before the close is reported."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from gateway.sideband import SidebandSocket
from pipeline.call.sideband import Action, Submit
from pipeline.session.wire import SidebandClosed, SidebandConnected


class RecordingSideband:
    """A protocol that answers one Submit per entry point, naming what it was fed."""

    closed_by_provider_within_s: float | None = None

    def __init__(self, tick_every_s: float | None) -> None:
        self.tick_every_s = tick_every_s

    def receive(self, frame: str | bytes, received_at: float, now: float) -> list[Action]:
        return [Submit({"type": "fed", "frame": frame}, received_at)]

    def tick(self, at: float) -> list[Action]:
        return [Submit({"type": "tick"}, at)]

    def close(self, at: float) -> list[Action]:
        return [Submit({"type": "closed"}, at)]

    def playback(self, now: float) -> dict[str, Any] | None:
        return None


def _run(tick_every_s: float | None, frames: list[str], linger_s: float) -> list[str]:
    """What the socket hands on, in order, for a provider that sends `frames`, waits and closes."""
    seen: list[str] = []

    async def provider(connection: ServerConnection) -> None:
        for frame in frames:
            await connection.send(frame)
        await asyncio.sleep(linger_s)
        await connection.close()

    def on_actions(_socket: SidebandSocket, actions: Sequence[Action]) -> None:
        for action in actions:
            assert isinstance(action, Submit)
            seen.append(str(action.event.get("frame", action.event["type"])))

    def on_host_event(_socket: SidebandSocket, event: SidebandConnected | SidebandClosed) -> None:
        seen.append(type(event).__name__)

    async def main() -> None:
        async with serve(provider, "127.0.0.1", 0) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            socket = SidebandSocket(
                "sess_x",
                "rtc_x",
                1,
                f"ws://127.0.0.1:{port}/v1",
                {},
                RecordingSideband(tick_every_s),
                on_actions,
                on_host_event,
            )
            socket.start()
            assert socket.task is not None
            await asyncio.wait_for(socket.task, 5)

    asyncio.run(main())
    return seen


def test_frames_are_fed_in_order_and_the_close_comes_after_what_the_protocol_held() -> None:
    """Connected first, each frame's actions in order, the protocol's close, then Closed."""
    seen = _run(None, ['{"n": 1}', '{"n": 2}'], linger_s=0.05)
    assert seen == ["SidebandConnected", '{"n": 1}', '{"n": 2}', "closed", "SidebandClosed"]


def test_a_sideband_that_wants_ticks_gets_them_while_it_is_open() -> None:
    """Ticks come between the connection and the close, never after it."""
    seen = _run(0.01, [], linger_s=0.2)
    assert seen[0] == "SidebandConnected" and seen[-2:] == ["closed", "SidebandClosed"]
    assert set(seen[1:-2]) == {"tick"} and len(seen[1:-2]) >= 3


def test_a_sideband_that_opens_no_connection_still_closes_its_protocol() -> None:
    """A sideband that never opened reports its close after the protocol's."""
    seen: list[str] = []

    async def main() -> None:
        socket = SidebandSocket(
            "sess_x",
            "rtc_x",
            1,
            "ws://127.0.0.1:1/v1",
            {},
            RecordingSideband(0.01),
            lambda _socket, actions: seen.extend(
                str(a.event["type"]) for a in actions if isinstance(a, Submit)
            ),
            lambda _socket, event: seen.append(type(event).__name__),
        )
        socket.start()
        assert socket.task is not None
        await asyncio.wait_for(socket.task, 15)

    asyncio.run(main())
    assert seen == ["closed", "SidebandClosed"]
