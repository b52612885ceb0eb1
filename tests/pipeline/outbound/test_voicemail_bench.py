"""The voicemail bench runs, cuts speech into pieces as the transcriber does, and measures on
its cases exactly what docs/outbound.md says it does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from bench.voicemail import CASES, load_cases, measure, pieces_of

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "outbound.md"


def test_speech_is_cut_every_second_and_at_each_pause() -> None:
    """Ten words at five a second are two pieces a second apart; a pause of a second or more
    cuts one, written half a second after the stretch ends."""
    pieces = pieces_of([(0, "one two three four five six seven eight nine ten"), (3_000, "eleven")], 5)
    assert [(p.heard.text, p.heard.start_ms, p.heard.end_ms, p.arrived_ms) for p in pieces] == [
        ("one two three four five", 0, 1_000, 1_000),
        ("six seven eight nine ten", 1_000, 2_000, 2_000),
        ("eleven", 3_000, 3_200, 3_700),
    ]


def test_the_cases_are_many_and_varied() -> None:
    """At least 60 cases, people and machines, in the four languages and others."""
    cases = load_cases()
    assert len(cases) >= 60
    assert {case.truth for case in cases} == {"human", "machine"}
    for language in ("en", "es", "fr", "de"):
        assert {case.truth for case in cases if case.language == language} == {"human", "machine"}
    assert any(case.language not in {"en", "es", "fr", "de", ""} for case in cases)
    assert len({case.name for case in cases}) == len(cases)


def _table_rows(section: str, header: str) -> list[list[str]]:
    lines = section[section.index(header) :].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_measured_accuracy_is_what_the_doc_says() -> None:
    """docs/outbound.md's accuracy and confusion tables are the bench's figures on its cases."""
    figures = measure(CASES)
    section = DOC.read_text().split("## Voicemail detection", 1)[1]
    accuracy = {row[0]: row[1:] for row in _table_rows(section, "| truth | cases | right |")}
    expected = {**figures["by_truth"], "all": figures}
    assert set(accuracy) == set(expected)
    for truth, row in expected.items():
        assert accuracy[truth] == [
            str(row["cases"]),
            str(row["right"]),
            f"{row['accuracy'] * 100:.1f} %",
            f"{row['mean_ms_to_verdict']} ms",
        ]
    confusion = {
        row[0]: [int(cell) for cell in row[1:]] for row in _table_rows(section, "| truth ↓ / told →")
    }
    assert confusion == {
        truth: [told[verdict] for verdict in ("human", "machine", "unknown")]
        for truth, told in figures["confusion"].items()
    }
    assert f"{figures['cases']} cases" in section
    greetings = figures["greetings"]
    assert f"{greetings['mean_ms_after_last_word'] / 1000:.1f} s after its last word" in section
    assert re.search(
        rf"too early for {['no', 'one', 'two', 'three'][len(greetings['went_on_after'])]} ", section
    )


def test_the_bench_prints_its_report_and_its_json() -> None:
    """`python -m bench.voicemail` prints the figures, the matrix and the wrong cases; --json the figures."""
    report = subprocess.run(
        [sys.executable, "-m", "bench.voicemail"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    for part in ("voicemail detection:", "truth ↓ / told →", "wrong:", "greetings over:"):
        assert part in report
    printed = subprocess.run(
        [sys.executable, "-m", "bench.voicemail", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(printed) == json.loads(json.dumps(measure(CASES)))
