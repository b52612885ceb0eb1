"""Values said across the Live gateway's write-down by time (issue 44, item 9), driven through
the Live wing behind the privacy boundary without a socket.

A Live call's words are written down once a second while the speaker talks, wherever they are.
For every value of a corpus, said in a sentence cut into deltas, the write-down is made to land
at every split point in turn (between any two deltas, and inside words when the deltas are
three characters long); then every piece written down, the line they make, every line the
watchers were shown before the last, and the watchers' deltas are read for the value. None may
hold it: the digits a mask hides, or the hidden letters of an address."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from pipeline.call.sideband import Action, Delta, Final, Submit
from pipeline.live.frames import FLUSH_AFTER_MS, TAIL_PAUSE_MS
from pipeline.live.sideband import LiveSideband
from pipeline.privacy.boundary import PrivateSideband, Redactor
from pipeline.privacy.detect import ALL_KINDS, _tokens
from pipeline.privacy.stream import open_tail

T0 = 1_700_000_000.0
# A fragment every 50 ms of wall time and 200 ms of timeline: no pause anywhere in a sentence.
FRAGMENT_S = 0.05
FRAGMENT_MS = 200


@dataclass(frozen=True)
class Said:
    """A sentence with one value in it: the digits its mask keeps, and the letters of an address's
    local part it hides (two at a time), none of which may be read anywhere else."""

    sentence: str
    kept_digits: str
    hidden_letters: str = ""


def _spoken(digits: str) -> str:
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    return " ".join(words[int(digit)] for digit in digits)


CORPUS = [
    Said("my card is 4111 1111 1111 1111 thanks a lot.", "1111"),
    Said("Sure, the number is 5500-0000-0000-0004, okay?", "0004"),
    Said(f"it is {_spoken('4532015112830366')} and that is it", "0366"),
    Said("card 3782 822463 10005 please", "0005"),
    Said("my social is 219-09-9999 thanks", "9999"),
    Said(f"my social is {_spoken('219099999')} ok", "9999"),
    Said("call me on 415-555-0123 tonight", "23"),
    Said("my iban is DE89 3704 0044 0532 0130 00 thanks", "3000"),
    Said("write to qzxkvw.jqpy@example.org please", "", "zxkvw.jqpy"),
]


def _fragments(sentence: str, style: str) -> list[str]:
    if style == "words":
        words = sentence.split(" ")
        return [words[0], *(f" {word}" for word in words[1:])]
    return [sentence[index : index + 3] for index in range(0, len(sentence), 3)]


def _frame(index: int, text: str) -> str:
    return json.dumps(
        {
            "type": "session.input_transcript.delta",
            "event_id": f"ev_{index}",
            "start_ms": index * FRAGMENT_MS,
            "end_ms": (index + 1) * FRAGMENT_MS,
            "delta": text,
        }
    )


def _said_with_a_write_down_after(deltas: list[str], split: int) -> list[Action]:
    """The sentence's deltas through the boundary, the speaker never pausing, with the gateway's
    write-down by time due just after delta `split`; then another second of the call, its close."""
    boundary = PrivateSideband(LiveSideband(), Redactor(ALL_KINDS), is_watched=lambda: True)
    actions: list[Action] = []
    at = T0
    for index, text in enumerate(deltas):
        if index == split:
            # The oldest words have waited a second: they are written down now, mid-sentence.
            at = T0 + FLUSH_AFTER_MS / 1000
            actions += boundary.tick(at)
        at += FRAGMENT_S
        actions += boundary.receive(_frame(index, text), at, 0.0)
    actions += boundary.tick(at + FLUSH_AFTER_MS / 1000)
    actions += boundary.close(at + 10)
    return actions


def _digits(text: str) -> str:
    """Every digit `text` reads as, written or spoken, in order."""
    return "".join(str(digit) for token in _tokens(text) for digit in token.digits)


def _leaks(said: Said, actions: list[Action]) -> list[str]:
    """Where the value can be read: each text kept or shown, which may hold no digit but the
    ones its mask keeps, and none of the hidden letters."""
    pieces = [action.event for action in actions if isinstance(action, Submit)]
    finals = [action.text for action in actions if isinstance(action, Final)]
    shown: dict[str, str] = {
        "line": "".join(piece["text"] for piece in pieces),
        "deltas": "".join(action.text for action in actions if isinstance(action, Delta)),
    }
    for number, piece in enumerate(pieces):
        shown[f"piece {number}"] = piece["text"]
        shown[f"piece {number} fragments"] = "".join(fragment["text"] for fragment in piece["fragments"])
    for number, final in enumerate(finals[:-1]):
        shown[f"final {number}"] = final
    pairs = {said.hidden_letters[i : i + 2] for i in range(len(said.hidden_letters) - 1)}
    found = [
        f"{where}: {text!r}"
        for where, text in shown.items()
        if _digits(text) not in ("", said.kept_digits) or any(pair in text for pair in pairs)
    ]
    # The last line the watchers see is the whole line, masked, like the record's.
    if finals[-1] != shown["line"] or _digits(finals[-1]) != said.kept_digits:
        found.append(f"last final: {finals[-1]!r}")
    return found


@pytest.mark.parametrize("style", ["words", "three characters"])
def test_no_value_said_across_a_write_down_is_readable_in_any_piece_or_shown_line(style: str) -> None:
    """A write-down by time at any point of a sentence leaves the value in it masked in every
    piece, in the line they make, in every line shown before the last, and in the deltas."""
    leaked: dict[str, list[str]] = {}
    splits = 0
    for said in CORPUS:
        deltas = _fragments(said.sentence, style)
        for split in range(1, len(deltas)):
            splits += 1
            found = _leaks(said, _said_with_a_write_down_after(deltas, split))
            if found:
                leaked[f"{said.sentence!r} after delta {split}"] = found
    print(f"{style}: {len(leaked)} of {splits} split points leave a value readable")
    assert leaked == {}


def test_a_write_down_by_time_ends_before_an_open_tail_and_the_rest_follows() -> None:
    """Mid-speech, the piece written ends before the words that may be a card's first digits;
    they wait for the next piece."""
    boundary = PrivateSideband(LiveSideband(), Redactor(ALL_KINDS), is_watched=lambda: True)
    deltas = ["Sure,", " thanks", " card", " 4111", " 1111"]
    heard = [boundary.receive(_frame(i, text), T0 + i * FRAGMENT_S, 0.0) for i, text in enumerate(deltas)]
    assert [action for actions in heard for action in actions if isinstance(action, Submit)] == []
    written = [action for action in boundary.tick(T0 + 1.0) if isinstance(action, Submit)]
    assert [piece.event["text"] for piece in written] == ["Sure, thanks card"]
    for index, text in enumerate([" 1111", " 1111", " thanks", " bye"], start=len(deltas)):
        boundary.receive(_frame(index, text), T0 + 1.0 + index * FRAGMENT_S, 0.0)
    rest = [action for action in boundary.tick(T0 + 2.5) if isinstance(action, Submit)]
    assert [piece.event["text"] for piece in rest] == [" •••• •••• •••• 1111 thanks"]


def test_ordinary_speech_is_still_written_down_a_piece_a_second_and_whole() -> None:
    """Keeping open tails back moves words to the next piece, and no more: a caller talking for
    3.6 seconds (eighteen words) is written down in five pieces or fewer, which hold every word
    once."""
    boundary = PrivateSideband(LiveSideband(), Redactor(ALL_KINDS), is_watched=lambda: False)
    said = "Hello, this is Sam calling about the kettle from your spring catalogue, and I would like to know"
    words = said.split(" ")
    actions: list[Action] = []
    for index, word in enumerate(words):
        at = T0 + index * 0.2
        actions += boundary.receive(_frame(index, word if index == 0 else f" {word}"), at, 0.0)
        actions += boundary.tick(at + 0.1)
    actions += boundary.close(T0 + 60)
    pieces = [action.event["text"] for action in actions if isinstance(action, Submit)]
    assert "".join(pieces) == " ".join(words)
    assert len(words) == 18 and len(pieces) <= 5


def test_empty_deltas_at_a_write_down_change_nothing() -> None:
    """A delta with no words (the provider sends them) may stand where a piece is cut."""
    boundary = PrivateSideband(LiveSideband(), Redactor(ALL_KINDS), is_watched=lambda: True)
    for index, text in enumerate(["", "thanks ", "", "4111", ""]):
        boundary.receive(_frame(index, text), T0 + index * FRAGMENT_S, 0.0)
    written = [a.event["text"] for a in boundary.tick(T0 + 1.0) if isinstance(a, Submit)]
    assert written == ["thanks "]
    assert [a.event["text"] for a in boundary.close(T0 + 2.0) if isinstance(a, Submit)] == ["4111"]


def test_a_kept_tail_is_written_down_whole_once_its_speaker_pauses() -> None:
    """Words kept back are not kept for ever: a speaker silent for `TAIL_PAUSE_MS` has finished
    the value, if it was one, and the tail is written as it is."""
    boundary = PrivateSideband(LiveSideband(), Redactor(ALL_KINDS), is_watched=lambda: True)
    for index, text in enumerate(["4417", " 8812"]):
        boundary.receive(_frame(index, text), T0 + index * FRAGMENT_S, 0.0)
    assert boundary.tick(T0 + 1.0) == []
    last_word_at = T0 + FRAGMENT_S
    assert boundary.tick(last_word_at + TAIL_PAUSE_MS / 1000 - 0.01) == []
    paused = [a for a in boundary.tick(last_word_at + TAIL_PAUSE_MS / 1000) if isinstance(a, Submit)]
    assert [piece.event["text"] for piece in paused] == ["4417 8812"]
    assert boundary.close(T0 + 60) == []


def test_a_wing_without_the_boundary_writes_down_wherever_the_second_falls() -> None:
    """The open tail is the boundary's rule: the wing alone writes everything it holds."""
    wing = LiveSideband()
    for index, text in enumerate(["card", " 4111"]):
        wing.receive(_frame(index, text), T0 + index * FRAGMENT_S, 0.0)
    assert [a.event["text"] for a in wing.tick(T0 + 1.0) if isinstance(a, Submit)] == ["card 4111"]


@pytest.mark.parametrize(
    ("text", "kept_from"),
    [
        ("my card is 4111", 11),  # the number's first group on
        ("hello there, thanks 4111", 20),
        ("hello there, thanks ", 20),  # ends in a space after nothing a value is made of: none
        ("write to john", 9),  # "john" may be an address's local part going on
        ("thanks, fo", 8),  # "fo" may be "four"
        ("thanks for", 7),  # "for" may be "four" heard
        ("Is that right? ", 15),
        ("Wonderful, thanks", 11),  # a word at the very end may go on ("thanks@…")
        ("please card 4111 1111 and", 12),  # a number's groups run on over spaces and "and"
        ("email is john.smith@exa", 9),  # an address is the word its "@" is in
        ("call me on +", 11),
        ("my iban is DE", 11),
    ],
)
def test_the_open_tail_begins_where_a_value_said_on_could_have_begun(text: str, kept_from: int) -> None:
    """After the last settled barrier, the open end begins at the word of the first digit, digit
    word, "for", "@", "+" or "(", or else at the last word if a value could go on from it;
    `len(text)` when nothing could."""
    assert open_tail(text) == kept_from
