"""The wake-up Redis broker, against the real local Redis."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import dramatiq
import pytest
import redis
import sentry_sdk
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Retries, TimeLimit

from pipeline.platform.envelope import NumberedMessage, numbered_body, plain_body
from workers.broker import WAKE_LIST_LENGTH, WakeRedisBroker, make_broker, wake_key
from workers.dead_letters import DeadLetters
from workers.runtime import start_worker

REDIS_URL = "redis://127.0.0.1:6379/0"

# Generous: these tests check that messages arrive, not how fast.
ARRIVAL_DEADLINE_S = 5.0

# Small enough that a stock consumer still picks messages up quickly in these tests.
WORKER_TIMEOUT_MS = 1_000


@pytest.fixture
def namespace() -> Iterator[str]:
    """A namespace of its own for each test, whose keys are deleted afterwards."""
    name = f"sbtest-{uuid.uuid4()}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{name}:*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def running_worker() -> Iterator[Callable[[RedisBroker], dramatiq.Worker]]:
    """Starts an in-process worker on a broker and stops it when the test ends."""
    started: list[dramatiq.Worker] = []

    def start(broker: RedisBroker) -> dramatiq.Worker:
        worker = dramatiq.Worker(broker, worker_timeout=WORKER_TIMEOUT_MS, worker_threads=2)
        worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
        worker.broker.close()


class Arrivals:
    """Records what an actor received, so a test can wait for it."""

    def __init__(self) -> None:
        self.values: list[int] = []
        self.lock = threading.Lock()

    def add(self, value: int) -> None:
        with self.lock:
            self.values.append(value)

    def wait_for(self, count: int, deadline_s: float = ARRIVAL_DEADLINE_S) -> list[int]:
        give_up_at = time.monotonic() + deadline_s
        while time.monotonic() < give_up_at:
            with self.lock:
                if len(self.values) >= count:
                    return sorted(self.values)
            time.sleep(0.01)
        with self.lock:
            return sorted(self.values)


def recording_actor(broker: RedisBroker, queue_name: str, arrivals: Arrivals) -> dramatiq.Actor:
    def record(value: int) -> None:
        arrivals.add(value)

    return dramatiq.actor(record, broker=broker, queue_name=queue_name, actor_name=queue_name)


def test_idle_wake_broker_delivers_every_message(namespace, running_worker):
    """Messages sent one by one to an idle wake broker all reach the actor."""
    broker = make_broker(REDIS_URL, namespace=namespace)
    assert isinstance(broker, WakeRedisBroker)
    arrivals = Arrivals()
    actor = recording_actor(broker, "calls", arrivals)
    running_worker(broker)

    for value in range(10):
        # Each pause lets the consumer fall back to blocking on its wake list.
        time.sleep(0.05)
        actor.send(value)

    assert arrivals.wait_for(10) == list(range(10))


def test_failing_message_is_dead_lettered_like_stock(namespace, running_worker):
    """A message that fails with max_retries=0 lands in <ns>:<q>.XQ, as with the stock broker."""
    broker = make_broker(REDIS_URL, namespace=namespace)

    def explode() -> None:
        raise RuntimeError("boom")

    actor = dramatiq.actor(explode, broker=broker, queue_name="doomed", max_retries=0)
    running_worker(broker)
    message = actor.send()

    client = redis.Redis.from_url(REDIS_URL)
    give_up_at = time.monotonic() + ARRIVAL_DEADLINE_S
    while time.monotonic() < give_up_at and not client.zcard(f"{namespace}:doomed.XQ"):
        time.sleep(0.01)

    dead_ids = client.zrange(f"{namespace}:doomed.XQ", 0, -1)
    assert len(dead_ids) == 1
    dead = dramatiq.Message.decode(client.hget(f"{namespace}:doomed.XQ.msgs", dead_ids[0]))
    assert dead.message_id == message.message_id
    assert client.llen(f"{namespace}:doomed") == 0
    client.close()


def test_wake_list_stays_bounded(namespace):
    """However many messages are sent with nobody consuming, the wake list holds at most 64 tokens."""
    broker = make_broker(REDIS_URL, namespace=namespace)
    actor = dramatiq.actor(lambda: None, broker=broker, queue_name="pileup", actor_name="pileup")

    for _ in range(WAKE_LIST_LENGTH * 3):
        actor.send()

    client = redis.Redis.from_url(REDIS_URL)
    assert client.llen(wake_key(namespace, "pileup")) == WAKE_LIST_LENGTH
    assert client.llen(f"{namespace}:pileup") == WAKE_LIST_LENGTH * 3
    client.close()
    broker.close()


def test_delayed_message_is_delivered(namespace, running_worker):
    """A message sent with a delay goes through <q>.DQ and still reaches the actor."""
    broker = make_broker(REDIS_URL, namespace=namespace)
    arrivals = Arrivals()
    actor = recording_actor(broker, "later", arrivals)
    running_worker(broker)

    time.sleep(0.05)
    actor.send_with_options(args=(7,), delay=200)

    assert arrivals.wait_for(1) == [7]


def test_stock_variant_still_works(namespace, running_worker):
    """make_broker(consumer="stock") is Dramatiq's own RedisBroker and consumer (with the
    numbering enqueue the gateway sends through), and it delivers."""
    broker = make_broker(REDIS_URL, namespace=namespace, consumer="stock")
    assert isinstance(broker, RedisBroker) and not isinstance(broker, WakeRedisBroker)
    assert broker.consumer_class is RedisBroker(namespace=namespace).consumer_class
    assert broker.heartbeat_timeout == 5_000
    arrivals = Arrivals()
    actor = recording_actor(broker, "plain", arrivals)
    running_worker(broker)

    for value in range(5):
        actor.send(value)

    assert arrivals.wait_for(5) == list(range(5))


def test_unknown_consumer_kind_is_refused():
    """An unknown consumer kind is a clear error, not a silent stock broker."""
    with pytest.raises(ValueError, match="unknown consumer kind"):
        make_broker(REDIS_URL, consumer="fast")  # type: ignore[arg-type]


def test_enqueue_survives_a_flushed_script_cache(namespace, running_worker):
    """After Redis forgets its scripts (a restart without persistence), the pipelined
    enqueue reloads the dispatch script and the message is still delivered."""
    broker = make_broker(REDIS_URL, namespace=namespace)
    arrivals = Arrivals()
    actor = recording_actor(broker, "flushed", arrivals)
    actor.send(1)
    broker.client.script_flush()
    actor.send(2)
    running_worker(broker)

    assert sorted(arrivals.wait_for(2)) == [1, 2]


def _plain(queue_name: str, value: int) -> NumberedMessage:
    """A message for a recording actor of `queue_name`, not numbered."""
    message_id = str(uuid.uuid4())
    body = plain_body(queue_name, queue_name, {"value": value}, message_id, int(time.time() * 1000))
    return NumberedMessage(queue_name, message_id, (body,))


def _numbered(
    queue_name: str, seq_key: str, floor: int = 0, message_id: str = "", events: int = 1
) -> NumberedMessage:
    """A message of `events` envelopes that get their seqs from `seq_key`'s counter."""
    message_id = message_id or str(uuid.uuid4())
    parts = numbered_body(queue_name, queue_name, [{"session_id": "s"}] * events, message_id, 0)
    return NumberedMessage(queue_name, message_id, parts, seq_key=seq_key, floor=floor)


