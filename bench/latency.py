"""`switchboard bench latency`: event → control latency through every real process.

The simulator timestamps each event it sends and each control it receives on one clock; the
latency of a turn is from the caller's final transcript (`…transcription.completed`) leaving
the simulator to the `response.create` it causes arriving back. Measured at idle (one call,
events at least 200 ms apart) and under load (N concurrent calls), with Switchboard's
wake-up consumer and, in the same run, with Dramatiq's stock polling consumer.

Beside it, with the wake-up consumer, a verb's path: an API request (`hold`, `unhold`) sent →
the control it causes arriving at the simulator, idle and while the N calls run, with a
`GET /healthz` round trip measured alongside as the one HTTP hop a verb has and an event has not.

And a phone call's admission: the provider's `realtime.call.incoming` webhook sent → the
gateway's `accept` arriving back, both on the simulator's clock, idle and while the N calls run.

And the Live API (bench.live_latency), on the same stack and in the same run: a Live call's
delegation → Switchboard's `thinking` note (one event → control hop) and → the delegation's one
terminal commentary (its task, its handler's run on tool_runs, its outcome), idle.

And what Prometheus metrics cost: the idle event → control scenario on a stack with metrics off
(`SWITCHBOARD_METRICS=false`), run just before the wake-up consumer's own (metrics on), with the
CPU the gateway and the worker spent per turn in each; and, timed in process, the calls a worker
makes per message with metrics on (bench.metrics_cost).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.common import call_log_at, call_status_at, put_script_at, tool_turnaround_ms
from bench.live_latency import LIVE_IDLE_DELEGATIONS, measure_live_idle
from pipeline.platform.config import Settings
from switchboard.client import ApiError, Client
from switchboard.stack import Stack

IDLE_TURNS = 60
TOOL_IDLE_TURNS = 30
TOOL_LOAD_TURNS = 4
LOAD_TURNS = 8
CALL_TIMEOUT_S = 180.0
# Between the starts of two loaded calls: a ramp, not a thundering herd.
RAMP_S = 0.02
IDLE_VERBS = 60
IDLE_VERB_GAP_S = 0.2
# Verbs under load go to calls of their own beside the N talking calls: a hold on a talking
# call cuts its answer and stops its transcripts, which would corrupt the event → control
# figure the verbs are compared with. Five calls, a verb every half second each: ~10 a second.
LOAD_VERB_CALLS = 5
LOAD_VERB_GAP_S = 0.5
# Long enough to outlast any run; the bench ends these calls itself.
LISTENING_HANGUP_MS = 600_000
ADMISSION_NUMBER = "+18005550199"
ADMISSION_IDLE_CALLS = 40
# After a phone call's caller hangs up, before the next rings: time for the session's end (the
# gateway's and a worker's part) to be over, so each idle admission has the stack to itself.
ADMISSION_IDLE_SETTLE_S = 0.15
ADMISSION_LOAD_CALLS = 40
ADMISSION_LOAD_GAP_S = 0.25
# The caller hangs up this long after the sideband attaches: long enough for the session's set-up
# to be done, short enough that the phone calls add little beside what is measured.
ADMISSION_HANGUP_MS = 100
ADMISSION_CALL_TIMEOUT_S = 15.0
# The targets the SIP issue set for admission (idle): the caller hears ringing meanwhile.
ADMISSION_TARGETS = {"admission_idle_p50_ms": 20.0, "admission_idle_p99_ms": 60.0}
# Metrics on and off differ in this alone; every stack of the run sets it, so that an operator's
# SWITCHBOARD_METRICS=false in the bench's environment cannot turn the comparison into off vs off.
METRICS_ON = {"SWITCHBOARD_METRICS": "true"}
METRICS_OFF = {"SWITCHBOARD_METRICS": "false"}


def idle_script(turns: int) -> dict[str, Any]:
    """One caller whose every durable event is at least 200 ms after the one before."""
    return {
        "name": "bench-idle",
        "timing": {
            "delta_interval_ms": 5,
            "chars_per_delta": 40,
            "speech_ms": 220,
            "response_wait_ms": 10_000,
        },
        "caller": [{"say": f"Question number {n}, please.", "after_ms": 250} for n in range(turns)]
        + [{"hangup": True, "after_ms": 100}],
        "model": [{"say": f"Answer number {n}."} for n in range(turns)],
    }


def load_script(turns: int) -> dict[str, Any]:
    """A caller at conversational pace: about a second of speech, a pause, and an answer whose
    transcript streams for about half a second — roughly three seconds a turn."""
    return {
        "name": "bench-load",
        "timing": {
            "delta_interval_ms": 60,
            "chars_per_delta": 6,
            "speech_ms": 1_200,
            "response_wait_ms": 30_000,
        },
        "caller": [{"say": f"Question number {n}, please.", "after_ms": 600} for n in range(turns)]
        + [{"hangup": True, "after_ms": 300}],
        "model": [{"say": f"Answer number {n}, with a little more to say."} for n in range(turns)],
    }


def turn_latencies_ms(call: dict[str, Any]) -> list[float]:
    """Transcript sent → response.create received, per turn, from one simulator call log."""
    finals = [e["t"] for e in call["events"] if e["event"]["type"].endswith("transcription.completed")]
    creates = [c["t"] for c in call["controls"] if c["control"]["type"] == "response.create"]
    return [(create - final) * 1000 for final, create in zip(finals, creates, strict=False)]


def percentiles(samples: list[float]) -> dict[str, Any]:
    if not samples:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None}
    ordered = sorted(samples)

    def at(fraction: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 2)

    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": at(0.95),
        "p99_ms": at(0.99),
    }


def measure(
    stack: Stack,
    script: dict[str, Any],
    calls: int,
    *,
    tools: tuple[str, ...] = (),
    latencies: Callable[[dict[str, Any], dict[str, Any]], list[float]] | None = None,
    first_ended: threading.Event | None = None,
    connected: threading.Semaphore | None = None,
) -> list[float]:
    """Run `calls` concurrent scripted calls and return every turn's latency (by default the
    transcript → response.create latency). `first_ended` is set when the first call ends;
    `connected` is released once per call as it connects (the call has taken up the script)."""
    _put_script(stack, script)
    client = Client(stack.api_url, stack.api_token)

    def one_call(index: int) -> list[float]:
        time.sleep(index * RAMP_S)
        session = client.create_session(
            "You are a benchmark agent. Answer in one sentence.", tools=list(tools)
        )
        call_id = client.connect(session["id"])["call_id"]
        if connected is not None:
            connected.release()
        # Wait on the simulator, not the API: polling the API from every call would load the
        # workers being measured.
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while _call_status(stack, call_id) != "ended" and time.monotonic() < deadline:
            time.sleep(0.25)
        if first_ended is not None:
            first_ended.set()
        record = client.wait_for_status(session["id"], timeout_s=10)
        if record["status"] != "ended":
            print(
                f"bench: call {session['id']} ended {record['status']} {record['end_reason']}",
                file=sys.stderr,
            )
        log = _call_log(stack, call_id)
        if latencies is None:
            return turn_latencies_ms(log)
        return latencies(log, client.session(session["id"]))

    with ThreadPoolExecutor(max_workers=calls) as pool:
        return [latency for call in pool.map(one_call, range(calls)) for latency in call]


def tool_script(turns: int, pace_ms: int) -> dict[str, Any]:
    """Each turn: the caller asks, the model calls `echo`, then speaks the answer."""
    model: list[dict[str, Any]] = []
    for n in range(turns):
        model += [
            {"function_call": {"name": "echo", "arguments": {"text": f"lookup {n}"}}},
            {"say": f"Found {n}."},
        ]
    return {
        "name": "bench-tools",
        "timing": {
            "delta_interval_ms": 10,
            "chars_per_delta": 20,
            "speech_ms": pace_ms,
            "response_wait_ms": 30_000,
        },
        "caller": [{"say": f"Please look up item {n}.", "after_ms": pace_ms} for n in range(turns)]
        + [{"hangup": True, "after_ms": 100}],
        "model": model,
    }


def listening_script() -> dict[str, Any]:
    """A caller who says nothing and stays on the line: after the session's set-up, the only
    controls its call gets are the ones the bench's verbs cause."""
    return {
        "name": "bench-listening",
        "caller": [{"hangup": True, "after_ms": LISTENING_HANGUP_MS}],
        "model": [],
    }


