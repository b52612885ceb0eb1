"""How well `pipeline.outbound.voicemail` tells a person from a machine, on the cases of
`bench/voicemail_cases.json`: accuracy overall and per truth, the confusion matrix, the time to
a verdict, the cases it gets wrong, and for machines when it says their greeting is over.
Pure CPU, no services.

    python -m bench.voicemail [--json]

Each case is played as a worker would see it: the answer at 0 ms; each piece arrives when the
transcriber writes it (`pieces_of` says when; nothing else delays it); `listen` is asked after
each; `settle` when `settle_due_ms` comes first. For a machine (by truth and by verdict),
`greeting_over` is then asked every `POLL_MS` until it says so: it "went on" when the greeting
spoke again after that, and a message left then would have been spoken over it.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.outbound.voicemail import Heard, Verdict, greeting_over, listen, settle, settle_due_ms

CASES = Path(__file__).with_name("voicemail_cases.json")
# The transcriber writes a piece about every second while someone speaks, and at every pause
# of at least a second (pipeline/outbound/voicemail.py's module docstring); it knows speech has
# stopped once it has heard this much silence (the Realtime API's server VAD waits 500 ms).
PIECE_MS = 1_000
PAUSE_CUT_MS = 1_000
END_OF_SPEECH_MS = 500
# How often a worker asks whether a greeting is over once it knows it is a machine.
POLL_MS = 100
# How long after a greeting's last word the bench stops asking.
GREETING_WAIT_MS = 5_000
TRUTHS = ("human", "machine")
VERDICTS = ("human", "machine", "unknown")


@dataclass(frozen=True, slots=True)
class Piece:
    """A piece of speech as written down, and when it arrived (ms after the answer)."""

    heard: Heard
    arrived_ms: int


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    truth: str
    language: str
    kind: str
    pieces: tuple[Piece, ...]

    @property
    def heard(self) -> tuple[Heard, ...]:
        return tuple(piece.heard for piece in self.pieces)


def pieces_of(said: Sequence[tuple[int, str]], words_per_second: float) -> tuple[Piece, ...]:
    """Utterances ([start ms, text], in order) spoken at a pace, written down as the transcriber
    does: each word takes 1/words_per_second s. Words with gaps under `PAUSE_CUT_MS` are one
    stretch of speech; within it a piece of the words ended so far is written every `PIECE_MS`
    from its first word, and its last words once the stretch has been over `END_OF_SPEECH_MS`
    (or at the next tick, if sooner)."""
    word_ms = 1_000 / words_per_second
    timed: list[tuple[str, int, int]] = []
    for start_ms, text in said:
        if timed and start_ms < timed[-1][2]:
            raise ValueError(f"{text[:30]!r} starts at {start_ms} ms, before the words before it end")
        for index, word in enumerate(text.split()):
            begins = start_ms + index * word_ms
            timed.append((word, round(begins), round(begins + word_ms)))
    stretches: list[list[tuple[str, int, int]]] = []
    for timed_word in timed:
        if stretches and timed_word[1] - stretches[-1][-1][2] < PAUSE_CUT_MS:
            stretches[-1].append(timed_word)
        else:
            stretches.append([timed_word])
    pieces: list[Piece] = []
    for stretch in stretches:
        first, last = stretch[0][1], stretch[-1][2]
        ends_written = min(last + END_OF_SPEECH_MS, first + math.ceil((last - first) / PIECE_MS) * PIECE_MS)
        ticks = [*range(first + PIECE_MS, ends_written, PIECE_MS), ends_written]
        waiting = list(stretch)
        for tick in ticks:
            ended = [timed_word for timed_word in waiting if timed_word[2] <= tick]
            waiting = waiting[len(ended) :]
            if ended:
                text = " ".join(w for w, _, _ in ended)
                pieces.append(Piece(Heard(text=text, start_ms=ended[0][1], end_ms=ended[-1][2]), tick))
    return tuple(pieces)


def load_cases(path: Path = CASES) -> list[Case]:
    """The cases of the file, their utterances cut into pieces."""
    document = json.loads(path.read_text())
    pace = float(document["words_per_second"])
    cases = []
    for raw in document["cases"]:
        said = [(int(start), str(text)) for start, text in raw["said"]]
        pieces = pieces_of(said, float(raw.get("words_per_second", pace)))
        cases.append(Case(raw["name"], raw["truth"], raw["language"], raw["kind"], pieces))
    return cases


@dataclass(frozen=True, slots=True)
class Played:
    case: Case
    verdict: Verdict
    at_ms: int
    # For a machine told as one: when its greeting was said to be over, and whether it went on
    # after that (a message left then would be spoken over it).
    greeting_over_ms: int | None = None
    greeting_went_on: bool = False

    @property
    def is_right(self) -> bool:
        return self.verdict.answered_by == self.case.truth


def _verdict(pieces: Sequence[Piece]) -> tuple[Verdict, int]:
    so_far: list[Heard] = []
    last_ms: int | None = None
    for piece in sorted(pieces, key=lambda p: p.arrived_ms):
        due = settle_due_ms(0, last_ms)
        if due <= piece.arrived_ms:
            return settle(so_far), due
        so_far.append(piece.heard)
        last_ms = piece.arrived_ms
        verdict = listen(so_far)
        if verdict is not None:
            return verdict, piece.arrived_ms
    return settle(so_far), settle_due_ms(0, last_ms)


def _greeting_over_at(pieces: Sequence[Piece], since_ms: int) -> int | None:
    if not pieces:
        return None
    now = since_ms
    while now <= max(piece.arrived_ms for piece in pieces) + GREETING_WAIT_MS:
        arrived = [piece for piece in pieces if piece.arrived_ms <= now]
        silent_for = now - max(piece.arrived_ms for piece in arrived)
        if greeting_over([piece.heard for piece in arrived], silent_for):
            return now
        now += POLL_MS
    return None


def play(case: Case) -> Played:
    """The case on the call's timeline: the verdict and when, and for a machine its greeting's end."""
    verdict, at_ms = _verdict(case.pieces)
    if case.truth != "machine" or verdict.answered_by != "machine":
        return Played(case, verdict, at_ms)
    over_ms = _greeting_over_at(case.pieces, at_ms)
    went_on = over_ms is not None and any(piece.heard.start_ms > over_ms for piece in case.pieces)
    return Played(case, verdict, at_ms, over_ms, went_on)


def _share(right: int, of: int) -> float:
    return round(right / of, 3) if of else math.nan


def figures(played: Sequence[Played]) -> dict[str, Any]:
    """Accuracy overall and per truth, the confusion matrix, the mean time to a verdict (ms after
    the answer), the wrong cases, and how greetings' ends were told."""
    by_truth = {}
    for truth in TRUTHS:
        mine = [p for p in played if p.case.truth == truth]
        right = sum(p.is_right for p in mine)
        by_truth[truth] = {
            "cases": len(mine),
            "right": right,
            "accuracy": _share(right, len(mine)),
            "mean_ms_to_verdict": _mean([p.at_ms for p in mine]),
        }
    right = sum(p.is_right for p in played)
    over = [p for p in played if p.greeting_over_ms is not None]
    return {
        "cases": len(played),
        "right": right,
        "accuracy": _share(right, len(played)),
        "by_truth": by_truth,
        "confusion": {
            truth: {
                verdict: sum(1 for p in played if p.case.truth == truth and p.verdict.answered_by == verdict)
                for verdict in VERDICTS
            }
            for truth in TRUTHS
        },
        "mean_ms_to_verdict": _mean([p.at_ms for p in played]),
        "wrong": [
            {
                "name": p.case.name,
                "truth": p.case.truth,
                "kind": p.case.kind,
                "answered_by": p.verdict.answered_by,
                "rule": p.verdict.evidence.get("rule"),
            }
            for p in played
            if not p.is_right
        ],
        "greetings": {
            "machines_told": sum(1 for p in played if p.case.truth == "machine" and p.is_right),
            "over_told": len(over),
            "went_on_after": [p.case.name for p in over if p.greeting_went_on],
            "mean_ms_after_last_word": _mean(
                [
                    p.greeting_over_ms - p.case.pieces[-1].heard.end_ms
                    for p in over
                    if p.greeting_over_ms is not None and not p.greeting_went_on
                ]
            ),
        },
    }