def _stored(client: redis.Redis, namespace: str, queue_name: str) -> list[dict]:
    return [
        dramatiq.Message.decode(client.hget(f"{namespace}:{queue_name}.msgs", i)).kwargs
        for i in client.lrange(f"{namespace}:{queue_name}", 0, -1)
    ]


@pytest.mark.parametrize("consumer", ["wake", "stock"])
def test_enqueue_numbered_numbers_and_stores_in_order_with_a_token_each(namespace, consumer):
    """One call numbers each message that asks (consecutive seqs per counter), leaves the others
    unnumbered, stores all in order on their queues as Dramatiq messages, with a wake token each."""
    broker = make_broker(REDIS_URL, namespace=namespace, consumer=consumer)
    key_a, key_b = f"{namespace}:seq:a", f"{namespace}:seq:b"
    seqs = broker.enqueue_numbered(
        [
            _numbered("first", key_a),
            _plain("second", 7),
            _numbered("first", key_b),
            _numbered("first", key_a),
        ],
        seq_ttl_s=60,
    )
    assert seqs == [1, 0, 1, 2]
    client = redis.Redis.from_url(REDIS_URL)
    assert [kwargs["envelope"]["seq"] for kwargs in _stored(client, namespace, "first")] == [1, 1, 2]
    assert _stored(client, namespace, "second") == [{"value": 7}]
    assert client.llen(wake_key(namespace, "first")) == 3
    assert client.llen(wake_key(namespace, "second")) == 1
    assert 0 < client.ttl(key_a) <= 60
    client.close()


