"""Whether a worker reaches Redis, said once when it goes away and once when it is back.

Dramatiq's consumer threads log CRITICAL "Consumer encountered a connection error" and INFO
"Restarting consumer in 3.00 seconds" on every retry, for every queue, for as long as Redis is
away: a line a second or more, for ever, saying nothing the first did not. The worker instead
watches Redis itself and logs the change of state; `ConsumerRetries` drops those per-retry lines.
The consumers still retry on their own schedule and resume when Redis answers.
"""

from __future__ import annotations

import logging
import threading

import redis

from workers.redis_clients import redis_client

logger = logging.getLogger(__name__)

# Redis is pinged this often; an outage shorter than this may go unsaid (the consumers retry
# through it all the same).
WATCH_INTERVAL_S = 1.0
# A ping to a Redis that is there answers in well under this.
PING_TIMEOUT_S = 1.0

# The consumer threads' loggers (`dramatiq.worker.ConsumerThread(<queue>)`) and their per-retry lines.
CONSUMER_LOGGER = "dramatiq.worker.ConsumerThread("
RETRY_LINES = ("Consumer encountered a connection error", "Restarting consumer in")


class ConsumerRetries(logging.Filter):
    """Drops Dramatiq's per-retry lines of a consumer that lost Redis (the watch says it once)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith(CONSUMER_LOGGER) and str(record.msg).startswith(RETRY_LINES))


class RedisWatch(threading.Thread):
    """Pings Redis every `WATCH_INTERVAL_S` and logs each change: unreachable (once, an error
    naming SWITCHBOARD_REDIS_URL and why) and reachable again (once)."""

    def __init__(self, redis_url: str, *, interval_s: float = WATCH_INTERVAL_S) -> None:
        super().__init__(name="redis-watch", daemon=True)
        self._client = redis_client(
            redis_url, socket_timeout=PING_TIMEOUT_S, socket_connect_timeout=PING_TIMEOUT_S, retry=None
        )
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self.is_reachable = True

    def run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            try:
                self._client.ping()
            except (redis.RedisError, OSError) as error:
                if self.is_reachable:
                    logger.error(
                        "redis unreachable (SWITCHBOARD_REDIS_URL): %s; consuming waits until it answers",
                        str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__,
                    )
                self.is_reachable = False
                continue
            if not self.is_reachable:
                logger.warning("redis reachable again; consuming resumes")
            self.is_reachable = True

    def stop(self) -> None:
        """Stop watching (within one interval) and close the connection."""
        self._stopped.set()
        self.join()
        self._client.close()
