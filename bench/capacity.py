"""`switchboard bench capacity`: how many calls, at what latency, for what CPU and memory.

Full simulated calls with a realistic event mix — the caller speaks about a second a turn, the
model's answer streams its transcript in small deltas, and every other turn calls a tool — at
10, 50, 100, 200, … concurrent calls, until the turn latency's p99 passes 50 ms. For each level:
event → control latency (the caller's final transcript leaving the simulator → the
`response.create` arriving back), durable events per second, events lost (every durable event
the simulator sent must be in its session's log), and CPU seconds and peak RSS per process.
Then: how many calls one gateway process holds at once, and its memory per call.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import psutil

from bench.latency import _call_log, _call_status, _put_script, measure_floor, percentiles
from pipeline.platform.timestamps import epoch_seconds
from pipeline.realtime.events import DURABLE_TYPES
from switchboard.client import Client
from switchboard.stack import Process, Stack

LEVELS = (10, 50, 100, 200, 300, 400, 800)
P99_LIMIT_MS = 50.0
# The targets are read at 50 and 200 calls, so the sweep always runs this far; past it, a level
# runs only while the one before held its p99 within P99_LIMIT_MS.
ALWAYS_UP_TO = 200
TURNS = 4
MINIMUM_SAMPLES = 200
CALL_TIMEOUT_S = 240.0
HELD_CALLS = 500
# Calls start evenly over about one turn of the mix, so that at any moment they are at every
# point of a turn, as independent calls are. Calls started together stay in lock step (the
# same script, the same pace) and every answer streams at once: a burst of 100 × 25 frames a
# second, then a lull, which measures a synchronised spike rather than 100 concurrent calls.
START_SPREAD_S = 4.0
# The held calls: each pauses this long before a caller line, starts within HELD_SPREAD_S of
# the first, and lasts about HELD_TURNS × (pause + a turn) — longer than the spread.
HELD_TURNS = 4
HELD_PAUSE_MS = 20_000
HELD_SPREAD_S = 60.0
# Throughput with one and two worker processes is compared at this many concurrent calls.
SCALING_CALLS = 100


def mix_script(turns: int = TURNS) -> dict[str, Any]:
    """About 40 transcript deltas a turn (caller and answer), a tool call every other turn."""
    model: list[dict[str, Any]] = []
    for n in range(turns):
        if n % 2:
            model.append({"function_call": {"name": "echo", "arguments": {"text": f"order {4400 + n}"}}})
        model.append({"say": f"Order {4400 + n} left the warehouse on Monday and should arrive by Friday."})
    return {
        "name": "bench-mix",
        "timing": {
            "delta_interval_ms": 40,
            "chars_per_delta": 4,
            "speech_ms": 1_000,
            "response_wait_ms": 60_000,
        },
        "caller": [
            {"say": f"Hello, could you tell me where order {4400 + n} is right now?", "after_ms": 800}
            for n in range(turns)
        ]
        + [{"hangup": True, "after_ms": 300}],
        "model": model,
    }


SEGMENTS = ("simulator_to_gateway", "gateway_to_worker", "worker_to_applied", "applied_to_control")


def answer_segments_ms(call: dict[str, Any], log: list[dict[str, Any]]) -> list[tuple[float, ...]]:
    """Per caller final, where its time went (SEGMENTS): simulator → gateway (the gateway's
    received_at); gateway → worker (numbering, the queue, the fetch, the thread hand-off: the
    log's taken_at, the worker's transaction start); worker → applied (the row lock's wait and
    the apply: applied_at); applied → the answer's response.create at the simulator (publish,
    commit, control queue, socket)."""
    logged = {entry["payload"].get("event_id"): entry for entry in log}
    creates = sorted(c["t"] for c in call["controls"] if c["control"]["type"] == "response.create")
    segments: list[tuple[float, ...]] = []
    for event in call["events"]:
        if not event["event"]["type"].endswith("transcription.completed"):
            continue
        entry = logged.get(event["event"].get("event_id"))
        answer = next((t for t in creates if t >= event["t"]), None)
        if entry is None or answer is None or None in (entry.get("taken_at"), entry.get("applied_at")):
            continue
        # The log writes its times in RFC 3339; the simulator's are epoch seconds.
        received, taken, applied = (
            epoch_seconds(entry[m]) for m in ("received_at", "taken_at", "applied_at")
        )
        segments.append(
            (
                (received - event["t"]) * 1000,
                (taken - received) * 1000,
                (applied - taken) * 1000,
                (answer - applied) * 1000,
            )
        )
    return segments


def answer_latencies_ms(call: dict[str, Any]) -> list[float]:
    """Per caller final, the time to the first response.create after it (a tool turn has a
    second one, the continuation, which is not the answer to the caller)."""
    finals = [e["t"] for e in call["events"] if e["event"]["type"].endswith("transcription.completed")]
    creates = sorted(c["t"] for c in call["controls"] if c["control"]["type"] == "response.create")
    latencies = []
    for final in finals:
        after = next((t for t in creates if t >= final), None)
        if after is not None:
            latencies.append((after - final) * 1000)
    return latencies


@dataclass
class Usage:
    """CPU seconds and peak RSS of each process of a stack while something runs."""

    processes: dict[str, psutil.Process]
    cpu_start: dict[str, float] = field(default_factory=dict)
    peak_rss: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def of(cls, stack: Stack) -> Usage:
        named: list[Process] = [p for p in (stack.gateway, stack.simulator, *stack.workers) if p is not None]
        return cls({p.name: psutil.Process(p.popen.pid) for p in named})

    def __enter__(self) -> Usage:
        for name, process in self.processes.items():
            times = process.cpu_times()
            self.cpu_start[name] = times.user + times.system
            self.peak_rss[name] = process.memory_info().rss
        threading.Thread(target=self._sample, daemon=True).start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            for name, process in self.processes.items():
                try:
                    self.peak_rss[name] = max(self.peak_rss[name], process.memory_info().rss)
                except psutil.Error:
                    pass

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.cpu_s = {}
        for name, process in self.processes.items():
            times = process.cpu_times()
            self.cpu_s[name] = round(times.user + times.system - self.cpu_start[name], 2)

    def summary(self) -> dict[str, Any]:
        return {
            name: {"cpu_s": self.cpu_s.get(name), "peak_rss_mb": round(self.peak_rss[name] / 2**20, 1)}
            for name in self.processes
        }


def turns_for(calls: int) -> int:
    """Enough turns that every level has about 200 samples: a p99 of 40 samples is their
    maximum, one stall."""
    return max(TURNS, MINIMUM_SAMPLES // calls)


def run_level(
    stack: Stack,
    calls: int,
    *,
    script: dict[str, Any] | None = None,
    spread_s: float = START_SPREAD_S,
    poll_s: float = 2.0,
    probe_floor: bool = True,
    calls_done: Any = None,
) -> dict[str, Any]:
    """`calls` concurrent calls of the mix (or of `script`), started evenly over `spread_s`:
    latency, events per second, loss, where a turn's time goes, CPU and RSS per process, the
    most calls live at once, and the floor measured while they run."""
    _put_script(stack, script or mix_script(turns_for(calls)))
    client = Client(stack.api_url, stack.api_token)
    lost = [0]
    durable = [0]
    segments: list[tuple[float, ...]] = []
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    def one_call(index: int) -> tuple[str, str]:
        time.sleep(index * (spread_s / calls))
        session = client.create_session("You are a benchmark agent.", tools=["echo"])
        call_id = client.connect(session["id"])["call_id"]
        deadline = time.monotonic() + CALL_TIMEOUT_S
        # Looking every few seconds keeps the bench's own HTTP requests (a new connection
        # each) from taking the simulator's CPU away from the calls.
        while _call_status(stack, call_id) != "ended" and time.monotonic() < deadline:
            time.sleep(poll_s)
        return str(session["id"]), str(call_id)

    def account(session_id: str, call_id: str) -> list[float]:
        client.wait_for_status(session_id, timeout_s=30)
        log = _call_log(stack, call_id)
        record = client.session(session_id, events=True)
        logged = {event["payload"].get("event_id") for event in record["log"]}
        sent = [e for e in log["events"] if e["event"]["type"] in DURABLE_TYPES]
        with lock:
            segments.extend(answer_segments_ms(log, record["log"]))
            lost[0] += sum(e["event"]["event_id"] not in logged for e in sent)
            durable[0] += len(record["log"])
            if log["events"]:
                spans.append((log["events"][0]["t"], log["events"][-1]["t"]))
        return answer_latencies_ms(log)

    live = LiveCalls(stack)
    floor: dict[str, Any] = {}
    prober = threading.Thread(target=_probe_floor, args=(stack, spread_s + 2.0, floor), daemon=True)
    with live, Usage.of(stack) as usage, ThreadPoolExecutor(max_workers=calls) as pool:
        if probe_floor:
            prober.start()
        placed = list(pool.map(one_call, range(calls)))
    if probe_floor:
        prober.join(30)
    if calls_done is not None:
        # The profiler stops here: what follows reads every record, which is not the load.
        calls_done()
    # The records are read once every call has ended: reading them costs the workers (the
    # full event log of each session) and is not part of the load being measured.
    with ThreadPoolExecutor(max_workers=8) as pool:
        latencies = [latency for call in pool.map(lambda p: account(*p), placed) for latency in call]
    seconds = max(end for _, end in spans) - min(start for start, _ in spans)
    processes = usage.summary()
    for figures in processes.values():
        # CPU per durable event: steadier across runs on a shared machine than latency is.
        figures["cpu_ms_per_event"] = round((figures["cpu_s"] or 0) * 1000 / max(durable[0], 1), 2)
    return {
        "calls": calls,
        "turns": turns_for(calls) if script is None else None,
        **percentiles(latencies),
        "durable_events": durable[0],
        "durable_events_per_s": round(durable[0] / seconds, 1),
        "lost_events": lost[0],
        "most_live_at_once": live.most,
        # Where a turn's time goes (median and p99 of each segment), the profile of every run.
        "segments_ms": {
            name: {
                "p50": percentiles([segment[index] for segment in segments])["p50_ms"],
                "p99": percentiles([segment[index] for segment in segments])["p99_ms"],
            }
            for index, name in enumerate(SEGMENTS)
        },
        "floor_under_load": floor or None,
        "processes": processes,
    }


FLOOR_UNDER_LOAD_SAMPLES = 200


def _probe_floor(stack: Stack, after_s: float, into: dict[str, Any]) -> None:
    """The floor (a Redis round trip, a row-lock transaction) measured while the calls run:
    what the same two cores give a bare round trip under this load."""
    time.sleep(after_s)
    into.update(
        measure_floor(
            stack.env["SWITCHBOARD_DATABASE_URL"],
            stack.env["SWITCHBOARD_REDIS_URL"],
            samples=FLOOR_UNDER_LOAD_SAMPLES,
        )
    )


class LiveCalls:
    """Samples, once a second, how many of the gateway's sessions are live (connected,
    listening or responding): the calls it holds a sideband for at that moment."""

    QUERY = """
    SELECT count(*) FROM sessions
     WHERE owning_gateway = %s AND status IN ('connected', 'listening', 'responding')
    """

    def __init__(self, stack: Stack) -> None:
        self._stack = stack
        self._stop = threading.Event()
        self.most = 0
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> LiveCalls:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _sample(self) -> None:
        import psycopg2

        from models.db import parse_database_url

        connection = psycopg2.connect(**parse_database_url(self._stack.env["SWITCHBOARD_DATABASE_URL"]))
        connection.autocommit = True
        try:
            with connection.cursor() as cursor:
                while not self._stop.wait(1.0):
                    cursor.execute(self.QUERY, (self._stack.gateway_id,))
                    row = cursor.fetchone()
                    self.most = max(self.most, int(row[0]) if row else 0)
        finally:
            connection.close()


def live_script(turns: int = HELD_TURNS) -> dict[str, Any]:
    """A call that stays up about a minute and a half and talks now and then: a pause of
    HELD_PAUSE_MS before each caller line, a spoken answer, a tool on the second turn."""
    script = mix_script(turns)
    for line in script["caller"]:
        if "say" in line:
            line["after_ms"] = HELD_PAUSE_MS
    return script


def held_calls(stack: Stack, calls: int = HELD_CALLS) -> dict[str, Any]:
    """`calls` calls live at once on one gateway, each talking now and then (not quiet): they
    start over HELD_SPREAD_S and each lasts longer than that, so all are up together. Latency,
    loss, the most live at once, and the gateway's memory per held call."""
    assert stack.gateway is not None
    gateway = psutil.Process(stack.gateway.popen.pid)
    before = gateway.memory_info().rss
    level = run_level(
        stack, calls, script=live_script(), spread_s=HELD_SPREAD_S, poll_s=5.0, probe_floor=False
    )
    peak = level["processes"]["gateway"]["peak_rss_mb"] * 2**20
    return {
        **level,
        "gateway_rss_mb_before": round(before / 2**20, 1),
        "gateway_rss_mb_held": round(peak / 2**20, 1),
        "kib_per_call": round((peak - before) / calls / 1024, 1),
    }


