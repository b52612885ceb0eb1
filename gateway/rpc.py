"""Requests to the workers and their replies: an API call becomes an admission-queue message
carrying a request id, and the worker that handles it publishes a `Reply` to this gateway's
control queue, which resolves the waiting future."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from gateway.sink import EventSink
from gateway.web import error_body
from pipeline.call.limits import API_REPLY_TIMEOUT_MS
from pipeline.platform.envelope import Reply

Answer = tuple[int, dict[str, Any]]


class WorkerRpc:
    def __init__(self, sink: EventSink, gateway_id: str) -> None:
        self._sink = sink
        self._gateway_id = gateway_id
        self._pending: dict[str, asyncio.Future[Answer]] = {}

    async def call(self, actor_name: str, timeout_ms: int = API_REPLY_TIMEOUT_MS, **kwargs: Any) -> Answer:
        """Ask an admission actor; a 503 answer when no worker replied in time."""
        request_id = uuid.uuid4().hex
        reply = self.expect(request_id)
        self._sink.submit_request(
            actor_name,
            reply_timeout_ms=timeout_ms,
            request_id=request_id,
            gateway_id=self._gateway_id,
            **kwargs,
        )
        answer = await self.wait(request_id, reply, timeout_ms)
        if answer is None:
            return 503, error_body("reply_timeout", f"no worker answered {actor_name} in time")
        return answer

    def expect(self, request_id: str) -> asyncio.Future[Answer]:
        """A future for the reply to a request about to be sent another way (as an event)."""
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        return future

    async def wait(self, request_id: str, future: asyncio.Future[Answer], timeout_ms: int) -> Answer | None:
        """The reply, or None when it did not come in time."""
        try:
            return await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            return None
        finally:
            self._pending.pop(request_id, None)

    def resolve(self, reply: Reply) -> None:
        future = self._pending.pop(reply.request_id, None)
        if future is not None and not future.done():
            future.set_result((reply.status, reply.body))
