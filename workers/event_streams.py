"""Event streams to the app's own broker, through kombu (`docs/events.md`): every call-log entry
of a session, then its end-of-call report, published in seq order, at least once, each with a
message id that never changes (`pipeline.api.event_streams`).

A sweep publishes what the session's cursor has not confirmed yet. It becomes the session's only
publisher or leaves at once (`models.event_streams.sole_publisher`): every sweep first marks the
session wanted, and the publisher projects the call log past the cursor (as
`GET /v1/sessions/{id}/log` does) and publishes it for as long as that mark comes back, so a sweep
that found the lock taken has its entries published by the holder, and no sweep holds a worker's
thread waiting for another. Each message is published once the session is read not erased (an
erasure during a sweep stops it there), and the cursor moves past it once the broker confirmed it;
the report goes once `call.ended` went.

A broker that does not connect within `CONNECT_TIMEOUT_S` or confirm a message within
`PUBLISH_TIMEOUT_S`, or refuses, is down until its back-off is over, for every session streaming
to it (`StreamGate`, in Redis): a sweep that finds it down does not try it, and a session waits
for it with one sweep, sent again when the broker is due (`Swept.waiting`); the session's other
sweeps leave the publishing to that one. A session that waited longer than its retries' back-offs
add up to is given up (`EventStreamGivenUp`: a dead letter, which `dlq replay` sweeps again from
the cursor). The sweep's message names only the session: the URL (which may hold a password) is
read from PostgreSQL when it runs, never written to a queue, a Redis key or a dead letter.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import redis
from kombu.connection import Connection
from kombu.entity import Exchange
from kombu.messaging import Producer

from models.db import SessionRow
from models.event_streams import cursor_of, entry_published, is_erased, report_published, sole_publisher
from models.records import call_log
from models.releases import read_across
from pipeline.api.event_streams import (
    REPORT_KIND,
    Waiting,
    backoff_ms,
    broker_key,
    entry_body,
    entry_id,
    gives_up_after_ms,
    report_body,
    report_id,
    routing_key,
)
from pipeline.call.errors import Fault
from pipeline.session.state import EventStream, SessionState
from workers.app_webhooks import PriceOf, report

logger = logging.getLogger(__name__)

# A broker that has not answered a connection (TCP, then the AMQP or Redis handshake) within this
# is down for this try. Brokers answer in milliseconds; one that accepts and never answers held a
# worker's thread for 5 s more per try, as kombu waited 2 s and tried again.
CONNECT_TIMEOUT_S = 3.0
# A broker that does not confirm a message (AMQP's publisher confirm; the Redis command's reply)
# within this is down for this try.
PUBLISH_TIMEOUT_S = 5.0
# How long a try may take before what it found is noted: the other sweeps streaming to a broker
# whose back-off is over wait this long for the one that tries it.
TRY_BOUND_MS = int((CONNECT_TIMEOUT_S + PUBLISH_TIMEOUT_S) * 1000) + 1_000
# How late a session's waiting sweep may run after its due time (a worker's delay queue takes it
# on time, or a busy pool a little later) before another sweep of the session may wait instead.
WAITING_GRACE_MS = 30_000
# A session's mark that a sweep came for it outlives any sweep by far, and then goes by itself.
WANTED_TTL_S = 24 * 3_600
# Messages survive a restart of the app's broker (AMQP's delivery mode 2).
PERSISTENT = 2


class EventStreamFailed(Fault):
    """The app's broker did not take a message (not reachable, refused, or no confirmation): the
    session's stream waits for the broker's next try, from that message."""

    code = "event_stream_failed"


class EventStreamGivenUp(EventStreamFailed):
    """A session's stream waited for its broker longer than its retries allow: the sweep is a
    dead letter, and `switchboard dlq replay` sweeps again from the cursor."""


@dataclass(frozen=True)
class Swept:
    """What one sweep did: how many messages the broker confirmed, and, while the session's
    broker is down, the waiting sweep to send again `again_in_ms` from now (None: nothing to
    send; any later sweep of the session, or the one already waiting, carries on)."""

    published: int
    waiting: Waiting | None = None
    again_in_ms: int = 0
    # This sweep's own try of the broker, when it made one and it failed.
    failure: EventStreamFailed | None = None


# ── what Redis keeps of the deployment's streams ─────────────────────────────────────────────

# KEYS[1] a broker's back-off, KEYS[2] the session's wanted mark; ARGV[1] TRY_BOUND_MS, ARGV[2]
# how often a sweep looks again while another tries the broker (ms), ARGV[3] the mark's lifetime
# (s). Marks the session wanted, and answers {wait, now}: wait -1 when the broker may be tried now,
# else the ms until it may (or until what the try under way found is looked at). A broker whose
# back-off is over is claimed for one try (`trying`): the others wait for what that try finds
# instead of each trying it.
_ARRIVE = """
redis.call('SET', KEYS[2], 1, 'EX', tonumber(ARGV[3]))
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = redis.call('HGET', KEYS[1], 'retry_at')
if not at then return {-1, now} end
at = tonumber(at)
if at > now then
    local wait = at - now
    if redis.call('HGET', KEYS[1], 'trying') == '1' then wait = math.min(wait, tonumber(ARGV[2])) end
    return {wait, now}
