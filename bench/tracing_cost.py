"""What tracing costs per event, in process: the gateway's span of a numbered event and the
worker's span of its delivery, with tracing off (no tracer: one `is None` check) and on (the
SDK, a batch processor and the OTLP/HTTP exporter, to the endpoint in the environment, else to
a closed port: the export happens off the measured thread either way).

An end-to-end latency figure cannot show a cost of microseconds; this shows its size. Run as
its own process (`python -m bench.tracing_cost`, one JSON object on stdout): installing the SDK
is for the life of a process.
"""

from __future__ import annotations

import json
import os
from typing import Any

from bench.metrics_cost import per_call_us

SESSION_ID = "3f2a9c0e7b1d4e6f8a5b2c9d0e1f3a4b"
# Fewer than the metrics' repetitions: each one is a span kept for export, and the batch
# processor's queue is made to hold them all (a full queue drops spans, a cheaper path).
REPETITIONS = 2_000


def measure_costs() -> dict[str, Any]:
    """µs per event on each side, off then on."""
    from gateway import tracing as gateway_tracing
    from pipeline.platform.envelope import EventEnvelope
    from switchboard.tracing import init_tracing
    from workers import tracing as worker_tracing

    event = {"type": "input_audio_buffer.speech_started", "item_id": "item_1", "audio_start_ms": 10}
    envelope = EventEnvelope(
        session_id=SESSION_ID, seq=3, generation=1, gateway_id="gw-bench", received_at=0.0, event=event
    )

    def gateway_side() -> object:
        # What ActionCarrier does per Submit.
        call = sockets_trace[0]
        return None if call is None else call.event(event)

    def worker_side() -> object:
        with worker_tracing.applying([traced_envelope[0]]) as spans:
            return spans

    def timed() -> dict[str, float]:
        return {
            "gateway_event_us": per_call_us(gateway_side, REPETITIONS),
            "worker_event_us": per_call_us(worker_side, REPETITIONS),
        }

    sockets_trace: list[gateway_tracing.CallTrace | None] = [None]
    traced_envelope = [envelope]
    figures: dict[str, Any] = {"off": timed()}
    os.environ.setdefault("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(4 * 5 * REPETITIONS)
    provider = init_tracing("bench", os.environ)
    assert provider is not None
    gateway_tracing.use(provider.get_tracer("bench"), with_content=False)
    worker_tracing.use(provider.get_tracer("bench"))
    sockets_trace[0] = gateway_tracing.call_opened(SESSION_ID, 1, "gpt-realtime")
    assert sockets_trace[0] is not None
    traced_envelope[0] = envelope.model_copy(update={"traceparent": sockets_trace[0].event(event)})
    figures["on"] = timed()
    provider.shutdown()
    return figures


if __name__ == "__main__":
    print(json.dumps(measure_costs()))
