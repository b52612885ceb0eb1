"""What counting costs a worker per event, in process: the calls a worker makes with metrics on
and skips with them off, each timed alone over many repetitions.

An end-to-end latency figure (a few ms, ±1 ms between runs on this machine) cannot show a cost
of microseconds; this shows its size. Run as its own process (`python -m bench.metrics_cost`,
one JSON object on stdout): prometheus-client takes its multi-process directory from the
environment when it is first imported, so the measuring process must set it first, as a worker
does.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPETITIONS = 20_000
SESSION_ID = "00000000-0000-0000-0000-000000000000"


def per_call_us(call: Callable[[], object], repetitions: int = REPETITIONS) -> float:
    """The median of five timings of `repetitions` calls, in µs a call: the median, because a
    run on this shared machine can lose the CPU in the middle of one timing."""
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repetitions):
            call()
        timings.append((time.perf_counter() - started) * 1e6 / repetitions)
    return round(sorted(timings)[2], 2)


def measure_costs() -> dict[str, Any]:
    """µs per call of what a worker does for metrics per message: Switchboard's `delivered`
    for a caller's final transcript that caused a response.create (two histograms and a
    counter), for an event that caused no control (a counter), `recorded` with nothing to
    record, and the message middleware (Dramatiq's metrics) around one message; and
    `delivered` with metrics off (a flag test), for scale."""
    import dramatiq

    from models.applied import Applied
    from pipeline.platform.envelope import EventEnvelope, SendControl
    from workers import metrics

    # The middleware's hooks take a broker and do not use it.
    broker = dramatiq.get_broker()
    now = time.time()
    final = EventEnvelope(
        session_id=SESSION_ID,
        seq=7,
        generation=1,
        gateway_id="gw-bench",
        received_at=now,
        event={"type": "conversation.item.input_audio_transcription.completed", "transcript": "Hello."},
    )
    answered = Applied(
        to_gateway=[SendControl(id="ctl_7_0", control={"type": "response.create"})],
        dispositions=[(7, "applied")],
    )
    # A durable event that causes no control, as most of a turn's do.
    created = final.model_copy(update={"seq": 8, "event": {"type": "response.created"}})
    logged = Applied(dispositions=[(8, "applied")])

    middleware = metrics.MessageMetrics()
    message = dramatiq.MessageProxy(
        dramatiq.Message(queue_name="transcript", actor_name="deliver", args=(), kwargs={}, options={})
    )

    def around_message() -> None:
        middleware.before_process_message(broker, message)
        middleware.after_process_message(broker, message)

    costs = {
        "delivered_turn_us": per_call_us(lambda: metrics.delivered(final, answered, now)),
        "delivered_event_us": per_call_us(lambda: metrics.delivered(created, logged, now)),
        "recorded_us": per_call_us(lambda: metrics.recorded(logged)),
        "dramatiq_middleware_us": per_call_us(around_message),
    }
    # Off, the worker never calls use_directory: its module flag stays down.
    metrics._enabled = False
    costs["delivered_off_us"] = per_call_us(lambda: metrics.delivered(final, answered, now))
    return costs


def main() -> None:
    from workers import metrics

    directory = Path(tempfile.mkdtemp(prefix="switchboard-metrics-cost-"))
    try:
        metrics.use_directory(directory)
        print(json.dumps(measure_costs()))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
