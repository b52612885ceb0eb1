"""The workers' shared metrics directory with real processes in it: a killed process's live
gauges go at the next scrape and its counters stay in the sums; a group started afresh clears
what the last one left; a process joining live siblings leaves their files alone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from workers import metrics
from workers.metrics_directory import MEMBERS

# A worker process's metrics, as a worker writes them: it joins the directory, counts one and
# sets a live gauge to its pid, says so and waits to be killed.
MEMBER = """
import os, sys, time
from pathlib import Path
from workers import metrics
metrics.use_directory(Path(sys.argv[1]))
from prometheus_client import Counter, Gauge
Counter("probe_total", "Counted once by each process.").inc()
Gauge("probe_pid", "The pid of each live process.", multiprocess_mode="livesum").set(os.getpid())
print("joined", flush=True)
time.sleep(600)
"""


@pytest.fixture
def members() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def _join(directory: Path, started: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", MEMBER, str(directory)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    started.append(process)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "joined"
    return process


def _kill(process: subprocess.Popen[str]) -> None:
    process.kill()
    process.wait()


def _values(directory: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    scraped = metrics.scrape(directory).decode()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(scraped):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def test_a_killed_process_gauges_go_and_its_counters_stay(
    tmp_path: Path, members: list[subprocess.Popen[str]]
) -> None:
    """After a kill -9, the next scrape marks the process dead: its live gauge, its CPU and its
    files of live gauges are gone; what it counted stays in the sum."""
    survivor = _join(tmp_path, members)
    killed = _join(tmp_path, members)
    before = _values(tmp_path)
    assert before["probe_pid"] == [({}, float(survivor.pid + killed.pid))]
    assert {labels["pid"] for labels, _ in before["process_cpu_seconds_total"]} == {
        str(survivor.pid),
        str(killed.pid),
    }
    assert (tmp_path / f"gauge_livesum_{killed.pid}.db").exists()

    _kill(killed)
    after = _values(tmp_path)
    assert after["probe_pid"] == [({}, float(survivor.pid))]
    assert after["probe_total"] == [({}, 2.0)]
    assert {labels["pid"] for labels, _ in after["process_cpu_seconds_total"]} == {str(survivor.pid)}
    assert not (tmp_path / f"gauge_livesum_{killed.pid}.db").exists()
    assert not (tmp_path / MEMBERS / f"{killed.pid}.lock").exists()
    assert (tmp_path / f"counter_{killed.pid}.db").exists()


def test_a_group_started_afresh_clears_what_the_last_left(
    tmp_path: Path, members: list[subprocess.Popen[str]]
) -> None:
    """The first process to join a directory where no one is alive removes every file the
    dead left, counters too: the sums start from zero, as after any restart."""
    for process in (_join(tmp_path, members), _join(tmp_path, members)):
        _kill(process)
    left = sorted(path.name for path in tmp_path.glob("*.db"))
    assert len(left) == 4  # a counter and a live gauge each: nobody scraped, nobody cleaned

    fresh = _join(tmp_path, members)
    assert sorted(path.name for path in tmp_path.glob("*.db")) == [
        f"counter_{fresh.pid}.db",
        f"gauge_livesum_{fresh.pid}.db",
    ]
    assert _values(tmp_path)["probe_total"] == [({}, 1.0)]


def test_joining_live_siblings_leaves_their_files(
    tmp_path: Path, members: list[subprocess.Popen[str]]
) -> None:
    """A process joining a live sibling keeps the sibling's files and a dead one's counters,
    and drops only the dead one's live gauges: a served total never drops while the group runs."""
    sibling = _join(tmp_path, members)
    dead = _join(tmp_path, members)
    _kill(dead)
    joined = _join(tmp_path, members)
    names = {path.name for path in tmp_path.glob("*.db")}
    assert names == {
        f"counter_{sibling.pid}.db",
        f"gauge_livesum_{sibling.pid}.db",
        f"counter_{dead.pid}.db",
        f"counter_{joined.pid}.db",
        f"gauge_livesum_{joined.pid}.db",
    }
    found = _values(tmp_path)
    assert found["probe_total"] == [({}, 3.0)]
    assert found["probe_pid"] == [({}, float(sibling.pid + joined.pid))]


# A new worker's threads all reach for the metrics at once, each counting its first message.
THREADS_AT_ONCE = """
import sys, threading
from workers import metrics
barrier = threading.Barrier(16)
built, failed = [], []
def first_message():
    barrier.wait()
    try:
        built.append(id(metrics.metrics()))
    except Exception as error:
        failed.append(repr(error))
threads = [threading.Thread(target=first_message) for _ in range(16)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(len(set(built)), len(built), failed)
"""


def test_threads_reaching_for_the_metrics_at_once_build_them_once() -> None:
    out = subprocess.run(
        [sys.executable, "-c", THREADS_AT_ONCE], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split(maxsplit=2) == ["1", "16", "[]\n"], out.stdout + out.stderr
