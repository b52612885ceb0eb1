"""Dead letters: the messages the workers gave up on, kept in PostgreSQL, listed, shown,
replayed and purged.

A message that fails for good is written to the `dead_letters` table (its body as the queue held
it, with the last attempt's traceback; its actor, session, seq, error and retries beside it)
before it leaves its Redis queue: the row is committed, then the message is acknowledged. If
PostgreSQL cannot take it, the message stays in Redis and the worker tries again until it can;
a worker killed between the two keeps it twice, which the message id makes one row. So a Redis
restart or flush (Redis keeps nothing on disk here) loses no dead letter. Letters left in
Dramatiq's Redis dead-letter sets by an older release (`<namespace>:<queue>.XQ` with its
`.msgs` hash) are moved into the table the first time the letters are read.

A dead letter whose body is not a message (a body the broker could not decode is kept as it
came, raw bytes and all) is listed and shown as corrupt with a safe preview of its bytes,
refused by replay, and purged like any other; one such letter never stops the others from being
listed, replayed or purged.

Replay enqueues the message as new — its per-attempt options stripped, its timestamp renewed,
its message id kept — while it holds the letter's row, and deletes the row in the same
transaction: two replays of one letter send it once, and a replay that cannot enqueue leaves the
letter. A replayed event of a session that ended meanwhile only completes its record (its
transcript lands; nothing is spoken); a numbered event applies once per seq.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.errors import ConnectionClosed, DecodeError

from models import dead_letters as rows
from models.db import is_connection_lost, reopen
from pipeline.call.errors import UnreplayableDeadLetter
from pipeline.platform.names import QUEUES, dead_letter_counts_key
from pipeline.platform.timestamps import rfc3339
from workers.liveness import takeover_refusal_now

# Options that describe one attempt, not the message: a replay starts without them.
_PER_ATTEMPT_OPTIONS = (
    "redis_message_id",
    "eta",
    "retries",
    "traceback",
    "requeue_timestamp",
    "_sentry_headers",
)

# A corrupt body is shown as text an operator can read and a terminal cannot misread: this
# much of it in a listing row, and this much in `show` (which also gives the exact bytes).
LIST_PREVIEW_BYTES = 48
SHOW_PREVIEW_BYTES = 65_536
# Why a body is not a message, cut to this; Dramatiq's own decode error repeats the whole body.
MAXIMUM_PROBLEM_CHARACTERS = 200


@dataclass(frozen=True)
class DeadLetter:
    message: dramatiq.Message[Any]
    queue: str
    dead_since_ms: int
    # The id it was stored under; `id` is the Dramatiq message id, the same across every retry
    # and the replay (and the one the table keeps it under).
    stored_id: str

    @property
    def id(self) -> str:
        return self.message.message_id

    @property
    def session_id(self) -> str | None:
        kwargs = self.message.kwargs
        if isinstance(kwargs.get("session_id"), str):
            return str(kwargs["session_id"])
        envelope = self._first_envelope()
        if envelope is not None and isinstance(envelope.get("session_id"), str):
            return str(envelope["session_id"])
        return None

    @property
    def seq(self) -> int | None:
        """The seq of the (first) event the message carries."""
        envelope = self._first_envelope()
        return envelope.get("seq") if envelope is not None else None

    def _first_envelope(self) -> dict[str, Any] | None:
        kwargs = self.message.kwargs
        envelope = kwargs.get("envelope")
        if isinstance(envelope, dict):
            return envelope
        envelopes = kwargs.get("envelopes")
        if isinstance(envelopes, list) and envelopes and isinstance(envelopes[0], dict):
            return envelopes[0]
        return None

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
            "corrupt": False,
        }

    def detail(self, now_ms: int) -> dict[str, Any]:
        return {
            **self.summary(now_ms),
            "kwargs": self.message.kwargs,
            "args": list(self.message.args),
            "sent_at": rfc3339(self.message.message_timestamp / 1000),
            "traceback": self.message.options.get("traceback"),
        }


@dataclass(frozen=True)
class CorruptDeadLetter:
    """A dead letter whose stored body is not a Dramatiq message: shown and purged, never replayed."""

    queue: str
    dead_since_ms: int
    # The Redis id it had on its queue: a body that is not a message has no message id.
    stored_id: str
    raw: bytes
    # Why the body is not a message, in one printable line.
    problem: str

    @property
    def id(self) -> str:
        # There is no Dramatiq message id to read; the Redis key is the only name it has.
        return self.stored_id

    @property
    def session_id(self) -> str | None:
        return None

    @property
    def error(self) -> str:
        return f"corrupt: {self.problem}"

    def summary(self, now_ms: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "queue": self.queue,
            "actor": None,
            "session_id": None,
            "seq": None,
            "age_s": round((now_ms - self.dead_since_ms) / 1000, 1),
            "retries": None,
            "error": self.error,
            "corrupt": True,
            "size_bytes": len(self.raw),
            "preview": printable(self.raw, LIST_PREVIEW_BYTES),
        }

    def detail(self, now_ms: int) -> dict[str, Any]:
        return {
            **self.summary(now_ms),
            "preview": printable(self.raw, SHOW_PREVIEW_BYTES),
            "raw_base64": base64.b64encode(self.raw).decode("ascii"),
        }


Letter = DeadLetter | CorruptDeadLetter


def printable(raw: bytes, maximum_bytes: int) -> str:
    """The first ``maximum_bytes`` of ``raw`` as one line of printable text: UTF-8 where it is
    valid, escapes (``\\xff``, ``\\n``, ``\\x1b``) for everything else, ``…`` if cut."""
    text = raw[:maximum_bytes].decode("utf-8", "backslashreplace")
    shown = "".join(
        character if character.isprintable() else character.encode("unicode_escape").decode("ascii")
        for character in text
    )
    return shown + "…" if len(raw) > maximum_bytes else shown


def undecodable_reason(error: DecodeError) -> str:
    """What made a body undecodable, in one bounded, printable line."""
    # Dramatiq wraps its encoder's DecodeError, whose message quotes the whole body, in
    # another; the exception underneath says what was wrong without it.
    cause: BaseException = error
    while isinstance(cause, DecodeError) and isinstance(cause.error, BaseException):
        cause = cause.error
    reason = f"{type(cause).__name__}: {cause}"
    return printable(reason.encode(), MAXIMUM_PROBLEM_CHARACTERS)


class DeadLetters:
    """The dead letters of one broker namespace."""

    def __init__(self, broker: RedisBroker, queues: tuple[str, ...] = QUEUES) -> None:
        self._broker = broker
        self._redis = broker.client
        self._namespace = broker.namespace
        self._queues = queues

    def list(self) -> list[Letter]:
        """Every dead letter, oldest first."""
        self._adopt_from_redis()
        return [
            letter_of(row.queue, row.id, row.body, int(row.dead_since.timestamp() * 1000))
            for row in rows.stored(self._namespace)
        ]

    def find(self, message_id: str) -> Letter | None:
        """The dead letter with this id, or with an id starting with it (unambiguously)."""
        matches = [
            letter for letter in self.list() if letter.id == message_id or letter.id.startswith(message_id)
        ]
        exact = [letter for letter in matches if letter.id == message_id]
        if exact:
            return exact[0]
        return matches[0] if len(matches) == 1 else None

    def replay(self, letter: Letter) -> bool:
        """Enqueue the message again and remove the dead letter; False if it was no longer
        there (replayed or purged meanwhile). A corrupt one is refused (UnreplayableDeadLetter)."""
        if isinstance(letter, CorruptDeadLetter):
            raise UnreplayableDeadLetter(
                f"dead letter {letter.id} on {letter.queue} is not a message ({letter.problem}),"
                " so it cannot be replayed; purge it"
            )
        options = {k: v for k, v in letter.message.options.items() if k not in _PER_ATTEMPT_OPTIONS}
        # Message.copy merges options; replace() sets them. A new timestamp keeps AgeLimit from
        # skipping it; the message id stays, so logs tie the replay to the dead letter.
        fresh = dataclasses.replace(
            letter.message,
            queue_name=letter.queue,
            options=options,
            message_timestamp=int(time.time() * 1000),
        )
        with rows.taking(self._namespace, letter.id) as there:
            if not there:
                return False
            self._broker.enqueue(fresh)
        publish_counts(self._redis, self._namespace)
        return True

    def purge(self, letter: Letter) -> bool:
        removed = rows.remove(self._namespace, letter.id)
        publish_counts(self._redis, self._namespace)
        return removed

    def outlook(self, letter: Letter, now_ms: int) -> str:
        """What replaying the letter would do now, in a sentence: a request that is no longer
        valid says so (a takeover of a gateway that is alive again is refused by the worker that
        runs it; an API request's caller stopped waiting long ago)."""
        if isinstance(letter, CorruptDeadLetter):
            return "nothing: it is not a message (purge it)"
        kwargs = letter.message.kwargs
        actor = letter.message.actor_name
        if actor in ("take_over", "take_over_session"):
            dead, new = str(kwargs.get("dead_gateway")), str(kwargs.get("gateway_id"))
            refusal = takeover_refusal_now(self._redis, self._namespace, dead, new)
            if refusal is not None:
                return f"nothing: the takeover will be refused ({refusal})"
            moved = "its unfinished sessions" if actor == "take_over" else f"session {letter.session_id}"
            return f"moves {moved} from gateway {kwargs.get('dead_gateway')} to {kwargs.get('gateway_id')}"
        effect = _REPLAY_EFFECTS.get(actor, "runs it again")
        if "request_id" in kwargs:
            waited_s = round((now_ms - letter.message.message_timestamp) / 1000)
            return (
                f"{effect}; it answered an API request {waited_s} s ago whose caller stopped waiting, "
                "so the answer goes nowhere"
            )
        return effect

    def _adopt_from_redis(self) -> None:
        """Move letters an older release left in Dramatiq's Redis dead-letter sets into the
        table (kept first, then removed from Redis: a crash between keeps them twice, as one)."""
        for queue in self._queues:
            key = f"{self._namespace}:{queue}.XQ"
            entries: Any = self._redis.zrange(key, 0, -1)
            for raw_id in entries:
                redis_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
                body = self._redis.hget(f"{key}.msgs", redis_id)
                if isinstance(body, bytes):
                    letter = letter_of(queue, redis_id, body, int(time.time() * 1000))
                    rows.keep(self._namespace, queue, letter.id, body, summary_of(letter))
                pipeline = self._redis.pipeline()
                pipeline.zrem(key, redis_id)
                pipeline.hdel(f"{key}.msgs", redis_id)
                pipeline.execute()


# The published counts outlive a worker that stopped publishing them by this much, no more.
COUNTS_TTL_S = 120


def publish_counts(client: Any, namespace: str) -> int:
    """Publish each queue's dead letters (counted in PostgreSQL) where the gateway's gauge reads
    them; answers the total. Run by a sweep every few seconds, and after every change here, so a
    Redis restart leaves the gauge unknown for one sweep at most, never wrong for good."""
    counted = rows.counts(namespace)
    key = dead_letter_counts_key(namespace)
    with client.pipeline(transaction=True) as pipe:
        pipe.delete(key)
        pipe.hset(key, mapping={queue: counted.get(queue, 0) for queue in QUEUES})
        pipe.expire(key, COUNTS_TTL_S)
        pipe.execute()
    return sum(counted.values())


def letter_of(queue: str, stored_id: str, body: bytes, dead_since_ms: int) -> Letter:
    """A stored body as a dead letter: the message it holds, or a corrupt one."""
    try:
        message = dramatiq.Message.decode(body)
    except DecodeError as error:
        return CorruptDeadLetter(queue, dead_since_ms, stored_id, body, undecodable_reason(error))
    problem = _unusable(message)
    if problem is not None:
        return CorruptDeadLetter(queue, dead_since_ms, stored_id, body, problem)
    return DeadLetter(message, queue, dead_since_ms, stored_id)


def summary_of(letter: Letter) -> rows.Summary:
    if isinstance(letter, CorruptDeadLetter):
        return rows.Summary(None, None, None, None, letter.error)
    seq = letter.seq
    retries = letter.message.options.get("retries")
    return rows.Summary(
        letter.message.actor_name,
        letter.session_id,
        seq if isinstance(seq, int) else None,
        retries if isinstance(retries, int) else None,
        letter.error,
    )


def keeper(namespace: str) -> Callable[[str, str, bytes], None]:
    """What the broker calls with each message it gives up on (queue, id, body) before the
    message leaves its queue: the row is committed, or this raises — `ConnectionClosed` when
    the database is away, so Dramatiq tries again until it is back, the message kept in Redis."""

    def keep(queue: str, stored_id: str, body: bytes) -> None:
        letter = letter_of(queue, stored_id, body, int(time.time() * 1000))
        try:
            rows.keep(namespace, queue, letter.id, body, summary_of(letter))
        except Exception as error:
            if not is_connection_lost(error):
                raise
            reopen()
            raise ConnectionClosed(error) from None

    return keep


# What a replay of each kind of message does, checked by the actor under the session's lock.
_REPLAY_EFFECTS = {
    "admission_event": "applies its event in the session's order if that seq is still owed (else nothing)",
    "transcript_event": "applies its event in the session's order if that seq is still owed (else nothing)",
    "tool_event": "applies its event in the session's order if that seq is still owed (else nothing)",
    "compaction_event": "applies its event in the session's order if that seq is still owed (else nothing)",
    "session_timer": "fires the timer if it is still pending (else nothing)",
    "run_tool": "runs the tool body unless its step has finished (else nothing)",
    "notify_app": "sends the webhook to the app again, with the same webhook-id (nothing once erased)",
    "stream_events": "publishes the stream from its cursor when its broker is due (nothing once erased)",
    "ring": "decides the phone call again (once per call id: the same answer, or nothing new)",
    "phone_call_answered": "records how the phone call was answered, once (else nothing)",
    "record_incident": "records the incident (a second copy if the first was stored)",
    "create_session": "creates the session unless it exists",
    "begin_admission": "moves the session to admitting if it is still only created (else nothing)",
    "attach_call": "attaches the call if the session is still admitting (a session over hangs it up)",
    "admission_failed": "fails the session if it is still being admitted (else nothing)",
    "dial_committed": "reads whether the session's dial was decided and still stands (changes nothing)",
    "describe_session": "reads the session record (changes nothing)",
    "erase_session": "erases the session again (an erased one is answered already_erased)",
    "erase_caller": "erases the number's ended sessions again (the erased ones are found no more)",
}


def _unusable(message: dramatiq.Message[Any]) -> str | None:
    """Why a decoded message cannot be listed or replayed, if it cannot: Dramatiq's decode
    builds a Message from any JSON object with its fields, whatever their types."""
    expected = {
        "message_id": (message.message_id, str),
        "queue_name": (message.queue_name, str),
        "actor_name": (message.actor_name, str),
        "kwargs": (message.kwargs, dict),
        "options": (message.options, dict),
    }
    for name, (value, kind) in expected.items():
        if not isinstance(value, kind):
            return f"its {name} is a {type(value).__name__}, not a {kind.__name__}"
    return None