def test_enqueue_numbered_sent_again_numbers_and_stores_once(namespace):
    """A message sent again under its id (its first reply was lost) gets the seq it got the
    first time, and is stored once."""
    broker = make_broker(REDIS_URL, namespace=namespace)
    key = f"{namespace}:seq:s"
    first = _numbered("again", key, message_id="m-1")
    assert broker.enqueue_numbered([first], seq_ttl_s=60) == [1]
    assert broker.enqueue_numbered([first, _numbered("again", key)], seq_ttl_s=60) == [1, 2]
    client = redis.Redis.from_url(REDIS_URL)
    assert [kwargs["envelope"]["seq"] for kwargs in _stored(client, namespace, "again")] == [1, 2]
    client.close()


def test_a_message_of_several_events_gets_consecutive_seqs(namespace):
    """A message carrying k events of a session takes k consecutive seqs of its counter (above
    the floor when the counter is lost), each written into its envelope; sent again under its
    id it is answered its first seq and stored once."""
    broker = make_broker(REDIS_URL, namespace=namespace)
    key = f"{namespace}:seq:s"
    group = _numbered("several", key, events=3, message_id="m-3")
    assert broker.enqueue_numbered([_numbered("several", key), group], seq_ttl_s=60) == [1, 2]
    assert broker.enqueue_numbered([group, _numbered("several", key)], seq_ttl_s=60) == [2, 5]
    client = redis.Redis.from_url(REDIS_URL)
    stored = _stored(client, namespace, "several")
    client.delete(key)
    assert broker.enqueue_numbered([_numbered("several", key, floor=9, events=2)], seq_ttl_s=60) == [10]
    assert broker.enqueue_numbered([_numbered("several", key)], seq_ttl_s=60) == [12]
    client.close()
    assert [kwargs.get("envelope", {}).get("seq") for kwargs in stored] == [1, None, 5]
    assert [envelope["seq"] for envelope in stored[1]["envelopes"]] == [2, 3, 4]


def test_enqueue_numbered_numbers_above_the_floor_when_the_counter_is_lost(namespace):
    """A counter Redis lost (or that expired) resumes above the floor the sender knows, and
    the counter is set there, so the next seq follows it."""
    broker = make_broker(REDIS_URL, namespace=namespace)
    key = f"{namespace}:seq:s"
    assert broker.enqueue_numbered([_numbered("lost", key, floor=41)], seq_ttl_s=60) == [42]
    assert broker.enqueue_numbered([_numbered("lost", key, floor=41)], seq_ttl_s=60) == [43]


def test_enqueue_numbered_survives_a_flushed_script_cache(namespace, running_worker):
    """After Redis forgets its scripts (a restart without persistence), the numbering enqueue
    loads its script again and the messages are delivered."""
    broker = make_broker(REDIS_URL, namespace=namespace)
    arrivals = Arrivals()

    def record(value: int) -> None:
        arrivals.add(value)

    dramatiq.actor(record, broker=broker, queue_name="batch", actor_name="batch")
    broker.enqueue_numbered([_plain("batch", 1)], seq_ttl_s=60)
    broker.client.script_flush()
    broker.enqueue_numbered([_plain("batch", 2), _plain("batch", 3)], seq_ttl_s=60)
    running_worker(broker)
    assert arrivals.wait_for(3) == [1, 2, 3]


def test_a_fetch_clears_the_tokens_of_what_it_takes(namespace):
    """Fetching a burst clears its tokens (no empty fetch per stale token afterwards); a fetch
    that fills the consumer's free slots leaves a token for the messages it had no room for."""
    broker = make_broker(REDIS_URL, namespace=namespace)
    assert isinstance(broker, WakeRedisBroker)
    dramatiq.actor(lambda value: None, broker=broker, queue_name="burst", actor_name="burst")
    broker.enqueue_numbered([_plain("burst", value) for value in range(5)], seq_ttl_s=60)
    client = redis.Redis.from_url(REDIS_URL)
    assert client.llen(wake_key(namespace, "burst")) == 5

    fetched = broker.fetch_clearing_wake("burst", 10)
    assert [dramatiq.Message.decode(data).kwargs["value"] for data in fetched] == list(range(5))
    assert client.llen(wake_key(namespace, "burst")) == 0

    broker.enqueue_numbered([_plain("burst", value) for value in range(5, 9)], seq_ttl_s=60)
    consumer = broker.consume("burst", prefetch=2, timeout=100)
    taken = [next(consumer), next(consumer)]
    assert [message.kwargs["value"] for message in taken] == [5, 6]
    # Two slots, two taken, two more waiting: a token says so to whoever is idle.
    assert client.llen(wake_key(namespace, "burst")) == 1
    consumer.close()
    client.close()
    broker.close()


