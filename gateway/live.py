"""Live transcripts: deltas accumulated per item and fanned out to WebSocket subscribers.

They are a projection for people watching the call; the durable transcript is written by the
workers from the final events.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from pipeline.limits import MAXIMUM_LIVE_TRANSCRIPT_BYTES

logger = logging.getLogger(__name__)

# A subscriber that cannot keep up loses messages rather than slowing the call.
SUBSCRIBER_QUEUE_MESSAGES = 1_000


class LiveHub:
    def __init__(self) -> None:
        self._subscribers: dict[str, set[asyncio.Queue[str]]] = {}
        self._texts: dict[tuple[str, str], str] = {}

    def delta(self, session_id: str, role: str, item_id: str, delta: str) -> None:
        """Accumulate one transcript delta (bounded per item) and fan it out."""
        key = (session_id, item_id)
        text = self._texts.get(key, "")
        if len(text.encode()) + len(delta.encode()) > MAXIMUM_LIVE_TRANSCRIPT_BYTES:
            return
        text += delta
        self._texts[key] = text
        self.publish(session_id, {"type": "transcript.delta", "role": role, "item_id": item_id, "text": text})

    def final(self, session_id: str, role: str, item_id: str, text: str) -> None:
        self._texts.pop((session_id, item_id), None)
        self.publish(session_id, {"type": "transcript.final", "role": role, "item_id": item_id, "text": text})

    def publish(self, session_id: str, message: dict[str, Any]) -> None:
        subscribers = self._subscribers.get(session_id)
        if not subscribers:
            return
        encoded = json.dumps(message)
        for queue in subscribers:
            if queue.qsize() < SUBSCRIBER_QUEUE_MESSAGES:
                queue.put_nowait(encoded)

    def forget(self, session_id: str) -> None:
        for key in [key for key in self._texts if key[0] == session_id]:
            del self._texts[key]

    async def serve(self, session_id: str, connection: ServerConnection) -> None:
        """Stream the session's live messages to one subscriber until either side closes."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._subscribers.setdefault(session_id, set()).add(queue)
        try:
            while True:
                message = await queue.get()
                await connection.send(message)
                if json.loads(message).get("type") == "session.closed":
                    return
        except ConnectionClosed:
            pass
        finally:
            self._subscribers[session_id].discard(queue)
            if not self._subscribers[session_id]:
                del self._subscribers[session_id]
