"""A worker's metrics, in prometheus-client's multi-process mode: every worker process on a
machine writes to one directory (SWITCHBOARD_METRICS_DIR, set before prometheus_client is
first imported; its roll of live members is `workers.metrics_directory`), and the one that
holds the machine's metrics port serves the sum over all of them on `/metrics` (loopback),
with each live worker process's CPU and memory.

Messages are counted by `MessageMetrics`, under the names of Dramatiq's own Prometheus
middleware but with durations in seconds (Dramatiq's is in milliseconds, a unit Prometheus
rejects) and its gauges summed over live processes only.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dramatiq

from pipeline.platform.cost import ModelPrices, cost_usd, usage_added
from workers import metrics_directory

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

    from models.applied import Applied
    from pipeline.call.catalog import ToolOutcome
    from pipeline.platform.envelope import EventEnvelope

# Seconds from a millisecond to a minute: a control is a few ms away, a stalled one seconds.
LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TOOL_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Dramatiq's own buckets, in seconds: from a few ms (an event) to its 10-minute time limit.
MESSAGE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0, 600.0, 900.0,
)  # fmt: skip
# A worker that found the machine's metrics port taken tries it again this often, so the sum
# is served again soon after the worker holding it stops.
STANDBY_RETRY_S = 5.0

_metrics: _Metrics | None = None
_building = threading.Lock()
# Off (SWITCHBOARD_METRICS=false): nothing is counted, so the bench can measure what counting costs.
_enabled = False


def use_directory(directory: Path) -> None:
    """Count from now on, in multi-process mode (before prometheus_client is imported), as a
    live member of the machine's directory."""
    global _enabled
    _enabled = True
    directory.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    metrics_directory.join(directory)


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
            "Provider-reported tokens of the responses applied, by kind, the model that served them and"
            " the agent the call ran ('' for an inline session).",
            ["kind", "model", "agent"],
        )
        self.cost = Counter(
            "switchboard_cost_usd_total",
            "What the responses applied cost, in dollars, by model and agent ('' for an inline session).",
            ["model", "agent"],
        )
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
        # Dramatiq's names and labels, so its dashboards read them.
        labels = ["queue_name", "actor_name"]
        self.messages = Counter("dramatiq_messages_total", "The total number of messages processed.", labels)
        self.message_errors = Counter(
            "dramatiq_message_errors_total", "The total number of errored messages.", labels
        )
        self.message_retries = Counter(
            "dramatiq_message_retries_total", "The total number of retried messages.", labels
        )
        self.message_rejects = Counter(
            "dramatiq_message_rejects_total", "The total number of dead-lettered messages.", labels
        )
        self.messages_in_progress = Gauge(
            "dramatiq_messages_inprogress",
            "The number of messages in progress.",
            labels,
            multiprocess_mode="livesum",
        )
        self.delayed_messages = Gauge(
            "dramatiq_delayed_messages_inprogress",
            "The number of delayed messages held in memory until their time.",
            labels,
            multiprocess_mode="livesum",
        )
        self.message_duration = Histogram(
            "dramatiq_message_duration_seconds",
            "The time spent processing messages.",
            labels,
            buckets=MESSAGE_BUCKETS,
        )


def metrics() -> _Metrics:
    global _metrics
    if _metrics is None:
        # A new worker's threads meet here at once; two of them building the set would register
        # every series twice (prometheus_client raises DuplicateTimeseries on the second).
        with _building:
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
    controls = [item for item in applied.to_gateway if item.kind == "control" and item.id.startswith(prefix)]
    if controls:
        waited = max(published_at - envelope.received_at, 0.0)
        measured.event_to_control.observe(waited)
        kind = envelope.event.get("type")
        if kind == "conversation.item.input_audio_transcription.completed" and any(
            getattr(item, "control", {}).get("type") == "response.create" for item in controls
        ):
            measured.turn_latency.observe(waited)


def recorded(applied: Applied, prices: ModelPrices | None = None, model: str = "", agent: str = "") -> None:
    """The incidents, finished compactions, tokens and cost (by the `model` that served the
    session) of any locked transaction."""
    if not _enabled:
        return
    measured = metrics()
    before, after = applied.usage_before, applied.usage_after
    added = usage_added(before, after) if before is not None and after is not None else None
    if added is not None:
        for kind in ("input", "output"):
            tokens = getattr(added, f"{kind}_tokens")
            if tokens > 0:
                measured.tokens.labels(kind, model, agent).inc(tokens)
        spent = cost_usd(added, prices)
        if spent:
            measured.cost.labels(model, agent).inc(spent)
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


