"""How a worker process shares out its threads (pipeline.platform.names.worker_pools): the deliveries to
apps never take a thread a call's queues need."""

from __future__ import annotations

from pipeline.platform.names import (
    APP_WEBHOOKS_QUEUE,
    DELIVERY_POOL_THREADS,
    EVENT_STREAMS_QUEUE,
    QUEUES,
    TOOL_RUNS_QUEUE,
    TRANSCRIPT_QUEUE,
    Pool,
    worker_pools,
)


def test_one_worker_on_every_queue_gives_each_delivery_queue_threads_of_its_own() -> None:
    """`switchboard worker` (the README's way): the call's queues keep the threads asked for."""
    pools = worker_pools(frozenset(QUEUES), 8)
    calls = frozenset(QUEUES) - {APP_WEBHOOKS_QUEUE, EVENT_STREAMS_QUEUE}
    assert pools == (
        Pool(calls, 8),
        Pool(frozenset({APP_WEBHOOKS_QUEUE}), DELIVERY_POOL_THREADS),
        Pool(frozenset({EVENT_STREAMS_QUEUE}), DELIVERY_POOL_THREADS),
    )
    # Every queue is consumed, by one pool only.
    assert sorted(queue for pool in pools for queue in pool.queues) == sorted(QUEUES)


def test_a_worker_of_one_pool_keeps_its_threads() -> None:
    """The Procfile's processes: each consumes one pool's queues with the threads it names."""
    for queues in (
        frozenset({EVENT_STREAMS_QUEUE}),
        frozenset({APP_WEBHOOKS_QUEUE}),
        frozenset({TRANSCRIPT_QUEUE, TOOL_RUNS_QUEUE}),
    ):
        assert worker_pools(queues, 4) == (Pool(queues, 4),)


def test_two_delivery_queues_without_a_call_s_are_two_pools_of_the_threads_asked_for() -> None:
    """A dead broker holds up none of the webhooks, in a process of both deliveries too."""
    assert worker_pools(frozenset({APP_WEBHOOKS_QUEUE, EVENT_STREAMS_QUEUE}), 2) == (
        Pool(frozenset({APP_WEBHOOKS_QUEUE}), 2),
        Pool(frozenset({EVENT_STREAMS_QUEUE}), 2),
    )


def test_a_delivery_queue_beside_one_call_queue_is_a_pool_of_its_own() -> None:
    pools = worker_pools(frozenset({TRANSCRIPT_QUEUE, EVENT_STREAMS_QUEUE}), 1)
    assert pools == (
        Pool(frozenset({TRANSCRIPT_QUEUE}), 1),
        Pool(frozenset({EVENT_STREAMS_QUEUE}), DELIVERY_POOL_THREADS),
    )
