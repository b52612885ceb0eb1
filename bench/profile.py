"""`python -m bench.profile [CALLS]`: where the gateway's and the worker's CPU goes per event.

Runs one capacity level (the realistic mix) with py-spy sampling the gateway and the worker
(only the thread holding the GIL: idle and blocked threads are left out, and C code called
from Python counts as its caller), then prints each process's top functions by own
time and by time inside, as a share of its samples and as microseconds per durable event.
py-spy must be installed (`pip install py-spy`; it attaches as root or with ptrace allowed).

Where Linux's `perf` is installed (Debian's linux-perf), it samples the same processes on the
CPU clock at the same time: every running thread, native code and the kernel included, so the
split by library (the interpreter, the kernel's side of the round trips and the thread
switches, pydantic-core, libpq, hiredis…) shows what py-spy's Python view cannot.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.capacity import run_level
from bench.running import log, on_services
from pipeline.platform.config import Settings
from switchboard.stack import Stack

SAMPLE_RATE_HZ = 250
TOP = 18
PERF_RATE_HZ = 1_000


def profile(calls: int, *, threads: int | None = None) -> dict[str, Any]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))

    def work(database_url: str, redis_url: str, _log: Any) -> dict[str, Any]:
        from models.db import connect
        from models.migrate import migrate

        migrate(connect(database_url))
        with (
            tempfile.TemporaryDirectory() as folder,
            Stack(database_url, redis_url, simulator_args=("--lenient",)) as stack,
        ):
            if threads:
                stack.env["SWITCHBOARD_WORKER_THREADS"] = str(threads)
            stack.start(workers=1)
            targets = {"gateway": stack.gateway, "worker": stack.workers[0]}
            spies = {
                name: subprocess.Popen(
                    [
                        spy,
                        "record",
                        "--gil",
                        "--nonblocking",
                        "--format",
                        "raw",
                        "--rate",
                        str(SAMPLE_RATE_HZ),
                        "--pid",
                        str(process.popen.pid),
                        "--output",
                        f"{folder}/{name}.txt",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for name, process in targets.items()
                if process is not None
            }

            perf = shutil.which("perf")
            sampling = ["record", "-e", "cpu-clock", "-F", str(PERF_RATE_HZ)]
            natives = {
                name: subprocess.Popen(
                    [str(perf), *sampling, "-p", str(process.popen.pid), "-o", f"{folder}/{name}.perf"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for name, process in targets.items()
                if process is not None and perf is not None
            }

            def stop_sampling() -> None:
                for spied in [*spies.values(), *natives.values()]:
                    spied.send_signal(signal.SIGINT)
                for spied in [*spies.values(), *natives.values()]:
                    spied.wait(30)

            level = run_level(stack, calls, probe_floor=False, calls_done=stop_sampling)
            events = max(level["durable_events"], 1)
            return {
                "calls": calls,
                "p50_ms": level["p50_ms"],
                "p99_ms": level["p99_ms"],
                "durable_events": level["durable_events"],
                "processes": {
                    name: {
                        "cpu_ms_per_event": level["processes"][targets[name].name]["cpu_ms_per_event"],  # type: ignore[union-attr]
                        **tops(Path(f"{folder}/{name}.txt"), events),
                        "native": native_split(perf, Path(f"{folder}/{name}.perf")),
                    }
                    for name in spies
                },
            }

    return on_services(Settings(), work)


def tops(raw: Path, events: int) -> dict[str, Any]:
    """Own and inclusive time per function from py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    inside: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        samples = int(count)
        frames = [_name(frame) for frame in stack.split(";")[1:]]  # the first is the thread
        if not frames:
            continue
        total += samples
        own[frames[-1]] += samples
        for frame in set(frames):
            inside[frame] += samples
    per_event_us = 1e6 / SAMPLE_RATE_HZ / events

    def rows(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return [
            {
                "function": name,
                "share": round(n / max(total, 1), 3),
                "us_per_event": round(n * per_event_us, 1),
            }
            for name, n in counter.most_common(TOP)
        ]

    return {"samples": total, "own": rows(own), "inside": rows(inside)}


def native_split(perf: str | None, data: Path) -> dict[str, Any] | None:
    """Share of a process's CPU samples by library, and its top native symbols (perf)."""
    if perf is None or not data.exists():
        return None
    by_library = _perf_report(perf, data, "dso")
    return {"by_library": by_library[:8], "symbols": _perf_report(perf, data, "dso,sym")[:TOP]}


def _perf_report(perf: str, data: Path, keys: str) -> list[dict[str, Any]]:
    report = subprocess.run(
        [perf, "report", "-i", str(data), "--sort", keys, "--stdio", "--percent-limit", "0.5"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return perf_rows(report)


def perf_rows(report: str) -> list[dict[str, Any]]:
    """The rows of a `perf report --stdio`: each share (0-1) and what it is (headers skipped)."""
    rows = []
    for line in report.splitlines():
        share, _, rest = line.strip().partition("%")
        if line.startswith("#") or not rest:
            continue
        try:
            rows.append({"share": round(float(share) / 100, 3), "what": " ".join(rest.split())})
        except ValueError:
            continue
    return rows


def _name(frame: str) -> str:
    # "function (path/to/module.py:123)" → "function (module.py)"
    function, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rstrip(")")
    parts = Path(file).parts
    short = "/".join(parts[-2:]) if len(parts) > 1 else file
    return f"{function} ({short})"


def render(figures: dict[str, Any]) -> str:
    lines = [
        f"{figures['calls']} calls, p50 {figures['p50_ms']} p99 {figures['p99_ms']} ms, "
        f"{figures['durable_events']} durable events"
    ]
    for name, process in figures["processes"].items():
        lines += [
            "",
            f"{name}: {process['cpu_ms_per_event']} ms CPU per durable event, {process['samples']} samples",
        ]
        for kind in ("own", "inside"):
            lines.append(f"  top by {kind} time (share of samples, µs per event):")
            lines += [
                f"    {row['share']:>6.1%} {row['us_per_event']:>7.1f}  {row['function']}"
                for row in process[kind]
            ]
        native = process.get("native")
        if native:
            for kind, title in (("by_library", "by library"), ("symbols", "top native symbols")):
                lines.append(f"  all threads, {title} (perf, share of CPU samples):")
                lines += [f"    {row['share']:>6.1%}  {row['what']}" for row in native[kind]]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("calls", type=int, nargs="?", default=100)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    log(f"profile: {arguments.calls} calls of the mix, py-spy at {SAMPLE_RATE_HZ} Hz on gateway and worker")
    figures = profile(arguments.calls, threads=arguments.threads)
    print(json.dumps(figures) if arguments.json else render(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