def _wait_until(predicate: Callable[[], bool], deadline_s: float = ARRIVAL_DEADLINE_S) -> bool:
    give_up_at = time.monotonic() + deadline_s
    while time.monotonic() < give_up_at:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_an_undecodable_message_is_dead_lettered_and_its_batch_processed(
    services, namespace, running_worker, caplog, monkeypatch
):
    """A body that is not a message goes to the dead letters with its raw bytes and leaves
    this worker's acks set; the good messages fetched in the same batch are all processed."""
    from models.db import connect

    # The dead letters are kept in PostgreSQL: bound here, not by whichever test ran before.
    connect(services.database_url)
    reported: list[str] = []
    monkeypatch.setattr(sentry_sdk, "capture_message", lambda message, *_, **__: reported.append(message))
    broker = make_broker(REDIS_URL, namespace=namespace)
    assert isinstance(broker, WakeRedisBroker)
    arrivals = Arrivals()
    actor = recording_actor(broker, "mixed", arrivals)
    garbage = {"garbage-1": b"\xff\xfe{not a message", "garbage-2": b'{"queue_name": "mixed"}'}
    # Two threads prefetch four: the first garbage body sits in the first fetch, ahead of two
    # good messages, and the second in the middle of the next one.
    actor.send(0)
    broker.do_enqueue("mixed", "garbage-1", garbage["garbage-1"])
    for value in range(1, 5):
        actor.send(value)
    broker.do_enqueue("mixed", "garbage-2", garbage["garbage-2"])
    actor.send(5)

    running_worker(broker)

    assert arrivals.wait_for(6) == list(range(6))
    client = redis.Redis.from_url(REDIS_URL)
    acks = f"{namespace}:__acks__.{broker.broker_id}.mixed"
    assert _wait_until(lambda: client.scard(acks) == 0), client.smembers(acks)
    dead = {key.decode(): value for key, value in client.hgetall(f"{namespace}:mixed.XQ.msgs").items()}
    assert dead == garbage
    assert sorted(client.zrange(f"{namespace}:mixed.XQ", 0, -1)) == [b"garbage-1", b"garbage-2"]
    assert client.hlen(f"{namespace}:mixed.msgs") == 0
    listed = DeadLetters(broker, queues=("mixed",)).list()
    assert sorted((letter.id, letter.error.startswith("corrupt: ")) for letter in listed) == [
        ("garbage-1", True),
        ("garbage-2", True),
    ]
    assert not [r for r in caplog.records if r.levelname == "CRITICAL"], "a consumer crashed"
    warnings = [
        r.getMessage() for r in caplog.records if r.name == "workers.broker" and r.levelname == "WARNING"
    ]
    assert len([w for w in warnings if "undecodable" in w]) == 2, warnings
    assert len(reported) == 2 and all("undecodable" in message for message in reported), reported
    client.close()


def test_enqueue_all_stores_each_as_enqueue_would_in_one_call(namespace, running_worker):
    """Messages with and without a delay, in one call: each gets a storage id of its own, a
    delayed one waits on its queue's delay queue with its eta, the enqueue middleware sees each,
    and a worker receives every one (the delayed one after its delay)."""
    seen: list[int | None] = []

    class Watch(dramatiq.Middleware):
        def before_enqueue(self, broker, message, delay):
            seen.append(delay)

    broker = make_broker(REDIS_URL, namespace=namespace)
    assert isinstance(broker, WakeRedisBroker)
    broker.add_middleware(Watch())
    arrivals = Arrivals()
    actor = recording_actor(broker, "mixed", arrivals)
    before = int(time.time() * 1000)
    broker.enqueue_all(
        [
            (actor.message(1), None),
            (actor.message(2), 300),
            (actor.message(3), None),
        ]
    )
    client = redis.Redis.from_url(REDIS_URL)
    now_queued = [
        dramatiq.Message.decode(client.hget(f"{namespace}:mixed.msgs", i)).args
        for i in client.lrange(f"{namespace}:mixed", 0, -1)
    ]
    [delayed] = [dramatiq.Message.decode(body) for body in client.hvals(f"{namespace}:mixed.DQ.msgs")]
    client.close()
    assert now_queued == [(1,), (3,)]
    assert delayed.args == (2,) and delayed.options["eta"] >= before + 300
    assert seen == [None, 300, None]
    running_worker(broker)
    assert arrivals.wait_for(3) == [1, 2, 3]


