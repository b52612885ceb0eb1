"""The lanes worker (`switchboard worker`): each thread processes what it takes, against the
real local Redis, with Dramatiq's own middleware."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import dramatiq
import pytest
import redis
from dramatiq.middleware import Retries, TimeLimit

from pipeline.names import lane_counts
from workers.broker import make_broker
from workers.lanes import Lane, LaneWorker

REDIS_URL = "redis://127.0.0.1:6379/0"
DEADLINE_S = 5.0


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"sbtest-{uuid.uuid4()}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{name}:*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def broker(namespace: str) -> Iterator[dramatiq.Broker]:
    broker = make_broker(
        REDIS_URL, namespace=namespace, middleware=[TimeLimit(interval=50), Retries(min_backoff=10)]
    )
    # What `switchboard worker` emits once its actors are declared (TimeLimit's watch starts).
    broker.emit_after("process_boot")
    yield broker
    broker.close()


def _wait_until(predicate, deadline_s: float = DEADLINE_S) -> bool:
    give_up_at = time.monotonic() + deadline_s
    while time.monotonic() < give_up_at:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def _started(broker: dramatiq.Broker, lanes: int, queues: set[str] | None = None) -> LaneWorker:
    worker = LaneWorker(broker, queues=queues, lanes=lanes, worker_timeout=200)
    worker.start()
    return worker


def test_a_message_is_processed_on_the_lane_that_took_it(broker):
    """No hand-off: the actor runs on a lane of its queue, and the worker-thread hooks the
    middleware relies on (connections warmed per thread) ran on that same thread."""
    booted: set[int] = set()
    ran_on: list[threading.Thread] = []

    class RecordBoots(dramatiq.Middleware):
        def after_worker_thread_boot(self, broker, thread):
            booted.add(threading.get_ident())

    broker.add_middleware(RecordBoots())
    dramatiq.actor(
        lambda: ran_on.append(threading.current_thread()),
        broker=broker,
        queue_name="calls",
        actor_name="where",
    )
    worker = _started(broker, lanes=2)
    try:
        broker.get_actor("where").send()
        assert _wait_until(lambda: len(ran_on) == 1)
        [thread] = ran_on
        assert isinstance(thread, Lane) and thread.queue_name == "calls"
        assert thread.ident in booted
        # No pool of worker threads beside the lanes.
        assert worker.workers == []
    finally:
        worker.stop()


def test_the_lanes_of_a_queue_run_at_once(broker):
    """Three messages that each wait for the other two all finish: three lanes ran them at
    once, each woken by a token of its own (one lane taking them in turn would time out)."""
    barrier = threading.Barrier(3, timeout=DEADLINE_S)
    passed: list[int] = []

    def meet(value: int) -> None:
        barrier.wait()
        passed.append(value)

    actor = dramatiq.actor(meet, broker=broker, queue_name="calls", actor_name="meet", max_retries=0)
    worker = _started(broker, lanes=3)
    try:
        # Let every lane fall back to waiting on the wake list first.
        time.sleep(0.3)
        for value in range(3):
            actor.send(value)
        assert _wait_until(lambda: len(passed) == 3)
        assert sorted(passed) == [0, 1, 2]
    finally:
        worker.stop()


def test_a_failed_message_is_retried_through_the_delay_queue(broker):
    """Retries as with Dramatiq's worker: the retry waits on <q>.DQ, whose consumer puts it
    back on the queue when due, and a lane runs it again."""
    attempts: list[int] = []

    def flaky() -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("not yet")

    dramatiq.actor(flaky, broker=broker, queue_name="calls", actor_name="flaky", max_retries=5)
    worker = _started(broker, lanes=1)
    try:
        broker.get_actor("flaky").send()
        assert _wait_until(lambda: len(attempts) == 3)
    finally:
        worker.stop()
    time.sleep(0.3)
    assert len(attempts) == 3


def test_a_time_limit_fails_the_message_and_the_lane_goes_on(broker, namespace):
    """A message over its time limit is failed (dead-lettered here, with no retries) and the
    same lane then processes the next one."""
    done: list[str] = []

    def slow() -> None:
        # Short sleeps: a time limit is raised in the thread between two bytecodes, never
        # inside one long C call.
        for _ in range(300):
            time.sleep(0.01)
        done.append("slow")

    dramatiq.actor(slow, broker=broker, queue_name="calls", actor_name="slow", max_retries=0, time_limit=300)
    dramatiq.actor(lambda: done.append("quick"), broker=broker, queue_name="calls", actor_name="quick")
    worker = _started(broker, lanes=1)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        broker.get_actor("slow").send()
        broker.get_actor("quick").send()
        assert _wait_until(lambda: done == ["quick"])
        assert _wait_until(lambda: client.zcard(f"{namespace}:calls.XQ") == 1)
    finally:
        worker.stop()
        client.close()
    assert done == ["quick"]


def test_stopping_settles_the_acks_of_what_was_processed(broker, namespace):
    """A lane acknowledges with its next take; a stopping worker settles what is left, so
    nothing processed stays in its acks set to be delivered again."""
    arrived: list[int] = []
    actor = dramatiq.actor(arrived.append, broker=broker, queue_name="calls", actor_name="arrive")
    worker = _started(broker, lanes=2)
    for value in range(20):
        actor.send(value)
    assert _wait_until(lambda: len(arrived) == 20)
    worker.stop()
    client = redis.Redis.from_url(REDIS_URL)
    try:
        assert not client.exists(f"{namespace}:__acks__.{broker.broker_id}.calls")
        assert client.hlen(f"{namespace}:calls.msgs") == 0
        assert client.llen(f"{namespace}:calls") == 0
    finally:
        client.close()
    assert sorted(arrived) == list(range(20))


def test_a_worker_consumes_only_its_queues_with_their_share_of_lanes(broker):
    """`--queues` limits the lanes to those queues; each gets its weighted share, and each
    queue's delay queue one consumer."""
    for queue in ("transcript", "admission", "reads"):
        dramatiq.actor(lambda: None, broker=broker, queue_name=queue, actor_name=f"noop_{queue}")
    worker = _started(broker, lanes=8, queues={"transcript", "admission"})
    try:
        by_queue: dict[str, int] = {}
        for lane in worker.consumers.values():
            by_queue[lane.queue_name] = by_queue.get(lane.queue_name, 0) + 1
        shares = lane_counts(["admission", "transcript"], 8)
        assert by_queue == {
            "transcript": shares["transcript"],
            "admission": shares["admission"],
            "transcript.DQ": 1,
            "admission.DQ": 1,
        }
    finally:
        worker.stop()


def test_lanes_are_shared_by_weight_with_a_minimum_each():
    assert lane_counts(["transcript"], 5) == {"transcript": 5}
    shares = lane_counts(["admission", "reads", "transcript", "tool", "compaction"], 8)
    assert shares == {"admission": 2, "reads": 1, "transcript": 3, "tool": 2, "compaction": 1}
    # Every queue gets a lane however few there are; tool bodies and webhooks two.
    few = lane_counts(["transcript", "reads", "tool_runs", "app_webhooks"], 1)
    assert few == {"transcript": 1, "reads": 1, "tool_runs": 2, "app_webhooks": 2}
