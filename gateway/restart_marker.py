"""`RestartMarker`: a key the event sink writes in Redis to learn that Redis lost its writes.

Redis here keeps nothing on disk: when the marker is gone, Redis restarted empty. A replica that
Sentinel promotes has the marker (it copied it) but not the master's writes of its last moment
(replication is asynchronous), so the marker also notes which server answers (its run id): when
another one does, the writes are as good as lost. The marker expires GATEWAY_MARKER_TTL_SECONDS
after the gateway last renewed it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import redis

from pipeline.call.limits import GATEWAY_MARKER_TTL_SECONDS

# How often the sink checks that Redis still has its marker while it holds events (i.e. did not
# restart empty); holding none, it only refreshes the marker's expiry this often.
MARKER_CHECK_S = 0.25
MARKER_REFRESH_S = 10.0


@dataclass(frozen=True, slots=True)
class Lost:
    """What a look at the marker found when Redis may have lost this gateway's writes: the run id
    of the server that answered, and whether the marker was there (so another server answers: a
    failover) or another marker was (a previous process's of this gateway id)."""

    run_id: str | None
    failover: bool
    found_other: bool


class RestartMarker:
    """The marker of one gateway, renewed at each look."""

    def __init__(self, client: redis.Redis, namespace: str, gateway_id: str) -> None:
        self._redis = client
        self._key = f"{namespace}:gateway-marker:{gateway_id}"
        self.token = uuid.uuid4().hex
        # When the marker's expiry is next refreshed, if no held event has it looked at sooner,
        # and whether the last look failed (said once, not at every look).
        self.refresh_due = 0.0
        self.failing = False
        # Until the first renewal, a marker found is a previous process's of this gateway id (it
        # lives a minute after its gateway stopped), not a sign that Redis lost anything.
        self._renewed = False
        # The run id of the Redis server that answered the last look: another one answering
        # means a failover (or a restart), whose last moment's writes may be gone.
        self._server_run_id: str | None = None

    def look(self) -> Lost | None:
        """Read the marker and the server's run id, and renew the marker's expiry (one round
        trip); None when Redis still has everything this gateway wrote."""
        with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(self._key)
            pipe.expire(self._key, GATEWAY_MARKER_TTL_SECONDS)
            pipe.info("server")
            found, _, server = pipe.execute()
        self.refresh_due = time.monotonic() + MARKER_REFRESH_S
        run_id = server.get("run_id")
        moved = self._server_run_id not in (None, run_id)
        ours = found == self.token.encode()
        if ours and not moved:
            self._server_run_id = run_id
            return None
        return Lost(run_id, failover=ours, found_other=found is not None and not ours)

    def renew(self, lost: Lost) -> bool:
        """Write the marker again, once what Redis lost is enqueued again (a failure before
        leaves it missing, so the next look re-sends again); answers whether it is the first
        renewal of this process."""
        self._redis.set(self._key, self.token, ex=GATEWAY_MARKER_TTL_SECONDS)
        self._server_run_id = lost.run_id
        first, self._renewed = not self._renewed, True
        return first
