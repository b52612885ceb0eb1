"""Dead letters: the messages Dramatiq gave up on, listed, shown, replayed and purged.

Dramatiq has no API for its dead-letter queues. On Redis a queue's dead letters are a sorted
set `<namespace>:<queue>.XQ` (message id → the time it was dead-lettered, in ms) beside a hash
`<namespace>:<queue>.XQ.msgs` (message id → the encoded message); they expire after the
broker's dead-message TTL (7 days).

Replay enqueues the message as new — its per-attempt options stripped, its timestamp renewed,
its message id kept — and then removes the dead letter. A crash between the two replays it
twice, which changes nothing: a numbered event applies once per seq, and a replayed event of
an ended session only completes its record (its transcript lands; nothing is spoken).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from pipeline.names import ADMISSION_QUEUE, COMPACTION_QUEUE, TOOL_QUEUE, TOOL_RUNS_QUEUE, TRANSCRIPT_QUEUE

QUEUES = (ADMISSION_QUEUE, TRANSCRIPT_QUEUE, TOOL_QUEUE, COMPACTION_QUEUE, TOOL_RUNS_QUEUE)

# Options that describe one attempt, not the message: a replay starts without them.
_PER_ATTEMPT_OPTIONS = (
    "redis_message_id",
    "eta",
    "retries",
    "traceback",
    "requeue_timestamp",
    "_sentry_headers",
)


@dataclass(frozen=True)
class DeadLetter:
    message: dramatiq.Message[Any]
    queue: str
    dead_since_ms: int
    # The key of the dead letter in Redis (the last attempt's redis_message_id); `id` is the
    # Dramatiq message id, the same across every retry and the replay.
    redis_id: str

    @property
    def id(self) -> str:
        return self.message.message_id

    @property
    def session_id(self) -> str | None:
        kwargs = self.message.kwargs
        if isinstance(kwargs.get("session_id"), str):
            return str(kwargs["session_id"])
        envelope = kwargs.get("envelope")
        if isinstance(envelope, dict) and isinstance(envelope.get("session_id"), str):
            return str(envelope["session_id"])
        return None

    @property
    def seq(self) -> int | None:
        envelope = self.message.kwargs.get("envelope")
        return envelope.get("seq") if isinstance(envelope, dict) else None

    @property
    def error(self) -> str:
        """The exception that killed the last attempt: the first unindented line after the
        traceback's last frame (a database error adds its own lines after it)."""
        lines = str(self.message.options.get("traceback") or "").splitlines()
        frames = [index for index, line in enumerate(lines) if line.startswith("  File ")]
        after = lines[frames[-1] + 1 :] if frames else lines
        for line in after:
            if line.strip() and not line[0].isspace():
                return line.strip()
        return "(no traceback: refused without retry, or skipped)"

    def summary(self, now_ms: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "queue": self.queue,
            "actor": self.message.actor_name,
            "session_id": self.session_id,
            "seq": self.seq,
            "age_s": round((now_ms - self.dead_since_ms) / 1000, 1),
            "retries": self.message.options.get("retries", 0),
            "error": self.error,
        }

    def detail(self, now_ms: int) -> dict[str, Any]:
        return {
            **self.summary(now_ms),
            "kwargs": self.message.kwargs,
            "args": list(self.message.args),
            "sent_at_ms": self.message.message_timestamp,
            "traceback": self.message.options.get("traceback"),
        }


class DeadLetters:
    """The dead-letter queues of one broker namespace."""

    def __init__(self, broker: RedisBroker, queues: tuple[str, ...] = QUEUES) -> None:
        self._broker = broker
        self._redis = broker.client
        self._namespace = broker.namespace
        self._queues = queues

    def list(self) -> list[DeadLetter]:
        """Every dead letter, oldest first."""
        letters = []
        for queue in self._queues:
            entries: Any = self._redis.zrange(self._key(queue), 0, -1, withscores=True)
            for raw_id, score in entries:
                message_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
                letter = self._load(queue, message_id, int(score))
                if letter is not None:
                    letters.append(letter)
        return sorted(letters, key=lambda letter: letter.dead_since_ms)

    def find(self, message_id: str) -> DeadLetter | None:
        """The dead letter with this id, or with an id starting with it (unambiguously)."""
        matches = [
            letter for letter in self.list() if letter.id == message_id or letter.id.startswith(message_id)
        ]
        exact = [letter for letter in matches if letter.id == message_id]
        if exact:
            return exact[0]
        return matches[0] if len(matches) == 1 else None

    def replay(self, letter: DeadLetter) -> bool:
        """Enqueue the message again and remove the dead letter; False if it was no longer
        there (replayed or purged meanwhile)."""
        if self._redis.hget(self._messages_key(letter.queue), letter.redis_id) is None:
            return False
        options = {k: v for k, v in letter.message.options.items() if k not in _PER_ATTEMPT_OPTIONS}
        # Message.copy merges options; replace() sets them. A new timestamp keeps AgeLimit from
        # skipping it; the message id stays, so logs tie the replay to the dead letter.
        fresh = dataclasses.replace(
            letter.message,
            queue_name=letter.queue,
            options=options,
            message_timestamp=int(time.time() * 1000),
        )
        self._broker.enqueue(fresh)
        self._remove(letter)
        return True

    def purge(self, letter: DeadLetter) -> bool:
        return self._remove(letter)

    def _remove(self, letter: DeadLetter) -> bool:
        pipeline = self._redis.pipeline()
        pipeline.zrem(self._key(letter.queue), letter.redis_id)
        pipeline.hdel(self._messages_key(letter.queue), letter.redis_id)
        removed, _ = pipeline.execute()
        return bool(removed)

    def _load(self, queue: str, redis_id: str, dead_since_ms: int) -> DeadLetter | None:
        encoded = self._redis.hget(self._messages_key(queue), redis_id)
        if not isinstance(encoded, bytes):
            return None  # expired between the two reads
        return DeadLetter(dramatiq.Message.decode(encoded), queue, dead_since_ms, redis_id)

    def _key(self, queue: str) -> str:
        return f"{self._namespace}:{queue}.XQ"

    def _messages_key(self, queue: str) -> str:
        return f"{self._key(queue)}.msgs"
