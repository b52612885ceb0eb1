"""A Dramatiq worker whose threads each take a message and process it themselves.

Dramatiq's ``Worker`` has one consumer thread per queue that takes messages from Redis and
hands them, through a priority queue, to a shared pool of worker threads. Every message thus
wakes two threads, and the hand-off and the switch between them cost more than the message's
own Python on a two-core machine (the profile in docs/benchmarks.md: thread switches were the
largest part of the worker's kernel time). Here each queue has *lanes* instead: a lane is a
consumer thread that processes what it takes, with the same middleware, retries, time limits
and acks as Dramatiq's worker threads, and takes the next message only when it is done (a
prefetch of one). The queue's wake tokens (``workers.broker``) wake as many idle lanes as there
are messages waiting, so lanes of one queue share its work the way worker threads did.

Delay queues keep one consumer each, as in Dramatiq: their messages wait in memory until due
and are then enqueued on the queue itself, where a lane takes them.
"""

from __future__ import annotations

import dramatiq
from dramatiq.worker import ConsumerThread, WorkerThread, _WorkQueueItem

from pipeline.names import lane_counts


class _ProcessNow:
    """Stands where Dramatiq's consumer thread puts a message for the worker threads: the
    message is processed at once, on the consumer's own thread. Dramatiq's own code decides
    what reaches ``put`` (etas and unknown actors are handled before it), so a lane handles
    every message exactly as Dramatiq's worker would."""

    processor: WorkerThread

    def put(self, item: _WorkQueueItem) -> None:
        self.processor.process_message(item.message)

    def task_done(self) -> None:
        """Dramatiq's worker thread reports each processed message to its queue; nothing waits
        on this one."""


class Lane(ConsumerThread):
    """One consumer of a queue that processes each message it takes, then takes the next."""

    def __init__(self, *, broker: dramatiq.Broker, queue_name: str, prefetch: int, worker_timeout: int):
        # Dramatiq's worker thread, never started: its process_message (middleware, actor,
        # exceptions, then this consumer's ack or nack) runs on the lane's thread.
        process_now = _ProcessNow()
        self.processor = process_now.processor = WorkerThread(
            broker=broker,
            consumers={queue_name: self},
            work_queue=process_now,  # type: ignore[arg-type]
            worker_timeout=worker_timeout,
        )
        super().__init__(
            broker=broker,
            queue_name=queue_name,
            prefetch=prefetch,
            work_queue=process_now,  # type: ignore[arg-type]
            worker_timeout=worker_timeout,
        )
        self.name = f"lane-{queue_name}"

    def run(self) -> None:
        # The hooks a worker thread's middleware expects (per-thread connections warmed and
        # closed), on the thread that will process messages.
        self.broker.emit_after("worker_thread_boot", self.processor)
        try:
            super().run()
        finally:
            self.broker.emit_before("worker_thread_shutdown", self.processor)


class LaneWorker(dramatiq.Worker):
    """``dramatiq.Worker`` with lanes instead of a consumer and a pool per queue.

    ``lanes`` threads in all, shared by the consumed queues by their weight (at least one
    each; `pipeline.names.lane_counts`); each delay queue has one consumer besides.
    """

    def __init__(
        self,
        broker: dramatiq.Broker,
        *,
        queues: set[str] | None = None,
        lanes: int = 8,
        worker_timeout: int = 1_000,
    ) -> None:
        # No worker threads: the lanes process what they take.
        super().__init__(broker, queues=queues, worker_timeout=worker_timeout, worker_threads=0)
        self.lanes = lanes
        self.delay_prefetch = min(lanes * 1000, 65535)

    def lanes_of(self, queue_name: str) -> int:
        served = sorted(self.consumer_whitelist or self.broker.get_declared_queues())
        return lane_counts(served, self.lanes).get(queue_name, 1)

    def _add_consumer(self, queue_name: str, *, delay: bool = False) -> None:
        if queue_name in self.consumers:
            return
        if self.consumer_whitelist and dramatiq.common.q_name(queue_name) not in self.consumer_whitelist:
            return
        count = 1 if delay else self.lanes_of(queue_name)
        for index in range(count):
            lane = Lane(
                broker=self.broker,
                queue_name=queue_name,
                prefetch=self.delay_prefetch if delay else 1,
                worker_timeout=self.worker_timeout,
            )
            # Worker.stop, pause and join go through this dict; the first lane holds the
            # queue's own name, which is also what keeps a queue from being added twice.
            self.consumers[queue_name if index == 0 else f"{queue_name}#{index}"] = lane
            lane.start()