def _mean(values: Sequence[int]) -> int | None:
    return round(sum(values) / len(values)) if values else None


def measure(path: Path = CASES) -> dict[str, Any]:
    """The figures for the cases in `path`."""
    return figures([play(case) for case in load_cases(path)])


def _report(result: dict[str, Any]) -> str:
    lines = [
        f"voicemail detection: {result['right']} / {result['cases']} right ({result['accuracy']:.1%}), "
        f"a verdict {result['mean_ms_to_verdict']} ms after the answer on average",
        "",
        f"{'truth':<10}{'cases':>7}{'right':>7}{'accuracy':>10}{'ms to verdict':>15}",
    ]
    for truth, row in result["by_truth"].items():
        lines.append(
            f"{truth:<10}{row['cases']:>7}{row['right']:>7}{row['accuracy']:>10.1%}{row['mean_ms_to_verdict']:>15}"
        )
    lines += ["", f"{'truth ↓ / told →':<18}" + "".join(f"{v:>9}" for v in VERDICTS)]
    for truth, row in result["confusion"].items():
        lines.append(f"{truth:<18}" + "".join(f"{row[v]:>9}" for v in VERDICTS))
    greetings = result["greetings"]
    lines += [
        "",
        f"greetings over: told for {greetings['over_told']} of the {greetings['machines_told']} machines "
        f"told, {greetings['mean_ms_after_last_word']} ms after the last word on average; "
        f"{len(greetings['went_on_after'])} went on after: {', '.join(greetings['went_on_after']) or 'none'}",
        "",
        "wrong:",
    ]
    lines += [
        f"  {w['name']:<28} {w['truth']:>7} → {w['answered_by']:<8} ({w['rule']}; {w['kind']})"
        for w in result["wrong"]
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    arguments = parser.parse_args()
    result = measure()
    print(json.dumps(result) if arguments.json else _report(result))


if __name__ == "__main__":
    main()