def verb_of_control(control: dict[str, Any] | None) -> str | None:
    """The verb whose first control this is: `hold`'s session.update switching turn detection
    off, or `unhold`'s input_audio_buffer.clear. On a listening call nothing else sends either
    (the session's set-up turns detection on, not off)."""
    if control is None:
        return None
    if control.get("type") == "input_audio_buffer.clear":
        return "unhold"
    if control.get("type") == "session.update":
        audio_input = (control.get("session") or {}).get("audio", {}).get("input", {})
        if "turn_detection" in audio_input and audio_input["turn_detection"] is None:
            return "hold"
    return None


def verb_latencies_ms(sent: list[tuple[str, float]], call: dict[str, Any]) -> tuple[list[float], int]:
    """Verb sent → the first control it causes arriving, per verb, from the call's simulator
    log; and how many verbs no control answered. `sent` is (verb, time.time() just before the
    request), in order; a verb's control is the first of its kind to arrive after it was sent."""
    arrivals: dict[str, list[float]] = {"hold": [], "unhold": []}
    for entry in call["controls"]:
        verb = verb_of_control(entry["control"])
        if verb is not None:
            arrivals[verb].append(entry["t"])
    next_unused = {"hold": 0, "unhold": 0}
    latencies: list[float] = []
    unanswered = 0
    for verb, sent_at in sent:
        times, index = arrivals[verb], next_unused[verb]
        while index < len(times) and times[index] < sent_at:
            index += 1
        if index == len(times):
            unanswered += 1
            continue
        latencies.append((times[index] - sent_at) * 1000)
        next_unused[verb] = index + 1
    return latencies, unanswered


@dataclass
class VerbRun:
    """What one call's verbs did: each verb that changed the line and when it was sent, the
    round trips measured between them, and the failures (after one, the call's verbs stop)."""

    sent: list[tuple[str, float]] = field(default_factory=list)
    hop_ms: list[float] = field(default_factory=list)
    read_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def issue_verbs(
    client: Client,
    session_id: str,
    *,
    gap_s: float,
    done: Callable[[int], bool],
    read_session: bool = False,
) -> VerbRun:
    """Hold, unhold, hold, … on a listening call until `done(verbs issued)`, each verb at least
    `gap_s` after the one before, with one `GET /healthz` round trip halfway between two (and,
    with `read_session`, one `GET /v1/sessions/{id}` after it)."""
    run = VerbRun()
    verbs = (("hold", client.hold), ("unhold", client.unhold))
    issued = 0
    while not done(issued):
        name, verb = verbs[issued % 2]
        sent_at = time.time()
        try:
            answer = verb(session_id)
        except (ApiError, OSError) as error:
            # Whether the line changed is unknown now, so later verbs could not be told apart
            # from this one's control: this call's verbs stop here.
            run.failures.append(f"{name}: {error}")
            return run
        if answer.get("changed"):
            run.sent.append((name, sent_at))
        issued += 1
        time.sleep(gap_s / 2)
        started = time.perf_counter()
        try:
            client.request("GET", "/healthz")
        except OSError as error:
            run.failures.append(f"healthz: {error}")
            return run
        run.hop_ms.append((time.perf_counter() - started) * 1000)
        if read_session:
            started = time.perf_counter()
            status, _ = client.request("GET", f"/v1/sessions/{session_id}")
            if status == 200:
                run.read_ms.append((time.perf_counter() - started) * 1000)
        time.sleep(gap_s / 2)
    return run


