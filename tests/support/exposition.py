"""What `promtool check metrics` says of a Prometheus text exposition, and the same rules checked
with prometheus-client's own parser, for a machine without promtool (Debian's `prometheus`
package brings it; `make test` installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess

from prometheus_client.parser import text_string_to_metric_families

# promtool's lint (client_golang's promlint): a unit that is not the base one, by suffix.
NOT_BASE_UNITS = {
    "milliseconds": "seconds",
    "microseconds": "seconds",
    "nanoseconds": "seconds",
    "minutes": "seconds",
    "hours": "seconds",
    "days": "seconds",
    "weeks": "seconds",
    "kilobytes": "bytes",
    "megabytes": "bytes",
    "gigabytes": "bytes",
    "bits": "bytes",
    "percent": "ratio",
}
SNAKE_CASE = re.compile(r"^[a-z_:][a-z0-9_:]*$")
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def promtool_problems(text: str) -> list[str]:
    """promtool's findings, one a line (none: the exposition is clean)."""
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool is not installed"
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30, check=False
    )
    found = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    if done.returncode != 0 and not found:
        found.append(f"promtool exited {done.returncode}")
    return found


def parsed_problems(text: str) -> list[str]:
    """The rules of promtool that matter here, checked on prometheus-client's parse: counters
    end in `_total` and nothing else does, units are base units, histogram and summary suffixes
    only on histograms and summaries, every metric has one HELP and one TYPE, names and labels
    are snake_case."""
    problems = []
    declared: dict[tuple[str, str], int] = {}
    typed: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            _hash, kind, name, *rest = line.split()
            declared[kind, name] = declared.get((kind, name), 0) + 1
            if kind == "TYPE":
                typed[name] = rest[0]
    problems += [
        f"{name}: {kind} given {count} times" for (kind, name), count in declared.items() if count > 1
    ]
    # The names as exposed: the parser renames a counter's samples to end in `_total`.
    for name, kind in typed.items():
        if not SNAKE_CASE.match(name):
            problems.append(f"{name}: metric names should be snake_case")
        if kind == "counter" and not name.endswith("_total"):
            problems.append(f'{name}: counter metrics should have "_total" suffix')
        if kind != "counter" and name.endswith("_total"):
            problems.append(f'{name}: non-counter metrics should not have "_total" suffix')
        is_distribution = kind in ("histogram", "gaugehistogram", "summary")
        if not is_distribution and name.endswith(HISTOGRAM_SUFFIXES):
            problems.append(f"{name}: non-histogram and non-summary metrics should not have such a suffix")
        for word, base in NOT_BASE_UNITS.items():
            if word in name.split("_"):
                problems.append(f'{name}: use base unit "{base}" instead of "{word}"')
    for family in text_string_to_metric_families(text):
        if not family.documentation:
            problems.append(f"{family.name}: no help text")
        if family.type == "unknown":
            problems.append(f"{family.name}: no TYPE")
        for sample in family.samples:
            for label in sample.labels:
                if not SNAKE_CASE.match(label):
                    problems.append(f"{family.name}: label names should be snake_case ({label})")
    return sorted(set(problems))
