"""A transcript's deltas redacted as they arrive, agreeing exactly with `detect.redact`.

A card number said "four one one one …" arrives over many deltas; releasing each as it comes
would show the watchers the first digits before the last ones make it a card. `DeltaGate`
holds back the text after the last barrier (`detect.barriers`: no value spans one) and
releases, redacted, everything before it. So, for any split of any text,

    "".join(gate.push(delta) for delta in deltas) + gate.flush() == redact(text)

The held-back text is bounded: at most `MAXIMUM_HELD_CHARS` after a push, because a segment
that grows past `detect.MAXIMUM_SEGMENT_CHARS` without a barrier is masked whole
(`detect.fail_closed`, letter by letter), and that much can be released as it comes.

`open_tail` is the same rule for a wing that writes a speaker's words down in pieces while they
speak (Live): where a piece must end so that no value is cut in two.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipeline.privacy.detect import (
    ALL_KINDS,
    MAXIMUM_BARRIER_LETTERS,
    MAXIMUM_SEGMENT_CHARS,
    barriers,
    fail_closed,
    is_value_character,
    redact,
    redact_around,
    value_begins_at,
)
from pipeline.privacy.policy import Kind

# What a gate may hold after a push: an open segment up to its bound, and a word at the end
# that may yet turn out to be the barrier that closes it.
MAXIMUM_HELD_CHARS = MAXIMUM_SEGMENT_CHARS + MAXIMUM_BARRIER_LETTERS

_TRAILING_LETTERS = re.compile(r"[^\W\d_]*\Z")


class DeltaGate:
    """One transcript item's deltas in; what is safe to show out, redacted."""

    def __init__(self, kinds: Iterable[Kind] = ALL_KINDS, *, region: str = "US") -> None:
        self._kinds = frozenset(kinds)
        self._region = region
        # The text not yet released; it starts where a segment does, or, while `_over_long`,
        # inside a segment already known to be masked whole.
        self._held = ""
        self._over_long = False
        # The last character released: whether a word is a barrier depends on the one before
        # it ("x.hello" is part of an address, " hello" is not).
        self._before = ""

    # A count, not the text: what is held is still in the clear.
    @property
    def held_chars(self) -> int:
        """How many characters are held back (not yet released)."""
        return len(self._held)

    def push(self, delta: str) -> str:
        """Take the next delta; answer the redacted text that is safe to release now."""
        # What is held has no settled barrier (each push releases up to its last): only its
        # last word, or a "?" or "!" at its very end, may become one, so the search for them
        # starts just before — the work of a push is the delta's, not the held text's.
        search_from = max(0, len(self._held) - MAXIMUM_BARRIER_LETTERS - 2)
        self._held += delta
        released: list[str] = []
        while True:
            if self._over_long:
                barrier = next((b for b in self._barriers() if self._is_settled(b)), None)
                if barrier is None:
                    cut = self._undecided_from()
                    released.append(fail_closed(self._held[:cut]))
                    self._release(cut)
                    break
                start, end = barrier.start() - len(self._before), barrier.end() - len(self._before)
                released.append(fail_closed(self._held[:start]) + barrier.group())
                self._release(end)
                self._over_long = False
                search_from = 0
            settled = [b for b in self._barriers(search_from) if self._is_settled(b)]
            if settled:
                # Every barrier of what is released is among them (none was settled before).
                shift = len(self._before)
                cut = settled[-1].end() - shift
                spans = [(b.start() - shift, b.end() - shift) for b in settled]
                released.append(redact_around(self._held[:cut], spans, self._kinds, self._region))
                self._release(cut)
            # No barrier before `_undecided_from`, so the open segment is at least that long.
            if self._undecided_from() > MAXIMUM_SEGMENT_CHARS:
                self._over_long = True
                continue
            break
        return "".join(released)

    def flush(self) -> str:
        """The item is final: answer the rest, redacted."""
        held, self._held = self._held, ""
        if not self._over_long:
            self._before = ""
            return redact(held, self._kinds, region=self._region)
        self._over_long = False
        before, self._before = self._before, ""
        barrier = next(barriers(before + held, len(before)), None)
        if barrier is None:
            return fail_closed(held)
        start, end = barrier.start() - len(before), barrier.end() - len(before)
        rest = redact(held[end:], self._kinds, region=self._region)
        return fail_closed(held[:start]) + barrier.group() + rest

    def _barriers(self, start: int = 0) -> list[re.Match[str]]:
        """The barriers of the held text from `start` on."""
        return list(barriers(self._before + self._held, len(self._before) + start))

    def _release(self, cut: int) -> None:
        if cut:
            self._before = self._held[cut - 1]
            self._held = self._held[cut:]

    def _is_settled(self, barrier: re.Match[str]) -> bool:
        # A word at the very end may go on ("thank" → "thanks@…"), and so may a "?" or "!"
        # ("mailhost!username@…"); one character after it settles it (the barrier's lookahead
        # is one character).
        return barrier.end() < len(self._before) + len(self._held)

    def _undecided_from(self) -> int:
        """Where the held text stops being settled: before a trailing word that may be a barrier."""
        # Looked for among the last letters only: a longer run is no barrier either way.
        trailing = _TRAILING_LETTERS.search(self._held, max(0, len(self._held) - MAXIMUM_BARRIER_LETTERS - 1))
        assert trailing is not None  # the pattern matches the empty string at the end
        if trailing.end() - trailing.start() > MAXIMUM_BARRIER_LETTERS:
            return len(self._held)
        return trailing.start()


def open_tail(text: str) -> int:
    """Where the end of `text` could be the start of a value said on in the text that follows;
    `len(text)` when nothing of it could.

    No value goes on across a settled barrier (a word at the very end may go on), so the open
    end begins after the last one at the earliest: at the word of the first digit, digit word,
    "for", "@", "+" or "(" after it (a number's groups run on over spaces, an address's local
    part is the word the "@" is in), or else at the last word, if the text ends in a character a
    value is made of ("john", "fo" of "four"). What comes before that is safe to write down."""
    cut = 0
    for barrier in barriers(text):
        if barrier.end() == len(text):
            break  # unsettled: one more character may make it part of a value
        cut = barrier.end()
    open_from = len(text)
    begins = value_begins_at(text, cut)
    if begins is not None:
        open_from = _word_start(text, begins, cut)
    elif text and is_value_character(text[-1]):
        open_from = _word_start(text, len(text) - 1, cut)
    return open_from


def _word_start(text: str, position: int, floor: int) -> int:
    """Where the word `position` is in begins (after the last space before it), not before `floor`."""
    word = _WORD_BEFORE.search(text, floor, position)
    assert word is not None  # the pattern matches the empty string at the end
    return word.start()


_WORD_BEFORE = re.compile(r"\S*\Z")