def capacity_figures(
    database_url: str, redis_url: str, *, max_calls: int, log: Any, levels: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """Every level, the scaling comparison and the held calls, each on a fresh stack; with
    `levels`, only those levels (a quick comparison of two builds)."""
    from models.db import connect
    from models.migrate import migrate

    migrate(connect(database_url))

    def stack_factory() -> Stack:
        return Stack(database_url, redis_url, simulator_args=("--lenient",))

    return run_capacity(stack_factory, max_calls=max_calls, log=log, levels=levels)


def run_capacity(
    stack_factory: Any, *, max_calls: int, log: Any, levels: tuple[int, ...] | None = None
) -> dict[str, Any]:
    figures: dict[str, Any] = {"levels": []}
    for calls in levels or [level for level in LEVELS if level <= max_calls]:
        log(f"capacity: {calls} concurrent calls of {turns_for(calls)} turns (tools every other turn)")
        with stack_factory() as stack:
            stack.start(workers=1)
            level = run_level(stack, calls)
        figures["levels"].append(level)
        log(
            f"capacity: {calls} calls → p50 {level['p50_ms']} p99 {level['p99_ms']} ms, "
            f"lost {level['lost_events']}"
        )
        if calls >= ALWAYS_UP_TO and level["p99_ms"] is not None and level["p99_ms"] > P99_LIMIT_MS:
            break
    if levels:
        return figures
    figures["scaling"] = []
    for workers in (1, 2):
        log(f"scaling: {SCALING_CALLS} calls with {workers} worker process(es)")
        with stack_factory() as stack:
            stack.start(workers=workers)
            level = run_level(stack, SCALING_CALLS, probe_floor=False)
        figures["scaling"].append({"workers": workers, **level})
    log(f"capacity: {HELD_CALLS} calls held by one gateway, each talking now and then")
    with stack_factory() as stack:
        stack.start(workers=1)
        figures["held"] = held_calls(stack)
    return figures


def render(figures: dict[str, Any]) -> str:
    lines = ["capacity: the realistic mix (~40 deltas a turn, a tool every other turn)", ""]
    lines.append(
        f"{'calls':>6}{'p50':>8}{'p95':>8}{'p99':>8}{'events/s':>10}{'lost':>6}"
        "  cpu ms per durable event (gateway/worker/simulator)"
    )
    for level in figures["levels"]:
        lines.append(
            f"{level['calls']:>6}{level['p50_ms']:>8}{level['p95_ms']:>8}{level['p99_ms']:>8}"
            f"{level['durable_events_per_s']:>10}{level['lost_events']:>6}  {_cpu_split(level)}"
        )
    for level in figures["levels"]:
        parts = level.get("segments_ms")
        if parts:
            lines.append(
                f"{level['calls']:>6} calls, where a turn's time goes (p50 / p99 ms): "
                + ", ".join(
                    f"{name.replace('_', ' ')} {part['p50']} / {part['p99']}" for name, part in parts.items()
                )
            )
        floor = level.get("floor_under_load")
        if floor:
            lines.append(
                f"{level['calls']:>6} calls, the floor meanwhile (p50 / p99 ms): Redis round trip "
                f"{floor['redis_round_trip']['p50_ms']} / {floor['redis_round_trip']['p99_ms']}, "
                f"row-lock transaction {floor['postgres_row_lock_txn']['p50_ms']} / "
                f"{floor['postgres_row_lock_txn']['p99_ms']}"
            )
    for row in figures.get("scaling", []):
        lines.append(
            f"{row['workers']} worker process(es), {row['calls']} calls: "
            f"{row['durable_events_per_s']} durable events/s, "
            f"p50 {row['p50_ms']} p99 {row['p99_ms']} ms, lost {row['lost_events']}, "
            f"cpu ms/event {_cpu_split(row)}"
        )
    held = figures.get("held")
    if held:
        lines += [
            "",
            f"one gateway held {held['most_live_at_once']} of {held['calls']} talking calls live at once "
            f"(p50 {held['p50_ms']} p99 {held['p99_ms']} ms, lost {held['lost_events']}); "
            f"RSS {held['gateway_rss_mb_before']} → {held['gateway_rss_mb_held']} MB "
            f"({held['kib_per_call']} KiB a call)",
        ]
    return "\n".join(lines)


def cpu_ms_per_event(level: dict[str, Any]) -> float:
    """The gateway's and the workers' CPU milliseconds per durable event at a level (the
    simulator, the provider's stand-in, is not Switchboard's)."""
    return round(
        sum(
            figures.get("cpu_ms_per_event") or 0
            for name, figures in level["processes"].items()
            if name.startswith(("gateway", "worker"))
        ),
        2,
    )


def _cpu_split(level: dict[str, Any]) -> str:
    """gateway/worker(s)/simulator CPU milliseconds per durable event."""
    processes = level["processes"]

    def of(prefix: str) -> float:
        return sum(v.get("cpu_ms_per_event") or 0 for k, v in processes.items() if k.startswith(prefix))

    return f"{round(of('gateway'), 2)}/{round(of('worker'), 2)}/{round(of('simulator'), 2)}"


def run_capacity_bench(
    settings: Any, *, as_json: bool, max_calls: int, levels: tuple[int, ...] | None = None
) -> int:
    from bench.running import on_services, report

    figures = on_services(
        settings,
        lambda database, redis, log: capacity_figures(
            database, redis, max_calls=max_calls, log=log, levels=levels
        ),
    )
    return report(figures, as_json=as_json, render=render)
