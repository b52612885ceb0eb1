"""The rules the metrics test checks without promtool find what promtool finds."""

from __future__ import annotations

import shutil

from tests.support.exposition import parsed_problems, promtool_problems

# What issue 27 found, and the other two mistakes of naming: a counter without `_total`, a
# gauge with it, a unit that is not a base unit, one metric declared twice.
MISNAMED = """\
# HELP dramatiq_message_duration_milliseconds The time spent processing messages.
# TYPE dramatiq_message_duration_milliseconds histogram
dramatiq_message_duration_milliseconds_bucket{le="5.0"} 1.0
dramatiq_message_duration_milliseconds_bucket{le="+Inf"} 1.0
dramatiq_message_duration_milliseconds_count 1.0
dramatiq_message_duration_milliseconds_sum 3.0
# HELP jobs Jobs done.
# TYPE jobs counter
jobs 3.0
# HELP queue_size_total Messages waiting.
# TYPE queue_size_total gauge
queue_size_total 3.0
"""
MISNAMED_NAMES = {"dramatiq_message_duration_milliseconds", "jobs", "queue_size_total"}

DUPLICATED = """\
# HELP jobs_total Jobs done.
# TYPE jobs_total counter
jobs_total 3.0
# HELP jobs_total Jobs done.
# TYPE jobs_total counter
jobs_total 3.0
"""

CLEAN = """\
# HELP message_duration_seconds The time spent processing messages.
# TYPE message_duration_seconds histogram
message_duration_seconds_bucket{le="0.005"} 1.0
message_duration_seconds_bucket{le="+Inf"} 1.0
message_duration_seconds_count 1.0
message_duration_seconds_sum 0.003
# HELP jobs_total Jobs done.
# TYPE jobs_total counter
jobs_total{queue_name="a"} 3.0
"""


def _named(problems: list[str]) -> set[str]:
    return {name for name in MISNAMED_NAMES if any(problem.startswith(name) for problem in problems)}


def test_the_parsed_rules_find_each_misnamed_metric() -> None:
    """Each of the three misnamed metrics is reported, and nothing in a clean exposition."""
    assert _named(parsed_problems(MISNAMED)) == MISNAMED_NAMES
    assert any("milliseconds" in problem for problem in parsed_problems(MISNAMED))
    assert parsed_problems(CLEAN) == []


def test_the_parsed_rules_find_a_metric_declared_twice() -> None:
    """A second HELP and TYPE of one metric is reported."""
    assert parsed_problems(DUPLICATED) == ["jobs_total: HELP given 2 times", "jobs_total: TYPE given 2 times"]


def test_promtool_agrees_where_it_is_installed() -> None:
    """promtool reports the same misnamed metrics, and nothing in the clean exposition (on a
    machine without promtool, the parsed rules above stand in for it)."""
    if shutil.which("promtool") is None:
        assert _named(parsed_problems(MISNAMED)) == MISNAMED_NAMES
        return
    assert _named(promtool_problems(MISNAMED)) == MISNAMED_NAMES
    assert promtool_problems(CLEAN) == []
    assert promtool_problems(DUPLICATED) != []
