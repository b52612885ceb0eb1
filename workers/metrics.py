"""A worker's metrics, in prometheus-client's multi-process mode: every worker process on a
machine writes to one directory (SWITCHBOARD_METRICS_DIR, set before prometheus_client is
first imported), and each serves the sum over all of them on `/metrics` (loopback).

What Dramatiq's own Prometheus middleware counts (messages, errors, retries, dead-lettered
messages, durations per actor and queue) is its: installed beside these, not counted again.
"""

from __future__ import annotations

import logging
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.cost import ModelPrices, cost_usd, usage_added

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from models.sessions import Applied
    from pipeline.catalog import ToolOutcome
    from pipeline.envelope import EventEnvelope

# Seconds from a millisecond to a minute: a control is a few ms away, a stalled one seconds.
LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TOOL_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

_metrics: _Metrics | None = None
# Off (SWITCHBOARD_METRICS=false): nothing is counted, so the bench can measure what counting costs.
_enabled = False


def use_directory(directory: Path) -> None:
    """Count from now on, in multi-process mode (before prometheus_client is imported)."""
    global _enabled
    _enabled = True
    directory.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    # Dramatiq's middleware reads its own variable for the same directory.
    os.environ["dramatiq_prom_db"] = str(directory)  # noqa: SIM112 (Dramatiq reads this lower-case name)


class _Metrics:
    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.event_to_control = Histogram(
            "switchboard_event_to_control_seconds",
            "From the gateway receiving a provider event to a worker publishing the controls it caused.",
            buckets=LATENCY_BUCKETS,
        )
        self.turn_latency = Histogram(
            "switchboard_turn_latency_seconds",
            "From the caller's final transcript reaching the gateway to the response.create it caused.",
            buckets=LATENCY_BUCKETS,
        )
        self.events = Counter("switchboard_events_total", "Events logged, by disposition.", ["disposition"])
        self.incidents = Counter(
            "switchboard_incidents_total", "Incidents recorded, by code and severity.", ["code", "severity"]
        )
        self.tools = Histogram(
            "switchboard_tool_seconds",
            "Tool bodies run, by tool and outcome.",
            ["tool", "status"],
            buckets=TOOL_BUCKETS,
        )
        self.compactions = Counter(
            "switchboard_compactions_total", "Compactions finished, by outcome.", ["status"]
        )
        self.tokens = Counter(
            "switchboard_tokens_total",
            "Provider-reported tokens of the responses applied, by kind.",
            ["kind"],
        )
        self.cost = Counter("switchboard_cost_usd_total", "What the responses applied cost, in dollars.")
        self.calls_placed = Counter(
            "switchboard_calls_placed_total", "Calls Switchboard placed that ended, by outcome.", ["outcome"]
        )
        # Counted by the dialer each time it looks (the most recent look wins across processes).
        self.calls_going_out = Gauge(
            "switchboard_outbound_calls_in_progress",
            "Calls going out not yet over, as the dialer last counted them.",
            multiprocess_mode="livemostrecent",
        )
        self.contacts_waiting = Gauge(
            "switchboard_campaign_contacts_waiting",
            "Campaign contacts waiting to be dialled (a retry or their window to come), by campaign.",
            ["campaign"],
            multiprocess_mode="livemostrecent",
        )


def metrics() -> _Metrics:
    global _metrics
    if _metrics is None:
        _metrics = _Metrics()
    return _metrics


def delivered(envelope: EventEnvelope, applied: Applied, published_at: float) -> None:
    """What one delivered event did: its dispositions and its controls' latency."""
    if not _enabled:
        return
    measured = metrics()
    for _seq, disposition in applied.dispositions:
        measured.events.labels(disposition).inc()
    prefix = f"ctl_{envelope.seq}_"
    controls = [item for item in applied.outbound if item.kind == "control" and item.id.startswith(prefix)]
    if controls:
        waited = max(published_at - envelope.received_at, 0.0)
        measured.event_to_control.observe(waited)
        kind = envelope.event.get("type")
        if kind == "conversation.item.input_audio_transcription.completed" and any(
            getattr(item, "control", {}).get("type") == "response.create" for item in controls
        ):
            measured.turn_latency.observe(waited)


def recorded(applied: Applied, prices: ModelPrices | None = None) -> None:
    """The incidents, finished compactions, tokens and cost of any locked transaction."""
    if not _enabled:
        return
    measured = metrics()
    before, after = applied.usage_before, applied.usage_after
    added = usage_added(before, after) if before is not None and after is not None else None
    if added is not None:
        for kind in ("input", "output"):
            tokens = getattr(added, f"{kind}_tokens")
            if tokens > 0:
                measured.tokens.labels(kind).inc(tokens)
        spent = cost_usd(added, prices)
        if spent:
            measured.cost.inc(spent)
    for incident in applied.incidents:
        measured.incidents.labels(incident.code, incident.severity).inc()
    for status in applied.compactions_finished:
        measured.compactions.labels(status).inc()
    for outcome in applied.calls_ended:
        measured.calls_placed.labels(outcome).inc()


def dialer_looked(campaign_id: str, waiting: int, going_out: int) -> None:
    """What one look of a campaign's dialer counted: its contacts waiting, the calls going out."""
    if not _enabled:
        return
    measured = metrics()
    measured.contacts_waiting.labels(campaign_id).set(waiting)
    measured.calls_going_out.set(going_out)


def tool_ran(name: str, outcome: ToolOutcome) -> None:
    if not _enabled:
        return
    metrics().tools.labels(name, outcome.status).observe(outcome.elapsed_ms / 1000)


def count_messages(broker: Any) -> None:
    """Dramatiq's own Prometheus middleware, for what it counts (in the same directory)."""
    from dramatiq.middleware import prometheus

    # It reads its directory when first imported: set it again, in case that was earlier.
    prometheus.DB_PATH = os.environ.get("PROMETHEUS_MULTIPROC_DIR", prometheus.DB_PATH)
    middleware = prometheus.Prometheus()
    # Its after_process_boot runs with everyone's, when `switchboard worker` emits process_boot.
    broker.add_middleware(middleware)


def serve(host: str, port: int) -> int:
    """Serve the machine's workers' metrics (summed over the directory) on `/metrics`; answers
    the port (0 picks a free one)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            try:
                registry = CollectorRegistry()
                MultiProcessCollector(registry)
                body = generate_latest(registry)
            except Exception:  # a scrape fails with a status and the reason in the log
                logger.exception("collecting the workers' metrics failed")
                self.send_error(500, "collecting the metrics failed")
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return int(server.server_address[1])


def process_exited() -> None:
    """This worker stops: its live gauges stop counting (its counters stay in the sums)."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), directory)
