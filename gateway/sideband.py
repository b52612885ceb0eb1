"""`SidebandSocket`: one sideband of one call, for either provider: a reader task that feeds
each frame to the socket's sans-I/O `Sideband` (its provider's wing) and hands the actions it
answers to the gateway, a writer task for controls out, and, for a sideband that wants them,
ticks while it is open.

The socket knows no protocol rule: which frames are durable, which are streamed, what is
deduplicated or rewritten is its `Sideband`'s (pipeline/realtime/sideband.py,
pipeline/live/sideband.py), the way websockets' connection only drives its `Protocol`.

Controls wait in the socket's own outbox: a provider that stops reading (or a close handshake
that hangs) stalls this call's writer only, never the gateway's dispatcher and the other calls
(with the provider not answering, an unrelated API call once took 10 s instead of 9 ms)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from gateway.sink import EventSink
from gateway.tracing import CallTrace
from gateway.watch import WatchHub
from pipeline.call.limits import MAXIMUM_SOCKET_MESSAGE_BYTES
from pipeline.call.sideband import Action, Delta, Final, Sideband, Submit, Waited
from pipeline.session.wire import SidebandClosed, SidebandConnected

logger = logging.getLogger(__name__)

# Control ids remembered per socket for "send each id once": far more than one call's
# controls can be in flight or retried at a time.
REMEMBERED_CONTROL_IDS = 4_096
SIDEBAND_OPEN_TIMEOUT_S = 10.0

# Controls waiting for a sideband that does not take them; beyond this the call is lost anyway,
# and the oldest waiting control is dropped rather than memory growing without bound.
OUTBOX_CONTROLS = 1_024
# A close handshake the provider does not answer is abandoned after this.
SIDEBAND_CLOSE_TIMEOUT_S = 5.0

ActionHandler = Callable[["SidebandSocket", Sequence[Action]], None]
HostEventHandler = Callable[["SidebandSocket", SidebandConnected | SidebandClosed], None]
SentHandler = Callable[["SidebandSocket", dict[str, Any]], None]


class SidebandSocket:
    """The sideband of one session's provider call, driving that provider's `Sideband`."""

    def __init__(
        self,
        session_id: str,
        call_id: str,
        generation: int,
        url: str,
        headers: dict[str, str],
        sideband: Sideband,
        on_actions: ActionHandler,
        on_host_event: HostEventHandler,
        on_sent: SentHandler | None = None,
    ) -> None:
        self.session_id = session_id
        self.call_id = call_id
        self.generation = generation
        self.sideband = sideband
        self._url = url
        self._headers = headers
        self._on_actions = on_actions
        self._on_host_event = on_host_event
        self._on_sent = on_sent
        self._connection: ClientConnection | None = None
        # Set once the socket is over (closed, or never opened): its controls have nowhere to go.
        self._over = False
        self._outbox: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._sent: set[str] = set()
        self._sent_order: deque[str] = deque()
        self.closing = False
        self.task: asyncio.Task[None] | None = None
        # Its spans while it is open (None when tracing is off).
        self.trace: CallTrace | None = None
        # How its wing's spans read turns off its events (the composition root chooses).
        self.trace_kind: type[CallTrace] = CallTrace
        # The model its provider's session talks to (what its spans name).
        self.model = ""
        # The route its phone call came in on ("" for any other call), for the metrics.
        self.route_id = ""

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
            # 404: the provider has no such call (any more); 403, 5xx, a refused connection are
            # a sideband lost, tried again.
            gone = isinstance(error, InvalidStatus) and error.response.status_code == 404
            self._closed(SidebandClosed(code=None, reason=f"open failed: {error}"[:200], call_gone=gone))
            return
        self._connection = connection
        loop = asyncio.get_running_loop()
        self._writer = loop.create_task(self._write(connection), name=f"sideband-writer-{self.session_id}")
        ticker = (
            loop.create_task(self._tick(self.sideband.tick_every_s), name=f"sideband-ticks-{self.session_id}")
            if self.sideband.tick_every_s is not None
            else None
        )
        # Numbered before any provider frame, so the log says "connected" first.
        self._on_host_event(self, SidebandConnected(call_id=self.call_id))
        try:
            async for frame in connection:
                received_at = time.time()
                try:
                    self._on_actions(self, self.sideband.receive(frame, received_at, time.monotonic()))
                except Exception:  # one frame's failure must not end the call's socket
                    logger.exception("frame handling failed on %s", self.session_id)
        except ConnectionClosed:
            pass
        finally:
            self._writer.cancel()
            if ticker is not None:
                ticker.cancel()
            self._closed(
                SidebandClosed(
                    code=connection.close_code,
                    reason=(connection.close_reason or "")[:200],
                    by_host=self.closing,
                )
            )

    def _closed(self, closed: SidebandClosed) -> None:
        self._over = True
        # What the sideband still holds (the last words it heard) is logged before its close.
        try:
            self._on_actions(self, self.sideband.close(time.time()))
        except Exception:
            logger.exception("closing the sideband's protocol failed on %s", self.session_id)
        self._on_host_event(self, closed)

    async def _tick(self, every_s: float) -> None:
        """While the sideband is open, let its protocol act on the time passing (a quiet line
        sends no frame to act on)."""
        while True:
            await asyncio.sleep(every_s)
            try:
                self._on_actions(self, self.sideband.tick(time.time()))
            except Exception:
                logger.exception("a tick failed on %s", self.session_id)

    def playback(self, now: float) -> dict[str, Any] | None:
        """What the caller is hearing now (`now` monotonic), as the sideband's protocol saw it."""
        return self.sideband.playback(now)

    def send(self, control_id: str, control: dict[str, Any]) -> bool:
        """Queue a control for the writer, once per id; False if it was queued before or the
        socket is over (a control for a closed sideband has nowhere to go). A control that comes
        while the socket is still opening waits for it: the session asks again only for what it
        asked of an earlier generation's sideband (pipeline.realtime.dialect.reconnected), so
        one of this generation's must not be dropped."""
        if control_id in self._sent or self._over or self.closing:
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


class ActionCarrier:
    """Carries out what a socket's `Sideband` answers: durable events numbered and queued, bad
    frames recorded as incidents, the transcript's words to the people watching the call, and a
    caller's wait for an answer to `waited` (the heard-latency metric), in seconds by provider."""

    def __init__(
        self, sink: EventSink, watchers: WatchHub, waited: Callable[[str, float], None] | None = None
    ) -> None:
        self._sink = sink
        self._watchers = watchers
        self._waited = waited

    def __call__(self, socket: SidebandSocket, actions: Sequence[Action]) -> None:
        for action in actions:
            if isinstance(action, Submit):
                self._sink.submit_event(
                    socket.session_id,
                    socket.generation,
                    action.event,
                    action.received_at,
                    traceparent=None if socket.trace is None else socket.trace.event(action.event),
                )
            elif isinstance(action, Delta):
                self._watchers.delta(socket.session_id, action.role, action.item_id, action.text)
            elif isinstance(action, Final):
                self._watchers.final(socket.session_id, action.role, action.item_id, action.text)
            elif isinstance(action, Waited):
                if self._waited is not None:
                    self._waited(action.provider, action.wait_ms / 1000)
            else:
                logger.warning("bad frame on %s: %s", socket.session_id, action.summary)
                self._sink.submit_incident(socket.session_id, action.code, action.summary, action.context)
