"""What the people watching a call see: transcript deltas and finals fanned out to the
WebSocket listeners of a session, and the call log's entries as they are written (`log.entry`,
the same as `GET /log` returns).

They are a projection for people watching the call; the durable transcript is written by the
workers from the final events. Each delta goes out as it came (a listener appends them); the
final of an item carries its whole text once. Re-sending the accumulated text with every delta
cost 300 listeners of one call 1.32 MB each for 11,756 characters spoken.

`WatchHub` fans out what it is given; `WatchedSessions` feeds it the rest of each watched
session's story: its call log, read from the workers while anyone listens, and its end, told by
the workers' `CloseCall` for a call held here and noticed by asking for one held elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Container
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from gateway.rpc import WorkerRpc
from pipeline.call.limits import MAXIMUM_WATCH_TRANSCRIPT_BYTES
from pipeline.session.state import TERMINAL_PHASES

logger = logging.getLogger(__name__)

# A listener that cannot keep up loses messages rather than slowing the call.
SUBSCRIBER_QUEUE_MESSAGES = 1_000
# Sessions whose end was announced here, remembered for a listener that subscribes just after
# (its socket accepted, its session looked up as live, then the end carried out before it
# joined): far more than end within one lookup of each other.
REMEMBERED_ENDS = 1_024

# Close codes a listener can act on (4000-4999 are the application's own, RFC 6455 §7.4.2).
CLOSE_SESSION_OVER = 1000
CLOSE_UNKNOWN_SESSION = 4404
CLOSE_SESSION_ENDED = 4410

# A listener of a session this gateway holds no sideband for hears of its end by asking.
WATCH_STATUS_CHECK_S = 5.0
# A followed call log is read again at least this often (and at once after each batch of the
# session's controls that this gateway carries out).
LOG_FOLLOW_S = 2.0
LOG_READ_GAP_S = 0.2

_TERMINAL_STATUSES = frozenset(str(phase) for phase in TERMINAL_PHASES)


class WatchHub:
    def __init__(self) -> None:
        self._subscribers: dict[str, set[asyncio.Queue[str]]] = {}
        # The call log entries sent so far per session: a listener who joins later gets them
        # first, so every listener sees the whole story in order.
        self._log: dict[str, list[str]] = {}
        # Bytes of transcript sent so far per (session, item): the bound, without the text.
        self._sent_bytes: dict[tuple[str, str], int] = {}
        # The `session.closed` of each session whose end was announced, newest last.
        self._ended: OrderedDict[str, str] = OrderedDict()

    def delta(self, session_id: str, role: str, item_id: str, delta: str) -> None:
        """Fan one transcript delta out, while the item's live text stays within its bound (what
        is counted is what listeners were sent: with nobody listening, nothing is)."""
        if not self._subscribers.get(session_id):
            return
        key = (session_id, item_id)
        size = self._sent_bytes.get(key, 0) + len(delta.encode(errors="replace"))
        if size > MAXIMUM_WATCH_TRANSCRIPT_BYTES:
            return
        self._sent_bytes[key] = size
        self.publish(
            session_id, {"type": "transcript.delta", "role": role, "item_id": item_id, "delta": delta}
        )

    def final(self, session_id: str, role: str, item_id: str, text: str) -> None:
        """An item's whole text, once."""
        self._sent_bytes.pop((session_id, item_id), None)
        self.publish(session_id, {"type": "transcript.final", "role": role, "item_id": item_id, "text": text})

    def log_entry(self, session_id: str, entry: dict[str, Any]) -> None:
        """One call log entry ({seq, at, kind, data}), to every listener now and later."""
        encoded = json.dumps({"type": "log.entry", **entry})
        self._log.setdefault(session_id, []).append(encoded)
        self._send(session_id, encoded)

    def logged(self, session_id: str) -> int:
        """How many call log entries were sent for the session (the seq of the last)."""
        return len(self._log.get(session_id, ()))

    def publish(self, session_id: str, message: dict[str, Any]) -> None:
        # Most deltas of most calls have nobody listening: they are not encoded for nobody.
        if self._subscribers.get(session_id):
            self._send(session_id, json.dumps(message))

    def _send(self, session_id: str, encoded: str) -> None:
        subscribers = self._subscribers.get(session_id)
        if not subscribers:
            return
        for queue in subscribers:
            if queue.qsize() < SUBSCRIBER_QUEUE_MESSAGES:
                queue.put_nowait(encoded)

    def close(self, session_id: str, reason: str) -> None:
        """The session is over: listeners get `session.closed`, then their sockets close; one
        who joins later gets it at once."""
        closed = json.dumps({"type": "session.closed", "reason": reason})
        self._send(session_id, closed)
        self._ended[session_id] = closed
        self._ended.move_to_end(session_id)
        while len(self._ended) > REMEMBERED_ENDS:
            self._ended.popitem(last=False)
        self.forget(session_id)

    def has_ended(self, session_id: str) -> bool:
        """Whether the session's end was announced here (recently)."""
        return session_id in self._ended

    def forget(self, session_id: str) -> None:
        self._log.pop(session_id, None)
        for key in [key for key in self._sent_bytes if key[0] == session_id]:
            del self._sent_bytes[key]

    def listeners(self, session_id: str) -> int:
        return len(self._subscribers.get(session_id, ()))

    def sessions_listened_to(self) -> list[str]:
        return list(self._subscribers)

    async def serve(self, session_id: str, websocket: WebSocket) -> None:
        """Stream the session's live messages to one accepted listener until the session is
        over or the listener leaves."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        for entry in self._log.get(session_id, ())[-SUBSCRIBER_QUEUE_MESSAGES:]:
            queue.put_nowait(entry)
        if session_id in self._ended:
            queue.put_nowait(self._ended[session_id])
        self._subscribers.setdefault(session_id, set()).add(queue)
        leaving = asyncio.ensure_future(_until_disconnected(websocket))
        try:
            while True:
                getting = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getting, leaving}, return_when=asyncio.FIRST_COMPLETED)
                if leaving in done:
                    getting.cancel()
                    return
                message = getting.result()
                await websocket.send_text(message)
                if json.loads(message).get("type") == "session.closed":
                    await websocket.close(CLOSE_SESSION_OVER)
                    return
        except (WebSocketDisconnect, RuntimeError, OSError):
            # The listener went away mid-send (RuntimeError: the socket is already closed).
            return
        finally:
            leaving.cancel()
            subscribers = self._subscribers.get(session_id)
            if subscribers is not None:
                subscribers.discard(queue)
                if not subscribers:
                    del self._subscribers[session_id]


class WatchedSessions:
    """The sessions people watch through this gateway: each listener's stream of the hub's
    messages, the session's call log followed while anyone listens, and its end announced.
    What it needs of the gateway is the workers' answers (`rpc`) and which sessions' sidebands
    the gateway holds (`held`: their end comes as a `CloseCall`, not by asking)."""

    def __init__(self, hub: WatchHub, rpc: WorkerRpc, held: Container[str]) -> None:
        self._hub = hub
        self._rpc = rpc
        self._held = held
        self._end_watchers: dict[str, asyncio.Task[None]] = {}
        self._log_followers: dict[str, asyncio.Task[None]] = {}
        self._log_pokes: dict[str, asyncio.Event] = {}
        self._log_reads: dict[str, asyncio.Lock] = {}

    def is_watched(self, session_id: str) -> bool:
        """Whether anyone listens to the session now."""
        return bool(self._hub.listeners(session_id))

    def control_sent(self, session_id: str, control: dict[str, Any]) -> None:
        """A control the session's sideband sent its provider, to its listeners."""
        self._hub.publish(session_id, {"type": "control", "control": control})

    def log_written(self, session_id: str) -> None:
        """A batch of the session's controls was carried out here: its followed call log (if
        any) is read now rather than at the next poll."""
        poke = self._log_pokes.get(session_id)
        if poke is not None:
            poke.set()

    async def announce_end(self, session_id: str, reason: str) -> None:
        """The session is over (a `CloseCall` carried out here): its listeners get the end's
        entries of the call log, then `session.closed`."""
        if self._hub.listeners(session_id):
            # The end's entries go out first: the read waits for the transaction that published
            # the CloseCall to commit (models.records).
            await self._send_new_entries(session_id)
        self._hub.close(session_id, reason)

    async def listen(self, session_id: str, websocket: WebSocket) -> None:
        """Stream a session's live messages to an accepted listener. A session whose sideband
        is held elsewhere has its end noticed by asking, so no listener is held forever."""
        if self._hub.has_ended(session_id):
            # It ended between the listener's lookup and now: the whole story, then the end.
            await self._send_new_entries(session_id)
            await self._hub.serve(session_id, websocket)
            self._release_log(session_id)
            return
        # A task that has returned is replaced, not waited on: its done callback (which drops
        # it from the map) runs a loop turn later, and a listener joining in between would
        # otherwise get no follower at all.
        watcher = self._end_watchers.get(session_id)
        if watcher is None or watcher.done():
            _track(self._end_watchers, session_id, self._watch_for_end(session_id))
        follower = self._log_followers.get(session_id)
        if follower is None or follower.done():
            _track(self._log_followers, session_id, self._follow_log(session_id))
        await self._hub.serve(session_id, websocket)

    def _release_log(self, session_id: str) -> None:
        """Once nobody listens and no follower reads, nothing of the session's call log stays
        here: the copy sent so far (a later listener's follower reads it again from the start),
        its read lock and its poke. Without this, a call held by another gateway left its whole
        copied log here when its listeners left, and each listener who joined an ended session
        left a lock."""
        if self._hub.listeners(session_id):
            return
        follower = self._log_followers.get(session_id)
        if follower is not None and not follower.done() and follower is not asyncio.current_task():
            return
        self._hub.forget(session_id)
        self._log_pokes.pop(session_id, None)
        self._log_reads.pop(session_id, None)

    async def _follow_log(self, session_id: str) -> None:
        """While anyone listens, send the call log's new entries as they are written: read
        after each batch of the session's controls carried out here, and every LOG_FOLLOW_S
        (the call may be held by another gateway)."""
        poke = self._log_pokes.setdefault(session_id, asyncio.Event())
        try:
            while True:
                await self._send_new_entries(session_id)
                # Each read projects the whole log: a busy call is read a few times a second
                # at most, however many batches it gets.
                await asyncio.sleep(LOG_READ_GAP_S)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(poke.wait(), LOG_FOLLOW_S)
                poke.clear()
                if not self._hub.listeners(session_id):
                    return
        finally:
            self._release_log(session_id)

    async def _send_new_entries(self, session_id: str) -> None:
        """The entries after the last one sent, to the session's listeners (one read at a time,
        so none is sent twice)."""
        async with self._log_reads.setdefault(session_id, asyncio.Lock()):
            after = self._hub.logged(session_id)
            status, body = await self._rpc.call("session_call_log", session_id=session_id, after=after)
            if status != 200:
                return  # the next poke or poll reads them
            for entry in body["entries"]:
                if entry["seq"] == self._hub.logged(session_id) + 1:
                    self._hub.log_entry(session_id, entry)

    async def _watch_for_end(self, session_id: str) -> None:
        while True:
            await asyncio.sleep(WATCH_STATUS_CHECK_S)
            if not self._hub.listeners(session_id):
                return
            if session_id in self._held:
                continue  # its CloseCall comes here
            status, record = await self._rpc.call("describe_session", session_id=session_id)
            if status == 404 or (status == 200 and record["status"] in _TERMINAL_STATUSES):
                await self._send_new_entries(session_id)
                self._hub.close(session_id, str(record.get("end_reason") or "session_over"))
                return


def _track(tasks: dict[str, asyncio.Task[None]], session_id: str, work: Any) -> None:
    """Run `work` as the session's task in `tasks`, dropped from it when done (only if it is
    still the one there: a replacement may have taken its place)."""
    task = asyncio.get_running_loop().create_task(work)
    tasks[session_id] = task

    def drop(done: asyncio.Task[None]) -> None:
        if tasks.get(session_id) is done:
            del tasks[session_id]

    task.add_done_callback(drop)


async def _until_disconnected(websocket: WebSocket) -> None:
    """Read (and ignore) what a listener sends, until it disconnects."""
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
    except (WebSocketDisconnect, RuntimeError):
        return
