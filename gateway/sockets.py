"""`CallSocket`: one sideband of one call: a reader task for frames in, a writer task for
controls out.

Controls wait in the socket's own outbox: a provider that stops reading (or a close handshake
that hangs) stalls this call's writer only, never the gateway's dispatcher and the other calls
(with the provider not answering, an unrelated API call once took 10 s instead of 9 ms)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from pipeline.limits import MAXIMUM_SOCKET_MESSAGE_BYTES
from pipeline.wire import SidebandClosed, SidebandConnected

logger = logging.getLogger(__name__)

# Control ids remembered per socket for "send each id once": far more than one call's
# controls can be in flight or retried at a time.
REMEMBERED_CONTROL_IDS = 4_096
# At most one maintenance response runs at a time; a few are remembered for their late frames.
UNSPOKEN_RESPONSES = 8
SIDEBAND_OPEN_TIMEOUT_S = 10.0

# Controls waiting for a sideband that does not take them; beyond this the call is lost anyway,
# and the oldest waiting control is dropped rather than memory growing without bound.
OUTBOX_CONTROLS = 1_024
# A close handshake the provider does not answer is abandoned after this.
SIDEBAND_CLOSE_TIMEOUT_S = 5.0

FrameHandler = Callable[["CallSocket", str | bytes, float], None]
HostEventHandler = Callable[["CallSocket", SidebandConnected | SidebandClosed], None]
SentHandler = Callable[["CallSocket", dict[str, Any]], None]


class CallSocket:
    """The sideband of one session's provider call."""

    def __init__(
        self,
        session_id: str,
        call_id: str,
        generation: int,
        url: str,
        headers: dict[str, str],
        on_frame: FrameHandler,
        on_host_event: HostEventHandler,
        on_sent: SentHandler | None = None,
    ) -> None:
        self.session_id = session_id
        self.call_id = call_id
        self.generation = generation
        self._url = url
        self._headers = headers
        self._on_frame = on_frame
        self._on_host_event = on_host_event
        self._on_sent = on_sent
        self._connection: ClientConnection | None = None
        self._outbox: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._sent: set[str] = set()
        self._sent_order: deque[str] = deque()
        self._calls_seen: set[str] = set()
        self._calls_seen_order: deque[str] = deque()
        # Maintenance responses (compaction summaries) seen on this socket: nobody hears them,
        # so their text stays off the watchers' transcript.
        self._unspoken: deque[str] = deque(maxlen=UNSPOKEN_RESPONSES)
        # The assistant audio item playing now: (item id, response id, monotonic time of its
        # first transcript delta). The audio reaches the caller as it is generated, so the
        # time since then approximates how much of it they heard.
        self._playing: tuple[str, str, float] | None = None
        self.closing = False
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"sideband-{self.session_id}")

    async def _run(self) -> None:
        try:
            connection = await websockets.connect(
                self._url,
                additional_headers=self._headers,
                max_size=MAXIMUM_SOCKET_MESSAGE_BYTES,
                open_timeout=SIDEBAND_OPEN_TIMEOUT_S,
                close_timeout=SIDEBAND_CLOSE_TIMEOUT_S,
                compression=None,
            )
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as error:
            logger.warning("sideband of %s did not open: %r", self.session_id, error)
            self._on_host_event(self, SidebandClosed(code=None, reason=f"open failed: {error}"[:200]))
            return
        self._connection = connection
        self._writer = asyncio.get_running_loop().create_task(
            self._write(connection), name=f"sideband-writer-{self.session_id}"
        )
        # Numbered before any provider frame, so the log says "connected" first.
        self._on_host_event(self, SidebandConnected(call_id=self.call_id))
        try:
            async for frame in connection:
                received_at = time.time()
                try:
                    self._on_frame(self, frame, received_at)
                except Exception:  # one frame's failure must not end the call's socket
                    logger.exception("frame handling failed on %s", self.session_id)
        except ConnectionClosed:
            pass
        finally:
            self._writer.cancel()
            self._on_host_event(
                self,
                SidebandClosed(
                    code=connection.close_code,
                    reason=(connection.close_reason or "")[:200],
                    by_host=self.closing,
                ),
            )

    def first_sight_of_call(self, call_id: str) -> bool:
        """True the first time this socket sees a function call id."""
        if call_id in self._calls_seen:
            return False
        self._calls_seen.add(call_id)
        self._calls_seen_order.append(call_id)
        if len(self._calls_seen_order) > REMEMBERED_CONTROL_IDS:
            self._calls_seen.discard(self._calls_seen_order.popleft())
        return True

    def heard_delta(self, item_id: str, response_id: str, now: float) -> None:
        """An assistant transcript delta arrived: the first of an item starts its playback."""
        if self._playing is None or self._playing[0] != item_id:
            self._playing = (item_id, response_id, now)

    def playback(self, now: float) -> dict[str, Any] | None:
        """What the caller is hearing now: the playing item and how long it has played."""
        if self._playing is None:
            return None
        item_id, response_id, started = self._playing
        return {
            "item_id": item_id,
            "response_id": response_id,
            "played_ms": max(int((now - started) * 1000), 0),
        }

    def mark_unspoken(self, response_id: str) -> None:
        self._unspoken.append(response_id)

    def is_unspoken(self, response_id: object) -> bool:
        return isinstance(response_id, str) and response_id in self._unspoken

    def send(self, control_id: str, control: dict[str, Any]) -> bool:
        """Queue a control for the writer, once per id; False if it was queued before or the
        socket is not open (a control for a closed sideband has nowhere to go)."""
        if control_id in self._sent or self._connection is None or self.closing:
            return False
        self._sent.add(control_id)
        self._sent_order.append(control_id)
        if len(self._sent_order) > REMEMBERED_CONTROL_IDS:
            self._sent.discard(self._sent_order.popleft())
        if self._outbox.qsize() >= OUTBOX_CONTROLS:
            dropped, _ = self._outbox.get_nowait()
            logger.warning("sideband of %s is not taking controls; dropped %s", self.session_id, dropped)
        self._outbox.put_nowait((control_id, control))
        return True

    async def _write(self, connection: ClientConnection) -> None:
        """Send queued controls in order, for as long as the sideband is open."""
        while True:
            _, control = await self._outbox.get()
            try:
                await connection.send(json.dumps(control))
            except ConnectionClosed:
                return
            finally:
                self._outbox.task_done()
            if self._on_sent is not None:
                self._on_sent(self, control)

    async def drained(self) -> None:
        """Wait until every queued control was handed to the connection."""
        await self._outbox.join()

    async def close(self) -> None:
        """Close the sideband once the controls queued before the close went out (or the
        close timeout passed: a provider that takes nothing will not take those either)."""
        self.closing = True
        if self._connection is not None:
            try:
                await asyncio.wait_for(self.drained(), SIDEBAND_CLOSE_TIMEOUT_S)
            except TimeoutError:
                logger.warning("sideband of %s closed with controls unsent", self.session_id)
            await self._connection.close()
        elif self.task is not None:
            self.task.cancel()
