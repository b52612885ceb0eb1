"""The simulator's Live oracle holds appends to the provider's 500 tokens by its own copy of the
conservative estimate (the simulator may not import the pipeline): the copy must count exactly
as `pipeline.live` does, or the oracle would pass what Switchboard cannot send, or refuse what
it bounds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.call import tokens
from pipeline.live import capabilities as live
from simulator import live_oracle

EXAMPLES = [
    "",
    " ",
    "Order 4417 ships Friday.",
    "x" * 1_800,
    "您的订单已经发货，预计星期五送到。",
    "はい、確認します。",
    "Привет, как дела?",
    "Καλημέρα σας",
    "café — naïve … “quoted”",
    "🎉👨\u200d👩\u200d👧",
    "".join(chr(0x20000 + i) for i in range(1_733)),
    "\x00\x7f\x80\u024f\u0250\u036f\u0370\u052f\u0530\uffff\U00010000\U0010ffff",
]


def test_the_two_estimates_agree_by_example() -> None:
    assert [live_oracle.estimated_tokens(text) for text in EXAMPLES] == [
        tokens.estimated_tokens(text) for text in EXAMPLES
    ]


@settings(max_examples=500, deadline=None)
@given(st.text() | st.text(min_size=1, max_size=8).map(lambda text: text * 300))
def test_the_two_estimates_agree_on_any_text(text: str) -> None:
    assert live_oracle.estimated_tokens(text) == tokens.estimated_tokens(text)


def test_the_oracle_bounds_what_the_pipeline_bounds_below() -> None:
    """Switchboard's budget is under the provider's bound, which the oracle holds appends to."""
    assert live.MAXIMUM_APPEND_TOKENS == live_oracle.MAXIMUM_APPEND_TOKENS
    assert live.APPEND_TOKEN_BUDGET < live_oracle.MAXIMUM_APPEND_TOKENS
    at_the_bound = {"type": "session.thinking.append", "delegation_id": None, "content": "中" * 500}
    assert live_oracle.live_wire_errors(at_the_bound, direction="client") == []
    over = {**at_the_bound, "content": "中" * 501}
    assert live_oracle.live_wire_errors(over, direction="client") == [
        "content: content is limited to 500 tokens; this is about 501"
    ]
    # The bound is the provider's on what a client sends, not on anything the service says.
    assert live_oracle.oversized_append({"type": "session.close", "content": "中" * 501}) is None
