"""What the people watching a call see: transcript deltas and finals fanned out to the
WebSocket listeners of a session, and the call log's entries as they are written (`log.entry`,
the same as `GET /log` returns).

They are a projection for people watching the call; the durable transcript is written by the
workers from the final events. Each delta goes out as it came (a listener appends them); the
final of an item carries its whole text once. Re-sending the accumulated text with every delta
cost 300 listeners of one call 1.32 MB each for 11,756 characters spoken.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from pipeline.limits import MAXIMUM_WATCH_TRANSCRIPT_BYTES

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


async def _until_disconnected(websocket: WebSocket) -> None:
    """Read (and ignore) what a listener sends, until it disconnects."""
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
    except (WebSocketDisconnect, RuntimeError):
        return