class MessageMetrics(dramatiq.Middleware):
    """What Dramatiq's Prometheus middleware counts, with durations in seconds."""

    def __init__(self) -> None:
        self._started: dict[str, float] = {}
        # Held by this process's delay-queue consumer until their time, when it enqueues them.
        self._delayed: set[str] = set()

    def after_nack(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        metrics().message_rejects.labels(message.queue_name, message.actor_name).inc()

    def after_enqueue(
        self, broker: dramatiq.Broker, message: dramatiq.Message[Any], delay: int | None
    ) -> None:
        if message.message_id in self._delayed:
            # The delay-queue consumer moves a message whose time came onto its queue (a retry
            # was counted when Retries put it on the delay queue).
            self._delayed.discard(message.message_id)
            metrics().delayed_messages.labels(_delay_queue_of(message), message.actor_name).dec()
        elif "retries" in message.options:
            metrics().message_retries.labels(message.queue_name, message.actor_name).inc()

    def before_delay_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        self._delayed.add(message.message_id)
        metrics().delayed_messages.labels(message.queue_name, message.actor_name).inc()

    def before_process_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        metrics().messages_in_progress.labels(message.queue_name, message.actor_name).inc()
        self._started[message.message_id] = time.perf_counter()

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: dramatiq.MessageProxy,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        measured = metrics()
        labels = (message.queue_name, message.actor_name)
        started = self._started.pop(message.message_id, None)
        if started is not None:
            measured.message_duration.labels(*labels).observe(time.perf_counter() - started)
            measured.messages_in_progress.labels(*labels).dec()
        measured.messages.labels(*labels).inc()
        if exception is not None:
            measured.message_errors.labels(*labels).inc()

    def after_skip_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        self.after_process_message(broker, message)


def _delay_queue_of(message: dramatiq.Message[Any]) -> str:
    # Dramatiq names a queue's delay queue `<queue>.DQ`.
    return f"{message.queue_name}.DQ"


def count_messages(broker: dramatiq.Broker) -> None:
    """Count the messages this process takes (in the machine's directory)."""
    broker.add_middleware(MessageMetrics())


def serve(host: str, port: int) -> int | None:
    """Serve the machine's workers' metrics (summed over the directory) on `/metrics`; answers
    the port (0 picks a free one), or None when `port` is taken: then the worker that holds it
    serves the same sum, and this one takes the port over if that one stops."""
    from prometheus_client import CONTENT_TYPE_LATEST

    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            try:
                body = scrape(directory)
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

    def start(server: ThreadingHTTPServer) -> int:
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        return int(server.server_address[1])

    try:
        return start(ThreadingHTTPServer((host, port), Handler))
    except OSError as exc:
        if port == 0 or exc.errno != errno.EADDRINUSE:
            raise
    logger.warning(
        "metrics port %s:%d is taken (another worker of this machine serves the sum); trying it every %.0f s",
        host,
        port,
        STANDBY_RETRY_S,
    )

    def stand_by() -> None:
        while True:
            time.sleep(STANDBY_RETRY_S)
            try:
                server = ThreadingHTTPServer((host, port), Handler)
            except OSError:
                continue
            start(server)
            logger.warning("metrics now served on %s:%d", host, port)
            return

    threading.Thread(target=stand_by, name="metrics-standby", daemon=True).start()
    return None


def scrape(directory: Path) -> bytes:
    """The text format of the sum over the directory, and each live worker's CPU and memory;
    the dead are marked dead first."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    with metrics_directory.group_locked(directory):
        alive = metrics_directory.running_pids(directory)
        metrics_directory.forget_dead(directory, alive)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(directory))
        registry.register(_worker_processes(alive))
        return generate_latest(registry)


def _worker_processes(pids: set[int]) -> Collector:
    """prometheus-client's process metrics (`process_cpu_seconds_total`,
    `process_resident_memory_bytes`, …) of each live worker process, by `pid`: a process's
    own collector sees only itself, and multi-process mode does not sum them."""
    from prometheus_client import ProcessCollector
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import Collector

    class WorkerProcesses(Collector):
        def collect(self) -> Iterator[Metric]:
            merged: dict[str, Metric] = {}
            for pid in sorted(pids):
                collector = ProcessCollector(pid=lambda pid=pid: pid, registry=None)  # type: ignore[misc]
                for family in collector.collect():
                    into = merged.setdefault(
                        family.name, Metric(family.name, family.documentation, family.type)
                    )
                    for sample in family.samples:
                        into.add_sample(sample.name, {**sample.labels, "pid": str(pid)}, sample.value)
            yield from merged.values()

    return WorkerProcesses()


def process_exited() -> None:
    """This worker stops: its live gauges go now (its counters stay in the sums)."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        metrics_directory.leave(Path(directory))
