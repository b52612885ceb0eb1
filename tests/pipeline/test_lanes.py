"""How a worker process shares out its threads (pipeline.names.worker_lanes): the deliveries to
apps never take a thread a call's queues need."""

from __future__ import annotations

from pipeline.names import (
    APP_WEBHOOKS_QUEUE,
    DELIVERY_LANE_THREADS,
    EVENT_STREAMS_QUEUE,
    QUEUES,
    TOOL_RUNS_QUEUE,
    TRANSCRIPT_QUEUE,
    Lane,
    worker_lanes,
)


def test_one_worker_on_every_queue_gives_each_delivery_queue_threads_of_its_own() -> None:
    """`switchboard worker` (the README's way): the call's queues keep the threads asked for."""
    lanes = worker_lanes(frozenset(QUEUES), 8)
    calls = frozenset(QUEUES) - {APP_WEBHOOKS_QUEUE, EVENT_STREAMS_QUEUE}
    assert lanes == (
        Lane(calls, 8),
        Lane(frozenset({APP_WEBHOOKS_QUEUE}), DELIVERY_LANE_THREADS),
        Lane(frozenset({EVENT_STREAMS_QUEUE}), DELIVERY_LANE_THREADS),
    )
    # Every queue is consumed, by one lane only.
    assert sorted(queue for lane in lanes for queue in lane.queues) == sorted(QUEUES)


def test_a_worker_of_one_lane_keeps_its_threads() -> None:
    """The Procfile's processes: each consumes one lane's queues with the threads it names."""
    for queues in (
        frozenset({EVENT_STREAMS_QUEUE}),
        frozenset({APP_WEBHOOKS_QUEUE}),
        frozenset({TRANSCRIPT_QUEUE, TOOL_RUNS_QUEUE}),
    ):
        assert worker_lanes(queues, 4) == (Lane(queues, 4),)


def test_two_delivery_queues_without_a_call_s_are_two_lanes_of_the_threads_asked_for() -> None:
    """A dead broker holds up none of the webhooks, in a process of both deliveries too."""
    assert worker_lanes(frozenset({APP_WEBHOOKS_QUEUE, EVENT_STREAMS_QUEUE}), 2) == (
        Lane(frozenset({APP_WEBHOOKS_QUEUE}), 2),
        Lane(frozenset({EVENT_STREAMS_QUEUE}), 2),
    )


def test_a_delivery_queue_beside_one_call_queue_is_a_lane_of_its_own() -> None:
    lanes = worker_lanes(frozenset({TRANSCRIPT_QUEUE, EVENT_STREAMS_QUEUE}), 1)
    assert lanes == (
        Lane(frozenset({TRANSCRIPT_QUEUE}), 1),
        Lane(frozenset({EVENT_STREAMS_QUEUE}), DELIVERY_LANE_THREADS),
    )