def test_a_message_over_its_time_limit_is_failed_and_the_worker_goes_on(namespace):
    """A worker started as `switchboard worker` starts it enforces time limits. Without
    process_boot (Dramatiq's CLI emits it; `switchboard worker` is not that CLI) TimeLimit never
    watches: the slow message would run to its end and count as done."""
    broker = make_broker(REDIS_URL, namespace=namespace, middleware=[TimeLimit(interval=50), Retries()])
    done: list[str] = []

    def slow() -> None:
        # Short sleeps: a time limit is raised in the thread between two bytecodes, never
        # inside one long C call.
        for _ in range(300):
            time.sleep(0.01)
        done.append("slow")

    dramatiq.actor(slow, broker=broker, queue_name="calls", actor_name="slow", max_retries=0, time_limit=300)
    dramatiq.actor(lambda: done.append("quick"), broker=broker, queue_name="calls", actor_name="quick")
    worker = start_worker(broker, queues=None, threads=1, worker_timeout_ms=200)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        broker.get_actor("slow").send()
        broker.get_actor("quick").send()
        _wait_until(lambda: done == ["quick"] and client.zcard(f"{namespace}:calls.XQ") == 1)
        # One thread: the quick message ran after the slow one was cut off, well before its 3 s.
        assert done == ["quick"]
        assert client.zcard(f"{namespace}:calls.XQ") == 1
    finally:
        worker.stop()
        broker.close()
        client.close()
    assert done == ["quick"]


def test_a_delivery_that_hangs_holds_no_thread_of_a_call_s_queues(namespace, caplog):
    """One worker on every queue (the README's `switchboard worker`), one thread asked for: the
    event streams' and webhooks' messages run on pools of their own, so deliveries stuck on an
    app that never answers (every thread the deliveries have) leave a call's event its thread.
    With one pool, the call's event waited behind them. Nor does a clean start warn about the
    pools' consumers."""
    from pipeline.platform.names import (
        APP_WEBHOOKS_QUEUE,
        DELIVERY_POOL_THREADS,
        EVENT_STREAMS_QUEUE,
        TRANSCRIPT_QUEUE,
    )

    broker = make_broker(REDIS_URL, namespace=namespace, middleware=[Retries()])
    app_answers = threading.Event()
    stuck: list[str] = []
    heard = threading.Event()

    def deliver(queue: str) -> None:
        stuck.append(queue)
        app_answers.wait(30)

    dramatiq.actor(deliver, broker=broker, queue_name=EVENT_STREAMS_QUEUE, actor_name="stream", max_retries=0)
    dramatiq.actor(deliver, broker=broker, queue_name=APP_WEBHOOKS_QUEUE, actor_name="notify", max_retries=0)
    dramatiq.actor(heard.set, broker=broker, queue_name=TRANSCRIPT_QUEUE, actor_name="heard", max_retries=0)
    with caplog.at_level("WARNING"):
        worker = start_worker(broker, queues=None, threads=1, worker_timeout_ms=200)
    try:
        for _ in range(DELIVERY_POOL_THREADS + 1):
            broker.get_actor("stream").send(EVENT_STREAMS_QUEUE)
            broker.get_actor("notify").send(APP_WEBHOOKS_QUEUE)
        deadline = time.monotonic() + ARRIVAL_DEADLINE_S
        while len(stuck) < 2 * DELIVERY_POOL_THREADS and time.monotonic() < deadline:
            time.sleep(0.01)
        # The fault is in place: every delivery thread waits on an app that does not answer.
        assert sorted(stuck) == sorted([APP_WEBHOOKS_QUEUE, EVENT_STREAMS_QUEUE] * DELIVERY_POOL_THREADS)
        broker.get_actor("heard").send()
        assert heard.wait(ARRIVAL_DEADLINE_S), "the call's event waited for the deliveries' threads"
        app_answers.set()
        deadline = time.monotonic() + ARRIVAL_DEADLINE_S
        while len(stuck) < 2 * (DELIVERY_POOL_THREADS + 1) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(stuck) == 2 * (DELIVERY_POOL_THREADS + 1)  # the waiting deliveries ran once freed
    finally:
        app_answers.set()
        worker.stop()
        broker.close()
    assert not [record for record in caplog.records if "same type twice" in record.getMessage()]
