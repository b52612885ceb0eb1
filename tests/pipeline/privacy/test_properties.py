"""The redactor's properties (hypothesis): no card is left readable, redacting twice changes
nothing, text with nothing to find is untouched, and the delta gate agrees with the batch."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline.privacy.detect import MAXIMUM_SEGMENT_CHARS, _tokens, find, redact, segments
from pipeline.privacy.stream import MAXIMUM_HELD_CHARS, DeltaGate
from tests.pipeline.privacy.strategies import TEXTS, WORDS, said_cards

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# What a card may stand between: a separator no number runs across, then any text.
BOUNDARIES = st.sampled_from([" ", "\n", ": ", " (", "! ", " is ", ", card "])


def _digits_of(text: str) -> str:
    """Every digit `text` reads as, written or spoken, in order."""
    return "".join(str(digit) for token in _tokens(text) for digit in token.digits)


@PROPERTY_SETTINGS
@given(st.text(max_size=40), BOUNDARIES, said_cards(), BOUNDARIES, st.text(max_size=40))
def test_no_card_number_is_left_readable(
    before: str, left: str, card: tuple[tuple[int, ...], str], right: str, after: str
) -> None:
    """A Luhn-valid number of 13 to 19 digits, written or spoken any way, between any texts,
    leaves none of the digits its mask hides readable."""
    digits, said = card
    redacted = redact(before + left + said + right + after)
    hidden = "".join(map(str, digits[:-4]))
    assert said not in redacted
    assert hidden not in _digits_of(redacted)


@PROPERTY_SETTINGS
@given(TEXTS)
def test_redacting_twice_is_redacting_once(text: str) -> None:
    """A redacted text has nothing left to redact: masks are not read as new values."""
    once = redact(text)
    assert redact(once) == once


@PROPERTY_SETTINGS
@given(TEXTS)
def test_redact_replaces_exactly_what_find_reports(text: str) -> None:
    """The findings are in order, none overlapping, and replacing each by its mask is `redact`
    (over-long segments aside: those are masked whole and report nothing)."""
    assume(all(end - start <= MAXIMUM_SEGMENT_CHARS for start, end in segments(text)))
    findings = find(text)
    pieces, position = [], 0
    for finding in findings:
        assert position <= finding.start < finding.end
        pieces += [text[position : finding.start], finding.masked]
        position = finding.end
    assert "".join([*pieces, text[position:]]) == redact(text)


# No decimal digit (of any script) and no "@"; spoken digits may be there, too few to be a number.
NOTHING_TO_FIND = st.lists(
    st.one_of(
        st.text(st.characters(blacklist_categories=["Nd"], blacklist_characters="@"), max_size=20),
        st.sampled_from([*WORDS, "oh", "double", "triple", " "]),
    ),
    max_size=8,
).map("".join)


@PROPERTY_SETTINGS
@given(NOTHING_TO_FIND)
def test_text_with_nothing_to_find_is_unchanged(text: str) -> None:
    """Text with no digit, no "@" and fewer digit words than any number needs is untouched."""
    assert len(text) <= MAXIMUM_SEGMENT_CHARS
    assert redact(text) == text


@st.composite
def split_texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(TEXTS)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in pairwise(bounds)]


@PROPERTY_SETTINGS
@given(split_texts())
def test_the_delta_gate_releases_what_the_batch_redacts(split: tuple[str, list[str]]) -> None:
    """However a text is cut into deltas, what the gate releases and flushes is `redact(text)`,
    and it never holds more than its bound."""
    text, deltas = split
    gate = DeltaGate()
    released = []
    for delta in deltas:
        released.append(gate.push(delta))
        assert gate.held_chars <= MAXIMUM_HELD_CHARS
    assert "".join(released) + gate.flush() == redact(text)