def open_listening_calls(stack: Stack, client: Client, count: int) -> list[tuple[str, str]]:
    """`count` calls with the listening script, each listening: (session id, simulator call id)."""
    _put_script(stack, listening_script())
    calls = []
    for _ in range(count):
        session = client.create_session("You are a benchmark agent. Answer in one sentence.")
        calls.append((session["id"], client.connect(session["id"])["call_id"]))
    for session_id, _ in calls:
        record = client.wait_for_status(session_id, ("listening",), timeout_s=30)
        if record["status"] != "listening":
            raise RuntimeError(f"bench: listening call {session_id} is {record['status']}")
    return calls


def close_listening_calls(stack: Stack, client: Client, calls: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """End the calls (so they weigh on nothing measured next) and return their simulator logs."""
    for session_id, _ in calls:
        client.end(session_id)
    for session_id, _ in calls:
        client.wait_for_status(session_id, timeout_s=30)
    return [_call_log(stack, call_id) for _, call_id in calls]


def verb_figures(runs: list[VerbRun], logs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The verbs' latency figures (with any unanswered or failed verbs) and the HTTP hop's."""
    latencies: list[float] = []
    unanswered = 0
    for run, log in zip(runs, logs, strict=True):
        call_latencies, call_unanswered = verb_latencies_ms(run.sent, log)
        latencies += call_latencies
        unanswered += call_unanswered
    failures = [failure for run in runs for failure in run.failures]
    for failure in failures:
        print(f"bench: verb failed: {failure}", file=sys.stderr)
    verbs = {**percentiles(latencies), "unanswered": unanswered, "failed": len(failures)}
    return verbs, percentiles([ms for run in runs for ms in run.hop_ms])


def measure_idle_verbs(stack: Stack, verbs: int) -> dict[str, Any]:
    """`verbs` verbs on one listening call and nothing else running."""
    client = Client(stack.api_url, stack.api_token)
    calls = open_listening_calls(stack, client, 1)
    # Idle only, the session read: under load its worker round trips would add to the load.
    run = issue_verbs(
        client,
        calls[0][0],
        gap_s=IDLE_VERB_GAP_S,
        done=lambda issued: issued >= verbs,
        read_session=True,
    )
    logs = close_listening_calls(stack, client, calls)
    verb_idle, hop_idle = verb_figures([run], logs)
    return {
        "verb_idle": {"calls": 1, **verb_idle},
        "http_hop_idle": hop_idle,
        "session_read_idle": percentiles(run.read_ms),
    }


def measure_load_with_verbs(stack: Stack, load_calls: int) -> dict[str, Any]:
    """The loaded event → control run, with verbs issued on listening calls of their own and
    phone calls rung, while every talking call is up: from the end of the talking calls' ramp
    (for the phone calls, from every talking call connected) to the first one's end."""
    client = Client(stack.api_url, stack.api_token)
    add_admission_route(client)
    calls = open_listening_calls(stack, client, LOAD_VERB_CALLS)
    first_ended = threading.Event()
    connected = threading.Semaphore(0)

    def verbs_on(index: int, session_id: str) -> VerbRun:
        # Spread the calls' verbs over the gap, rather than five at once every half second.
        if first_ended.wait(load_calls * RAMP_S + index * LOAD_VERB_GAP_S / LOAD_VERB_CALLS):
            return VerbRun()
        return issue_verbs(client, session_id, gap_s=LOAD_VERB_GAP_S, done=lambda _: first_ended.is_set())

    with ThreadPoolExecutor(max_workers=LOAD_VERB_CALLS + 1) as pool:
        pending = [pool.submit(verbs_on, index, session_id) for index, (session_id, _) in enumerate(calls)]
        ringing = pool.submit(ring_while_talking, stack, load_calls, connected, first_ended)
        try:
            events = measure(
                stack, load_script(LOAD_TURNS), load_calls, first_ended=first_ended, connected=connected
            )
        finally:
            first_ended.set()
        runs = [future.result() for future in pending]
        phone_calls = ringing.result()
    logs = close_listening_calls(stack, client, calls)
    verb_load, hop_load = verb_figures(runs, logs)
    return {
        "load": {"calls": load_calls, **percentiles(events)},
        "verb_load": {"calls": load_calls, "verb_calls": LOAD_VERB_CALLS, **verb_load},
        "http_hop_load": hop_load,
        "admission_load": {"calls": load_calls, **admission_figures(stack, phone_calls)},
    }


def phone_script() -> dict[str, Any]:
    """A phone caller who hangs up soon after the call is answered: a call that costs little
    beyond its admission."""
    return {
        "name": "bench-phone",
        "caller": [{"hangup": True, "after_ms": ADMISSION_HANGUP_MS}],
        "model": [],
    }


def add_admission_route(client: Client) -> None:
    """The route the bench's phone calls ring (adding it again replaces it)."""
    client.add_route(
        ADMISSION_NUMBER,
        {"instructions": "You are a benchmark agent. Answer in one sentence."},
        # Never the reason a bench call is turned away, even were none of them to end.
        max_calls=max(ADMISSION_IDLE_CALLS, ADMISSION_LOAD_CALLS),
    )


def admission_ms(call: dict[str, Any]) -> float | None:
    """The webhook's first delivery sent → the first accept arriving, from one simulator call
    log (both `time.time()` in the simulator); None when the call was never accepted."""
    if not call["deliveries"] or not call["accepts"]:
        return None
    first_sent = min(delivery["sent_at"] for delivery in call["deliveries"])
    return float((call["accepts"][0] - first_sent) * 1000)


def was_redelivered(call: dict[str, Any]) -> bool:
    """Whether the first delivery was not answered 2xx (its admission includes a retry)."""
    first = min(call["deliveries"], key=lambda delivery: delivery["sent_at"])
    return not 200 <= first["status"] < 300


def measure_idle_admission(stack: Stack, calls: int) -> dict[str, Any]:
    """`calls` phone calls rung one at a time, each once the one before has hung up and its end
    has settled, with nothing else running."""
    client = Client(stack.api_url, stack.api_token)
    add_admission_route(client)
    _put_script(stack, phone_script())
    call_ids = []
    for _ in range(calls):
        call_id = ring(stack, ADMISSION_NUMBER)
        # No status polls before the caller can have hung up: the admission has the simulator
        # to itself.
        time.sleep(ADMISSION_HANGUP_MS / 1000)
        wait_for_call_end(stack, call_id)
        call_ids.append(call_id)
        time.sleep(ADMISSION_IDLE_SETTLE_S)
    return {"admission_idle": admission_figures(stack, call_ids)}


def ring_while_talking(
    stack: Stack, talking_calls: int, connected: threading.Semaphore, first_ended: threading.Event
) -> list[str]:
    """Once every talking call has connected, phone calls rung one every ADMISSION_LOAD_GAP_S
    until ADMISSION_LOAD_CALLS have rung or the first talking call ends: their call ids."""
    waiting = talking_calls
    while waiting:
        if first_ended.is_set():
            return []
        if connected.acquire(timeout=0.1):
            waiting -= 1
    # The simulator's script is for the calls created from now on: every talking call has
    # taken up the load script already, so only the phone calls get this one.
    _put_script(stack, phone_script())
    call_ids: list[str] = []
    for index in range(ADMISSION_LOAD_CALLS):
        if index and first_ended.wait(ADMISSION_LOAD_GAP_S):
            break
        try:
            call_ids.append(ring(stack, ADMISSION_NUMBER))
        except OSError as error:
            print(f"bench: a phone call could not ring: {error}", file=sys.stderr)
            break
    return call_ids


def admission_figures(stack: Stack, call_ids: list[str]) -> dict[str, Any]:
    """The phone calls' admission latency figures, once each call has ended, with how many were
    never accepted and how many were accepted only on a redelivery of the webhook."""
    latencies: list[float] = []
    unanswered = redelivered = 0
    for call_id in call_ids:
        wait_for_call_end(stack, call_id)
        log = _call_log(stack, call_id)
        latency = admission_ms(log)
        if latency is None:
            unanswered += 1
            print(f"bench: phone call {call_id} was never accepted: {log['deliveries']}", file=sys.stderr)
            continue
        latencies.append(latency)
        redelivered += was_redelivered(log)
    return {**percentiles(latencies), "unanswered": unanswered, "redelivered": redelivered}


def wait_for_call_end(stack: Stack, call_id: str) -> None:
    """Until the simulator says the call ended (the caller hung up, or it was turned away)."""
    deadline = time.monotonic() + ADMISSION_CALL_TIMEOUT_S
    while _call_status(stack, call_id) != "ended" and time.monotonic() < deadline:
        time.sleep(0.025)


FLOOR_SAMPLES = 500


def measure_floor(database_url: str, redis_url: str, samples: int = FLOOR_SAMPLES) -> dict[str, Any]:
    """The physical floor, measured there and then: a Redis push→pop round trip between two
    threads, and a PostgreSQL row-lock transaction (BEGIN; SELECT … FOR UPDATE; UPDATE; COMMIT)."""
    import psycopg2
    import redis

    from models.db import parse_database_url

    key = f"switchboard:floor:{time.time_ns()}"
    pusher, popper = redis.Redis.from_url(redis_url), redis.Redis.from_url(redis_url)
    echo = threading.Thread(target=_echo, args=(popper, key, samples), daemon=True)
    echo.start()
    redis_ms = []
    for _ in range(samples):
        started = time.perf_counter()
        pusher.lpush(f"{key}:in", 1)
        pusher.brpop([f"{key}:out"], timeout=5)
        redis_ms.append((time.perf_counter() - started) * 1000)
        time.sleep(0.002)
    echo.join(5)
    pusher.delete(f"{key}:in", f"{key}:out")
    # An ordinary (logged) table: its commit writes and flushes WAL as a session's does. A
    # temporary table's commit skips both, which made an earlier floor look twice as fast.
    table = f"switchboard_floor_{os.getpid()}_{time.time_ns()}"
    connection = psycopg2.connect(**parse_database_url(database_url))
    connection.autocommit = True
    cursor = connection.cursor()
    cursor.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n int)")
    try:
        cursor.execute(f"INSERT INTO {table} SELECT g, 0 FROM generate_series(1, 100) g")
        postgres_ms = []
        for index in range(samples):
            started = time.perf_counter()
            cursor.execute(f"BEGIN; SELECT n FROM {table} WHERE id = %s FOR UPDATE", (index % 100 + 1,))
            cursor.execute(f"UPDATE {table} SET n = n + 1 WHERE id = %s", (index % 100 + 1,))
            cursor.execute("COMMIT")
            postgres_ms.append((time.perf_counter() - started) * 1000)
    finally:
        cursor.execute(f"DROP TABLE {table}")
        connection.close()
    return {"redis_round_trip": percentiles(redis_ms), "postgres_row_lock_txn": percentiles(postgres_ms)}


def _echo(client: Any, key: str, count: int) -> None:
    for _ in range(count):
        client.brpop([f"{key}:in"], timeout=5)
        client.lpush(f"{key}:out", 1)


def measure_idle_with_cpu(stack: Stack) -> tuple[dict[str, Any], dict[str, float]]:
    """The idle event → control figures, and the CPU the gateway and the worker spent on the
    call, in ms per turn: steadier than latency, but counted in clock ticks (10 ms, 0.17 ms a
    turn over 60 turns) and with each process's idle polling in it."""
    assert stack.gateway is not None
    processes = {
        "gateway": psutil.Process(stack.gateway.popen.pid),
        "worker": psutil.Process(stack.workers[0].popen.pid),
    }
    before = {name: _cpu_s(process) for name, process in processes.items()}
    figures = percentiles(measure(stack, idle_script(IDLE_TURNS), 1))
    cpu = {
        name: round((_cpu_s(process) - before[name]) * 1000 / IDLE_TURNS, 2)
        for name, process in processes.items()
    }
    return figures, cpu


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def check_metrics(stack: Stack, *, on: bool) -> None:
    """Fail the run unless the stack's worker counts (or does not) as the comparison needs:
    a worker with metrics on names its metrics port in its ready line."""
    counting = "metrics" in stack.workers[0].ready
    if counting != on:
        raise RuntimeError(
            f"bench: the worker's metrics are {'on' if counting else 'off'}, the bench wanted them "
            f"{'on' if on else 'off'}: ready line {stack.workers[0].ready}"
        )


def measure_idle_metrics_off(
    database_url: str, redis_url: str, simulator_args: tuple[str, ...]
) -> dict[str, Any]:
    """The idle scenario on a wake-up consumer's stack with metrics off everywhere."""
    env = {"SWITCHBOARD_BROKER_CONSUMER": "wake", **METRICS_OFF}
    with Stack(database_url, redis_url, extra_env=env, simulator_args=simulator_args) as stack:
        stack.start(workers=1)
        check_metrics(stack, on=False)
        idle, cpu = measure_idle_with_cpu(stack)
    return {"metrics_off_idle": idle, "metrics_cpu_ms_per_turn": {"off": cpu}}


def measure_metrics_cost() -> dict[str, Any]:
    """µs per call of what a worker does for metrics per message (bench.metrics_cost, in a
    process of its own: prometheus-client's directory must be set before it is imported)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.metrics_cost"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        return {"skipped": f"bench.metrics_cost failed: {done.stderr.strip()[-300:]}"}
    return dict(json.loads(done.stdout))


def run_latency_bench(settings: Settings, *, as_json: bool, load_calls: int, quick: bool = False) -> int:
    from bench.running import on_services, report

    figures = on_services(
        settings,
        lambda database, redis, log: (
            quick_figures(database, redis, log=log)
            if quick
            else latency_figures(database, redis, load_calls=load_calls, log=log)
        ),
    )
    return report(figures, as_json=as_json, render=render)


def quick_figures(database_url: str, redis_url: str, *, log: Callable[[str], None]) -> dict[str, Any]:
    """The floor, idle event → control, idle tool turnaround and the peer, on one stack: the
    ratios the hot path's targets are set in, in about a minute (to compare two builds)."""
    from models.db import connect
    from models.migrate import migrate

    migrate(connect(database_url))
    log("floor: Redis round trip and PostgreSQL row-lock transaction")
    figures: dict[str, Any] = {"floor": measure_floor(database_url, redis_url)}
    with Stack(database_url, redis_url, extra_env=METRICS_ON, simulator_args=("--lenient",)) as stack:
        stack.start(workers=1)
        log(f"wake consumer: idle, one call of {IDLE_TURNS} turns")
        figures["idle"] = percentiles(measure(stack, idle_script(IDLE_TURNS), 1))
        log(f"tool turnaround: idle, one call of {TOOL_IDLE_TURNS} turns")
        tools = measure(
            stack, tool_script(TOOL_IDLE_TURNS, 250), 1, tools=("echo",), latencies=tool_turnaround_ms
        )
        figures["tool_idle"] = percentiles(tools)
        figures.update(_peer_figures(stack, figures["tool_idle"], log))
    figures["ratios"] = ratios(figures)
    return figures


def latency_figures(
    database_url: str, redis_url: str, *, load_calls: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """Idle and loaded event → control latency with Switchboard's consumer and the stock one,
    verb → control and phone-call admission beside it, tool turnaround, the peer, the floor,
    and the idle scenario with metrics off beside the same with metrics on, all measured in
    this run."""
    from models.db import connect
    from models.migrate import migrate

    figures: dict[str, Any] = {}
    migrate(connect(database_url))
    log("floor: Redis round trip and PostgreSQL row-lock transaction")
    figures["floor"] = measure_floor(database_url, redis_url)
    # The simulator skips its own wire validation here: the tests check the wire, and the
    # benchmark should not pay for it on the same two cores.
    lenient = ("--lenient",)
    # Just before the wake-up consumer's idle call (metrics on), so that the two idle figures
    # are back to back on this noisy machine, seconds apart.
    log(f"metrics off: idle, one call of {IDLE_TURNS} turns (wake-up consumer)")
    figures.update(measure_idle_metrics_off(database_url, redis_url, lenient))
    log("metrics: what counting costs a worker per message, in process")
    figures["metrics_cost_us"] = measure_metrics_cost()
    for consumer, prefix in (("wake", ""), ("stock", "stock_")):
        log(f"{consumer} consumer: idle, one call of {IDLE_TURNS} turns")
        env = {"SWITCHBOARD_BROKER_CONSUMER": consumer, **METRICS_ON}
        with Stack(database_url, redis_url, extra_env=env, simulator_args=lenient) as stack:
            stack.start(workers=1)
            if consumer == "wake":
                check_metrics(stack, on=True)
                figures["idle"], figures["metrics_cpu_ms_per_turn"]["on"] = measure_idle_with_cpu(stack)
                log(f"admission: idle, {ADMISSION_IDLE_CALLS} phone calls rung one at a time")
                figures.update(measure_idle_admission(stack, ADMISSION_IDLE_CALLS))
                log(f"verb → control: idle, {IDLE_VERBS} verbs (hold, unhold, …) on one listening call")
                figures.update(measure_idle_verbs(stack, IDLE_VERBS))
                log(f"Live: idle, one Live call of {LIVE_IDLE_DELEGATIONS} delegations")
                thinking, commentary = measure_live_idle(stack, LIVE_IDLE_DELEGATIONS)
                figures["live_thinking_idle"] = percentiles(thinking)
                figures["live_commentary_idle"] = percentiles(commentary)
                log(
                    f"{consumer} consumer: load, {load_calls} concurrent calls of {LOAD_TURNS} turns, "
                    f"verbs on {LOAD_VERB_CALLS} listening calls beside them, and up to "
                    f"{ADMISSION_LOAD_CALLS} phone calls rung one every {ADMISSION_LOAD_GAP_S} s"
                )
                figures.update(measure_load_with_verbs(stack, load_calls))
            else:
                figures[f"{prefix}idle"] = percentiles(measure(stack, idle_script(IDLE_TURNS), 1))
                log(f"{consumer} consumer: load, {load_calls} concurrent calls of {LOAD_TURNS} turns")
                load = percentiles(measure(stack, load_script(LOAD_TURNS), load_calls))
                figures[f"{prefix}load"] = {"calls": load_calls, **load}
            if consumer == "wake":
                log(f"tool turnaround: idle, one call of {TOOL_IDLE_TURNS} turns")
                idle_tools = measure(
                    stack,
                    tool_script(TOOL_IDLE_TURNS, 250),
                    1,
                    tools=("echo",),
                    latencies=tool_turnaround_ms,
                )
                figures["tool_idle"] = percentiles(idle_tools)
                figures.update(_peer_figures(stack, figures["tool_idle"], log))
                log(f"tool turnaround: load, {load_calls} concurrent calls of {TOOL_LOAD_TURNS} turns")
                loaded_tools = measure(
                    stack,
                    tool_script(TOOL_LOAD_TURNS, 1_000),
                    load_calls,
                    tools=("echo",),
                    latencies=tool_turnaround_ms,
                )
                figures["tool_load"] = {"calls": load_calls, **percentiles(loaded_tools)}
    figures["ratios"] = ratios(figures)
    figures["verb_margin"] = verb_margins(figures)
    figures["admission_targets"] = admission_targets(figures)
    return figures


def ratios(figures: dict[str, Any]) -> dict[str, float]:
    """The comparisons the figures exist for, each within this one run (p50s)."""
    out: dict[str, float] = {}
    floor = figures.get("floor") or {}
    floor_ms = sum(
        (floor.get(key) or {}).get("p50_ms") or 0 for key in ("redis_round_trip", "postgres_row_lock_txn")
    )
    idle = (figures.get("idle") or {}).get("p50_ms")
    if idle and floor_ms:
        out["idle_vs_floor"] = round(idle / floor_ms, 2)
    for scenario in ("idle", "load"):
        ours = (figures.get(scenario) or {}).get("p50_ms")
        stock = (figures.get(f"stock_{scenario}") or {}).get("p50_ms")
        if ours and stock:
            out[f"stock_vs_wake_{scenario}"] = round(stock / ours, 2)
    for scenario in ("idle", "load"):
        verb = (figures.get(f"verb_{scenario}") or {}).get("p50_ms")
        event = (figures.get(scenario) or {}).get("p50_ms")
        if verb and event:
            out[f"verb_vs_event_{scenario}"] = round(verb / event, 2)
    if figures.get("tool_vs_peer_p50"):
        out["tool_vs_peer"] = figures["tool_vs_peer_p50"]
    admission_idle = (figures.get("admission_idle") or {}).get("p50_ms")
    admission_load = (figures.get("admission_load") or {}).get("p50_ms")
    if admission_idle and admission_load:
        out["admission_load_vs_idle"] = round(admission_load / admission_idle, 2)
    metrics_off = (figures.get("metrics_off_idle") or {}).get("p50_ms")
    if idle and metrics_off:
        out["metrics_on_vs_off_idle"] = round(idle / metrics_off, 2)
    live_thinking = (figures.get("live_thinking_idle") or {}).get("p50_ms")
    if idle and live_thinking:
        out["live_thinking_vs_idle"] = round(live_thinking / idle, 2)
    return out


def admission_targets(figures: dict[str, Any]) -> dict[str, Any]:
    """Each admission target beside what this run measured, as `bench.everything` sets its
    targets beside a run: {target, measured, met}, met None when not measured."""
    idle = figures.get("admission_idle") or {}
    measured = {"admission_idle_p50_ms": idle.get("p50_ms"), "admission_idle_p99_ms": idle.get("p99_ms")}
    rows: dict[str, Any] = {}
    for name, target in ADMISSION_TARGETS.items():
        value = measured[name]
        rows[name] = {"target": target, "measured": value, "met": None if value is None else value <= target}
    return rows


def verb_margins(figures: dict[str, Any]) -> dict[str, Any]:
    """What a verb's path takes beyond an event's (p50s), beside the one HTTP hop the verb has
    and the event has not (a `GET /healthz` round trip, measured alongside the verbs)."""
    out: dict[str, Any] = {}
    for scenario in ("idle", "load"):
        verb = (figures.get(f"verb_{scenario}") or {}).get("p50_ms")
        event = (figures.get(scenario) or {}).get("p50_ms")
        hop = (figures.get(f"http_hop_{scenario}") or {}).get("p50_ms")
        if verb is None or event is None or hop is None:
            continue
        beyond = round(verb - event, 2)
        out[scenario] = {
            "verb_minus_event_p50_ms": beyond,
            "http_hop_p50_ms": hop,
            "within_one_hop": beyond <= hop,
        }
        read = (figures.get(f"session_read_{scenario}") or {}).get("p50_ms")
        if read is not None:
            out[scenario]["session_read_p50_ms"] = read
    return out


def _peer_figures(stack: Stack, tool_idle: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    """The same tool scenario driven by the OpenAI Agents SDK's RealtimeSession, in process and
    without durability, on the same simulator: Switchboard's turnaround as a ratio to it."""
    from bench import peer

    if not peer.available():
        return {"peer_tool_idle": {"skipped": "openai-agents is not installed: pip install -e '.[bench]'"}}
    log(f"peer: the OpenAI Agents SDK's RealtimeSession, one call of {TOOL_IDLE_TURNS} tool turns")
    assert stack.simulator is not None
    peer_ms = peer.measure_peer(
        stack.simulator_url, stack.simulator.ready["ws"], tool_script(TOOL_IDLE_TURNS, 250)
    )
    figures: dict[str, Any] = {"peer_tool_idle": percentiles(peer_ms)}
    if peer_ms and tool_idle.get("p50_ms"):
        figures["tool_vs_peer_p50"] = round(tool_idle["p50_ms"] / figures["peer_tool_idle"]["p50_ms"], 2)
    return figures


def render(figures: dict[str, Any]) -> str:
    lines = ["event → control latency (ms): transcript final → response.create", ""]
    lines.append(_HEADER)
    names = {
        "idle": "wake-up consumer, idle",
        "load": "wake-up consumer, {calls} calls",
        "stock_idle": "stock Dramatiq, idle",
        "stock_load": "stock Dramatiq, {calls} calls",
        "tool_idle": "tool turnaround, idle",
        "tool_load": "tool turnaround, {calls} calls",
        "peer_tool_idle": "peer (Agents SDK), tool turnaround",
        "live_thinking_idle": "Live delegation → thinking, idle",
        "live_commentary_idle": "Live delegation → commentary, idle",
    }
    for key, name in names.items():
        row = figures.get(key)
        if row and "skipped" in row:
            lines.append(f"{name:34} skipped: {row['skipped']}")
        elif row:
            lines.append(_row(name.format(calls=row.get("calls")), row))
    ratio = figures.get("ratios") or {}
    if ratio.get("live_thinking_vs_idle"):
        lines.append(
            f"Live delegation → thinking ÷ Realtime transcript → response.create (p50): "
            f"{ratio['live_thinking_vs_idle']}×"
        )
    if ratio.get("tool_vs_peer"):
        lines.append(f"Switchboard's tool turnaround ÷ the peer's (p50): {ratio['tool_vs_peer']}×")
    if ratio.get("stock_vs_wake_idle"):
        lines.append(
            f"stock consumer ÷ Switchboard's (p50): {ratio['stock_vs_wake_idle']}× idle, "
            f"{ratio.get('stock_vs_wake_load', '-')}× under load"
        )
    if ratio.get("idle_vs_floor"):
        lines.append(
            f"idle event → control ÷ the floor (a Redis round trip + a row-lock transaction, p50): "
            f"{ratio['idle_vs_floor']}×"
        )
    lines += _render_verbs(figures)
    lines += _render_admission(figures)
    lines += _render_metrics_cost(figures)
    floor = figures.get("floor")
    if floor:
        lines += ["", "floor, measured in the same run (ms):"]
        for key, label in (
            ("redis_round_trip", "Redis push→pop round trip"),
            ("postgres_row_lock_txn", "PostgreSQL row-lock transaction"),
        ):
            lines.append(_row(label, floor[key]))
    return "\n".join(lines)


_HEADER = f"{'':34}{'n':>6}{'p50':>9}{'p95':>9}{'p99':>9}"


def _row(label: str, row: dict[str, Any]) -> str:
    # !s: a scenario with no samples has None percentiles, which a width alone cannot format.
    return f"{label:34}{row['n']:>6}{row['p50_ms']!s:>9}{row['p95_ms']!s:>9}{row['p99_ms']!s:>9}"


def _render_verbs(figures: dict[str, Any]) -> list[str]:
    """The verb → control section: the verbs, the HTTP hop beside them, and the comparison."""
    if not figures.get("verb_idle") and not figures.get("verb_load"):
        return []
    lines = [
        "",
        "verb → control latency (ms): API request sent → its first control at the provider",
        "(hold → session.update turning detection off, unhold → input_audio_buffer.clear)",
        "",
        _HEADER,
    ]
    names = {
        "verb_idle": "verb → control, idle",
        "verb_load": "verb → control, {calls} calls",
        "http_hop_idle": "GET /healthz round trip, idle",
        "http_hop_load": "GET /healthz round trip, {calls} calls",
        "session_read_idle": "GET /v1/sessions/{{id}} RT, idle",
    }
    for key, name in names.items():
        row = figures.get(key)
        if row:
            calls = row.get("calls") or (figures.get("verb_load") or {}).get("calls")
            lines.append(_row(name.format(calls=calls), row))
    verb_load = figures.get("verb_load") or {}
    if verb_load.get("verb_calls"):
        lines.append(
            f"(under load the verbs go to {verb_load['verb_calls']} listening calls beside the "
            f"{verb_load['calls']} talking ones, while all of those are up)"
        )
    missing = sum((figures.get(key) or {}).get(part, 0) for key in names for part in ("unanswered", "failed"))
    if missing:
        lines.append(f"verbs with no control to show for them (unanswered or failed): {missing}")
    ratio = figures.get("ratios") or {}
    if ratio.get("verb_vs_event_idle"):
        lines.append(
            f"verb → control ÷ event → control (p50): {ratio['verb_vs_event_idle']}× idle, "
            f"{ratio.get('verb_vs_event_load', '-')}× under load"
        )
    for scenario, margin in (figures.get("verb_margin") or {}).items():
        verdict = "within" if margin["within_one_hop"] else "more than"
        lines.append(
            f"verb p50 − event p50, {scenario}: {margin['verb_minus_event_p50_ms']} ms, {verdict} one "
            f"HTTP round trip ({margin['http_hop_p50_ms']} ms)"
        )
        if "session_read_p50_ms" in margin:
            lines.append(
                f"  (a session read over HTTP, through a worker, is {margin['session_read_p50_ms']} ms: "
                f"the read a verb skips when this gateway holds its call)"
            )
    return lines


def _render_admission(figures: dict[str, Any]) -> list[str]:
    """The admission section: idle and under load, and the targets beside them."""
    if not figures.get("admission_idle") and not figures.get("admission_load"):
        return []
    lines = [
        "",
        "admission latency (ms): the call's webhook sent → the accept arriving at the provider",
        "(both on the simulator's clock: the webhook's own HTTP hop is in the figure)",
        "",
        _HEADER,
    ]
    names = {"admission_idle": "admission, idle", "admission_load": "admission, {calls} calls talking"}
    for key, name in names.items():
        row = figures.get(key)
        if row:
            lines.append(_row(name.format(calls=row.get("calls")), row))
    unanswered = sum((figures.get(key) or {}).get("unanswered", 0) for key in names)
    redelivered = sum((figures.get(key) or {}).get("redelivered", 0) for key in names)
    if unanswered or redelivered:
        lines.append(
            f"phone calls never accepted: {unanswered}; accepted only on a redelivery "
            f"(their figure includes the retry): {redelivered}"
        )
    ratio = (figures.get("ratios") or {}).get("admission_load_vs_idle")
    if ratio:
        lines.append(f"admission under load ÷ idle (p50): {ratio}×")
    targets = figures.get("admission_targets") or {}
    if targets:
        lines.append("admission targets (this run):")
    for name, row in targets.items():
        verdict = {True: "met", False: "missed", None: "not measured"}[row["met"]]
        label = name.replace("_", " ")
        lines.append(f"  {label:22} target {row['target']:>7}  measured {row['measured']!s:>8}  {verdict}")
    return lines


def _render_metrics_cost(figures: dict[str, Any]) -> list[str]:
    """Metrics on against off: the idle figures side by side, the ratio, and the CPU per turn."""
    off = figures.get("metrics_off_idle")
    if not off:
        return []
    lines = [
        "",
        "metrics on against off (ms): event → control, idle, wake-up consumer, back to back",
        "",
        _HEADER,
    ]
    if figures.get("idle"):
        lines.append(_row("metrics on, idle", figures["idle"]))
    lines.append(_row("metrics off, idle", off))
    ratio = (figures.get("ratios") or {}).get("metrics_on_vs_off_idle")
    if ratio:
        lines.append(f"metrics on ÷ off (p50): {ratio}×")
    cpu = figures.get("metrics_cpu_ms_per_turn") or {}
    if cpu.get("on") and cpu.get("off"):
        split = ", ".join(f"{name} {cpu['on'][name]} / {cpu['off'][name]}" for name in cpu["on"])
        lines.append(f"CPU ms per idle turn, metrics on / off: {split}")
    cost = figures.get("metrics_cost_us") or {}
    if "skipped" in cost:
        lines.append(f"per message, in process: skipped: {cost['skipped']}")
    elif cost:
        lines.append(
            f"per message, in process (µs): delivered {cost['delivered_turn_us']} for a turn's "
            f"final, {cost['delivered_event_us']} for another event; the message middleware "
            f"{cost['dramatiq_middleware_us']}; recorded {cost['recorded_us']}; "
            f"delivered with metrics off {cost['delivered_off_us']}"
        )
    return lines


def _put_script(stack: Stack, script: dict[str, Any]) -> None:
    put_script_at(_base(stack), script)


def _call_log(stack: Stack, call_id: str) -> dict[str, Any]:
    return call_log_at(_base(stack), call_id)


def _call_status(stack: Stack, call_id: str) -> str:
    return call_status_at(_base(stack), call_id)


def _base(stack: Stack) -> str:
    return stack.simulator_url.removesuffix("/v1")


def ring(stack: Stack, number: str) -> str:
    """A phone call to `number` rings at the simulator, its webhook for the stack's gateway:
    the simulator's call id."""
    return ring_at(_base(stack), number, webhook_url=stack.webhook_url, secret=stack.webhook_secret)


def ring_at(base: str, number: str, *, webhook_url: str, secret: str) -> str:
    """Ring a phone call at the simulator's control API at `base`; answers its call id."""
    body = {"to": number, "webhook_url": webhook_url, "secret": secret}
    request = urllib.request.Request(
        f"{base}/_sim/sip/calls",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["call_id"])