end
redis.call('HSET', KEYS[1], 'retry_at', now + tonumber(ARGV[1]), 'trying', 1)
return {-1, now}
"""

# KEYS[1] a broker's back-off; ARGV[1] the key's lifetime (ms), then the back-off (ms) after 1, 2,
# … failed tries in a row (`pipeline.api.event_streams.backoff_ms`; the last repeats). Answers the ms
# until the broker's next try. A failure while the broker is already down (another sweep's try of
# the same moment, made before any was noted) counts once.
_FAILED = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = tonumber(redis.call('HGET', KEYS[1], 'retry_at') or '-1')
local trying = redis.call('HGET', KEYS[1], 'trying') == '1'
if at > now and not trying then return at - now end
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local wait = tonumber(ARGV[math.min(failures, #ARGV - 1) + 1])
redis.call('HSET', KEYS[1], 'retry_at', now + wait, 'trying', 0)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return wait
"""

# KEYS[1] a session's waiting sweep; ARGV[1] its token, ARGV[2] how long it holds (ms). 1: this
# sweep is (still) the session's waiting one; 0: another is.
_WAIT = """
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1
"""

# KEYS[1] a session's waiting sweep; ARGV[1] the token of the one that is done waiting.
_DONE_WAITING = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""


class StreamGate:
    """What the deployment's workers share about its streams, in Redis (namespace `<ns>`), with
    one clock (the Redis server's):

    - `<ns>:stream-broker:<broker key>` (a hash: `failures`, `retry_at` in ms, `trying`): a broker
      that failed its last try, and when it may be tried again;
    - `<ns>:stream-wanted:<session>`: a sweep came for the session since its publisher last looked;
    - `<ns>:stream-waiting:<session>`: the token of the session's sweep that waits for its broker.

    No URL is written: a broker is named by its key's digest."""

    def __init__(
        self, client: redis.Redis, namespace: str, *, minimum_ms: int, maximum_ms: int, retries: int
    ) -> None:
        self._client = client
        self._namespace = namespace
        self.gives_up_ms = gives_up_after_ms(retries, minimum_ms, maximum_ms)
        self._minimum_ms = minimum_ms
        # The back-offs after 1, 2, … failures, up to the first at the maximum (which repeats).
        waits = [backoff_ms(1, minimum_ms, maximum_ms)]
        while waits[-1] < maximum_ms and len(waits) < 40:
            waits.append(backoff_ms(len(waits) + 1, minimum_ms, maximum_ms))
        self._waits = waits
        # A broker's back-off outlives its longest wait and the try after it, then goes by itself.
        self._broker_ttl_ms = 2 * maximum_ms + TRY_BOUND_MS
        self._arrive = client.register_script(_ARRIVE)
        self._failed = client.register_script(_FAILED)
        self._wait = client.register_script(_WAIT)
        self._done_waiting = client.register_script(_DONE_WAITING)

    def arrive(self, session_id: str, broker: str) -> tuple[int | None, int]:
        """Mark the session wanted (its publisher looks again), and answer whether its broker may
        be tried now (None) or the ms until it may; and the time now (ms, the Redis server's)."""
        keys = [self._broker(broker), self._session("wanted", session_id)]
        wait, now = self._arrive(keys=keys, args=[TRY_BOUND_MS, self._minimum_ms, WANTED_TTL_S])
        return (None if int(wait) < 0 else int(wait)), int(now)

    def failed(self, broker: str) -> int:
        """Note a failed try of the broker; the ms until its next try."""
        keys = [self._broker(broker)]
        return int(self._failed(keys=keys, args=[self._broker_ttl_ms, *self._waits]))

    def recovered(self, broker: str) -> None:
        """The broker took a message: it is tried by every sweep again."""
        self._client.delete(self._broker(broker))

    def take_wanted(self, session_id: str) -> bool:
        """Whether a sweep came for the session since this was last asked (and forget that it did)."""
        return bool(self._client.delete(self._session("wanted", session_id)))

    def is_wanted(self, session_id: str) -> bool:
        return bool(self._client.exists(self._session("wanted", session_id)))

    def wait(self, session_id: str, token: str, for_ms: int) -> bool:
        """Make the sweep of `token` the session's waiting one, due in `for_ms`; False when another
        sweep of the session waits already (it will publish what this one came for)."""
        keys = [self._session("waiting", session_id)]
        return bool(self._wait(keys=keys, args=[token, for_ms + WAITING_GRACE_MS]))

    def done_waiting(self, session_id: str, token: str) -> None:
        self._done_waiting(keys=[self._session("waiting", session_id)], args=[token])

    def _broker(self, broker: str) -> str:
        return f"{self._namespace}:stream-broker:{broker}"

    def _session(self, what: str, session_id: str) -> str:
        return f"{self._namespace}:stream-{what}:{session_id}"


