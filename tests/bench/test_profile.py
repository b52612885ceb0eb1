"""The profile bench's reading of py-spy's collapsed stacks: own and inclusive time per function."""

from pathlib import Path

from bench.profile import SAMPLE_RATE_HZ, perf_rows, tops


def test_own_and_inside_time_are_counted_per_function(tmp_path: Path) -> None:
    raw = tmp_path / "worker.txt"
    raw.write_text(
        "thread (0x1);run (dramatiq/worker.py:10);deliver (workers/actors.py:99);"
        "dumps (json/__init__.py:1) 30\n"
        "thread (0x1);run (dramatiq/worker.py:10);deliver (workers/actors.py:99) 10\n"
        "thread (0x2);run (dramatiq/worker.py:10);fetch (workers/broker.py:5) 60\n"
    )
    figures = tops(raw, events=10)
    assert figures["samples"] == 100
    own = {row["function"]: row for row in figures["own"]}
    inside = {row["function"]: row for row in figures["inside"]}
    assert own["fetch (workers/broker.py)"]["share"] == 0.6
    assert own["dumps (json/__init__.py)"]["share"] == 0.3
    assert own["deliver (workers/actors.py)"]["share"] == 0.1
    # A function is inside every sample it appears in, once per sample however deep.
    assert inside["run (dramatiq/worker.py)"]["share"] == 1.0
    assert inside["deliver (workers/actors.py)"]["share"] == 0.4
    # 40 samples at SAMPLE_RATE_HZ over 10 events.
    expected_us = round(40 * 1e6 / SAMPLE_RATE_HZ / 10, 1)
    assert inside["deliver (workers/actors.py)"]["us_per_event"] == expected_us


def test_perf_s_report_is_read_as_shares_of_what_ran() -> None:
    """perf report's rows become a share each (its header and comment lines skipped)."""
    report = (
        "# Samples: 11K of event 'cpu-clock'\n#\n# Overhead  Shared Object\n"
        "    57.95%  libpython3.11.so.1.0\n    26.24%  [kernel.kallsyms]\n\n"
        "     0.53%  _json.cpython-311-x86_64-linux-gnu.so  [.] scanstring\n"
    )
    assert perf_rows(report) == [
        {"share": 0.58, "what": "libpython3.11.so.1.0"},
        {"share": 0.262, "what": "[kernel.kallsyms]"},
        {"share": 0.005, "what": "_json.cpython-311-x86_64-linux-gnu.so [.] scanstring"},
    ]
