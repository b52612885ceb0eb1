"""`ControlConsumer`: the thread that takes this gateway's control batches off its Redis list.

Workers push each transaction's batch onto the owning gateway's list (`workers.emit`). One round
trip takes everything waiting: a `BLPOP` (which blocks while the list is empty) pipelined with an
`LPOP` of up to `BATCHES_PER_TAKE - 1` more, which Redis runs the moment the `BLPOP` returns. The
whole take is handed to the event loop in one call, so a burst of batches costs one wake-up of
the loop, not one each.

Batches are taken without acknowledgement: a gateway that dies holding some has lost its
sockets too, and the calls' new owner re-attaches them (a batch only ever concerns this
gateway's sockets and waiting API requests).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import redis

from gateway.redis_clients import redis_client

logger = logging.getLogger(__name__)

# One take carries at most this many batches (a burst larger than this is taken in a few).
BATCHES_PER_TAKE = 256
# An idle take returns after this, so the thread notices the gateway stopping.
IDLE_TAKE_S = 1.0
# After a failed take (Redis restarting), the consumer waits this long before the next.
RECONNECT_AFTER_S = 0.5

Deliver = Callable[[list[bytes]], None]


class ControlConsumer:
    """Takes batches off one control list and hands each take to `deliver` on the event loop."""

    def __init__(self, redis_url: str, key: str, loop: asyncio.AbstractEventLoop, deliver: Deliver) -> None:
        self._client = redis_client(redis_url)
        self._key = key
        self._loop = loop
        self._deliver = deliver
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="control-consumer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping.set()
        self._thread.join(timeout_s)
        self._client.close()

    def _run(self) -> None:
        # It outlives connection failures (a Redis restart), reconnecting until the gateway stops.
        while not self._stopping.is_set():
            try:
                taken = self.take()
            except redis.RedisError as error:
                logger.warning("control list %s unreachable (%r); taking again shortly", self._key, error)
                self._stopping.wait(RECONNECT_AFTER_S)
                continue
            if taken:
                try:
                    self._loop.call_soon_threadsafe(self._deliver, taken)
                except RuntimeError:  # the loop closed: the gateway is stopping
                    return

    def take(self) -> list[bytes]:
        """Whatever is waiting, after blocking up to IDLE_TAKE_S for the first batch."""
        with self._client.pipeline(transaction=False) as pipe:
            pipe.blpop([self._key], timeout=IDLE_TAKE_S)
            pipe.lpop(self._key, BATCHES_PER_TAKE - 1)
            first, rest = pipe.execute()
        if first is None:
            return []
        return [first[1], *(rest or [])]