# ── a sweep ─────────────────────────────────────────────────────────────────────────────────


def sweep(
    session_id: str,
    waiting: Waiting | None,
    *,
    gate: StreamGate,
    price_of: PriceOf,
    namespace: str,
) -> Swept:
    """Publish the session's entries past its cursor, and its report once the call ended, unless
    its broker is down; then the session waits for the broker's next try (`Swept.waiting`), or,
    waiting already longer than its retries allow, `EventStreamGivenUp`. A session of another
    deployment than `namespace` is as good as gone."""
    row = SessionRow.get_or_none((SessionRow.id == session_id) & (SessionRow.namespace == namespace))
    if row is None:
        return Swept(0)  # the session is gone: nothing to stream
    stream = read_across(SessionState, row.state, "stored session state").event_stream
    if stream is None:
        return Swept(0)
    if row.erased_at is not None:
        # An erased session's call log is only how it ended, numbered afresh: published, its
        # entries would take ids the real ones had. Its stream stops where it was.
        logger.info("event stream of %s: nothing more is published, the session was erased", session_id)
        return Swept(0)
    broker = broker_key(stream.url, stream.exchange)
    wait_ms, now_ms = gate.arrive(session_id, broker)
    failure: EventStreamFailed | None = None
    if wait_ms is None:
        if waiting is not None:
            # Its wait is over before it projects the log: a sweep that comes from now on must
            # not leave its entries to this one, which may have read the log before them.
            gate.done_waiting(session_id, waiting.token)
        try:
            published = _publish_wanted(session_id, stream, broker, gate, price_of, namespace)
        except EventStreamFailed as error:
            failure = error
            wait_ms = gate.failed(broker)
            logger.warning(
                "event stream of %s: %s; the broker is tried again in %.1f s",
                session_id,
                error,
                wait_ms / 1000,
            )
        else:
            return Swept(published)
    # Waiting since before its first try, so its last try comes after all its back-offs.
    mine = waiting or Waiting(now_ms, uuid.uuid4().hex)
    if not gate.wait(session_id, mine.token, wait_ms):
        return Swept(0)  # the session's waiting sweep publishes what this one came for
    waited_ms = now_ms - mine.since_ms
    # Given up only on a try of its own: a replayed dead letter that finds its broker's back-off
    # not over waits for the broker's next try, and is given up again only if that fails.
    if failure is not None and waited_ms >= gate.gives_up_ms:
        gate.done_waiting(session_id, mine.token)
        raise EventStreamGivenUp(f"{failure}; the stream waited {waited_ms / 1000:.1f} s for it") from None
    return Swept(0, mine, wait_ms, failure)


def _publish_wanted(
    session_id: str,
    stream: EventStream,
    broker: str,
    gate: StreamGate,
    price_of: PriceOf,
    namespace: str,
) -> int:
    """As the session's only publisher, publish past its cursor for as long as sweeps come for it;
    how many messages the broker confirmed (0 at once when another publisher holds the session:
    it looks at the wanted mark this sweep left before it lets go)."""
    published = 0
    while True:
        with sole_publisher(session_id) as held:
            if held is None:
                return published
            # Once it took a message, every sweep may try the broker again (one note a sweep).
            with _Broker(stream, on_first_taken=lambda: gate.recovered(broker)) as publish:
                while gate.take_wanted(session_id):
                    cursor = cursor_of(session_id) or held
                    done, erased = _publish_past(
                        session_id,
                        cursor.published_seq,
                        cursor.report_published,
                        publish,
                        price_of,
                        namespace,
                    )
                    published += done
                    if erased:
                        logger.info("event stream of %s: stopped, the session was erased", session_id)
                        return published
        # Let go: a sweep that came between the last look and the unlock found the lock taken.
        if not gate.is_wanted(session_id):
            return published


