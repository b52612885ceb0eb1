"""Any text at all (hypothesis): what Switchboard appends on a Live sideband is within the
provider's 500 tokens by the conservative estimate (LIVE_PROTOCOL.md §1.3, §4), and the
simulator's oracle, which holds appends to the same estimate, accepts it; what is refused rather
than cut is refused exactly when the estimate is over the bound."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.call.tokens import estimated_tokens
from pipeline.live.capabilities import APPEND_TOKEN_BUDGET, MAXIMUM_APPEND_TOKENS
from pipeline.live.controls import LiveAppend, bounded_content, commentary_append, too_long_to_append
from simulator.live_oracle import live_wire_errors

# Any Unicode, the supplementary planes included (every category but lone surrogates, which no
# UTF-8 text can hold), in short texts and in texts long enough to be over the bound: a short
# one repeated, or pieces of the scripts the estimate treats differently.
_PIECES = st.sampled_from(
    [
        "staging ",
        "word",
        " ",
        "4417",
        "—",
        "…",
        "您的订单",
        "はい",
        "Привет ",
        "Καλημέρα ",
        "é",
        "🎉",
        "\U00020000",
    ]
)
TEXTS = st.one_of(
    st.text(),
    st.text(st.characters(codec="utf-8"), max_size=2_500),
    st.builds(lambda text, times: text * times, st.text(min_size=1, max_size=12), st.integers(1, 2_000)),
    st.lists(_PIECES, max_size=2_000).map("".join),
)


def _alphabetic(char: str) -> bool:
    return char <= "\u024f" or "\u0370" <= char <= "\u052f"


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_bounded_content_is_always_within_the_bound_and_accepted_by_the_oracle(text: str) -> None:
    assume(text.strip())
    bounded = bounded_content(text)
    assert estimated_tokens(bounded) <= APPEND_TOKEN_BUDGET < MAXIMUM_APPEND_TOKENS
    assert bounded == text or (bounded.endswith("…") and text.startswith(bounded.removesuffix("…")))
    assert live_wire_errors(commentary_append(text, delegation_id=None), direction="client") == []


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_text_is_refused_exactly_when_its_estimate_is_over_the_bound(text: str) -> None:
    within = estimated_tokens(text) <= APPEND_TOKEN_BUDGET
    assert (too_long_to_append(text) is None) is within
    if text.strip():
        assert (bounded_content(text) == text) is within


@settings(max_examples=300, deadline=None)
@given(TEXTS, TEXTS)
def test_the_estimate_counts_the_floor_the_issue_asks_for_and_is_monotone_and_subadditive(
    text: str, more: str
) -> None:
    """Every character outside Latin, Greek and Cyrillic is at least a token (one beyond the
    Basic Multilingual Plane at least its four UTF-8 bytes), and those scripts at least a token
    per four characters; a prefix never counts more, and joined texts no more than the parts."""
    others = [char for char in text if not _alphabetic(char)]
    supplementary = sum(1 for char in text if ord(char) > 0xFFFF)
    alphabetic = len(text) - len(others)
    assert estimated_tokens(text) >= len(others) + 3 * supplementary + math.ceil(alphabetic / 4)
    assert estimated_tokens(text[: len(text) // 2]) <= estimated_tokens(text)
    assert estimated_tokens(text + more) <= estimated_tokens(text) + estimated_tokens(more)


def test_the_estimate_by_example() -> None:
    assert estimated_tokens("") == 0
    assert estimated_tokens("Order 4417 ships Friday.") == 6  # 24 characters
    assert estimated_tokens("x" * 4 * APPEND_TOKEN_BUDGET) == APPEND_TOKEN_BUDGET  # the old 1,800
    assert estimated_tokens("您的订单已经发货。") == 9
    assert estimated_tokens("Привет") == 3  # twelve bytes
    assert estimated_tokens("\U00020000") == 4
    assert estimated_tokens("a中a") == 3  # each run is at least a token


def test_an_append_over_the_bound_is_not_a_valid_control_and_the_refusal_names_tokens() -> None:
    text = "中" * (APPEND_TOKEN_BUDGET + 1)
    assert too_long_to_append(text) == (
        f"a Live append holds at most {APPEND_TOKEN_BUDGET} tokens; this is about {APPEND_TOKEN_BUDGET + 1}"
    )
    with pytest.raises(ValidationError, match="tokens"):
        LiveAppend(type="session.thinking.append", delegation_id=None, content=text)
    within = LiveAppend(type="session.thinking.append", delegation_id=None, content=text[1:])
    assert within.content == text[1:]