def _publish_past(
    session_id: str,
    published_seq: int,
    report_went: bool,
    publish: Callable[[dict[str, Any], str, str], None],
    price_of: PriceOf,
    namespace: str,
) -> tuple[int, bool]:
    """Publish the entries after `published_seq`, then the report once the call ended (unless it
    went); how many, and whether the session was found erased before one of them (which stops
    the sweep there)."""
    story = [entry.model_dump(mode="json") for entry in call_log(session_id, namespace=namespace)]
    pending = [entry for entry in story if entry["seq"] > published_seq]
    ended = next((entry for entry in story if entry["kind"] == "call.ended"), None)
    published = 0
    for entry in pending:
        if is_erased(session_id):
            return published, True
        publish(entry_body(session_id, entry), entry_id(session_id, entry["seq"]), entry["kind"])
        entry_published(session_id, entry["seq"])
        published += 1
    if ended is not None and not report_went:
        # The record as it is now, as the call.ended webhook's report is.
        fresh = read_across(
            SessionState, SessionRow.get(SessionRow.id == session_id).state, "stored session state"
        )
        done = report(session_id, fresh, price_of(str(fresh.provider), fresh.model.id), namespace=namespace)
        if is_erased(session_id):
            return published, True
        publish(report_body(session_id, ended["seq"], done), report_id(session_id), REPORT_KIND)
        report_published(session_id)
        published += 1
    return published, False


class _Broker:
    """The stream's broker, connected on the first message: a `publish(body, id, kind)` that
    returns once the broker took it (AMQP: a publisher confirm), else raises `EventStreamFailed`."""

    def __init__(self, stream: EventStream, *, on_first_taken: Callable[[], None]) -> None:
        self.where = _where(stream.url)
        self.on_first_taken = on_first_taken
        self.taken = 0
        self.connection = Connection(
            stream.url,
            connect_timeout=CONNECT_TIMEOUT_S,
            transport_options={
                "confirm_publish": True,  # AMQP: basic_publish waits for the broker's ack
                # AMQP: every read and write on the connection, its handshake's and a channel's too.
                "read_timeout": PUBLISH_TIMEOUT_S,
                "write_timeout": PUBLISH_TIMEOUT_S,
                "socket_timeout": PUBLISH_TIMEOUT_S,  # Redis
                "socket_connect_timeout": CONNECT_TIMEOUT_S,
                "max_retries": 0,
            },
        )
        self.exchange = Exchange(stream.exchange, type="topic", durable=True)
        self.producer: Producer | None = None

    def __enter__(self) -> Callable[[dict[str, Any], str, str], None]:
        return self.publish

    def __exit__(self, *_exc: object) -> None:
        self.connection.release()

    def publish(self, body: dict[str, Any], message_id: str, kind: str) -> None:
        producer = self.producer or self._connect()
        try:
            producer.publish(
                body,
                exchange=self.exchange,
                routing_key=routing_key(kind),
                message_id=message_id,
                delivery_mode=PERSISTENT,
                headers={"session_id": body["session_id"], "kind": kind},
                timeout=PUBLISH_TIMEOUT_S,
            )
        except Exception as error:  # noqa: BLE001 (every transport raises its own: each is this broker down)
            raise self._failed(f"did not take {message_id}", error) from None
        self.taken += 1
        if self.taken == 1:
            self.on_first_taken()

    def _connect(self) -> Producer:
        try:
            # No retry here (kombu's waits 2 s and tries again): the broker's back-off is the retry.
            self.connection.ensure_connection(max_retries=0, timeout=CONNECT_TIMEOUT_S)
            producer: Producer = self.connection.Producer(serializer="json")
            self.exchange(producer.channel).declare()
        except Exception as error:  # noqa: BLE001 (as above)
            raise self._failed("could not be reached", error) from None
        self.producer = producer
        return producer

    def _failed(self, what: str, error: BaseException) -> EventStreamFailed:
        # The error's type and the broker's host only: the URL and kombu's message may hold a password.
        return EventStreamFailed(f"the app's broker {self.where} {what} ({type(error).__name__})")


def _where(url: str) -> str:
    """The broker as it may be named in an error or a dead letter: its scheme, host and port."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}"
