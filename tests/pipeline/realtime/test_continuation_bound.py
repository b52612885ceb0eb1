"""The function_call_output bound: whatever a tool outcome holds, what goes to the provider
is at most 16,000 bytes of valid UTF-8 and valid JSON, and keeps its status and error."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.call.catalog import ToolError, ToolOutcome
from pipeline.realtime.tools import MAXIMUM_CONTINUATION_BYTES, TRUNCATION_NOTE, continuation_output

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)

# Every code point, lone surrogates included: a ToolOutcome built in Python holds them as is.
ANY_CHARACTER = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
# The characters JSON escaping makes longer: quotes, backslashes and control characters
# (two to six bytes each), astral characters (four bytes) and surrogates.
COSTLY_CHARACTER = st.sampled_from(['"', "\\", "\x00", "\x1f", "\n", "\U0001f600", "\ud800", "\udfff", "é"])
SOME_TEXT = st.text(st.one_of(ANY_CHARACTER, COSTLY_CHARACTER), max_size=40)
# A result only gets near the bound when it is large: a short piece repeated thousands of times.
LARGE_TEXT = st.builds(
    lambda piece, times: piece * times,
    st.text(st.one_of(ANY_CHARACTER, COSTLY_CHARACTER), min_size=1, max_size=6),
    st.integers(min_value=0, max_value=12_000),
)
TEXT = st.one_of(SOME_TEXT, LARGE_TEXT)
# What the tool runner lets through: JSON values (it refuses NaN and infinities).
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(SOME_TEXT, children, max_size=4),
    max_leaves=8,
)
UNSUCCESSFUL = st.sampled_from(["failed", "refused", "cancelled", "unavailable", "interrupted", "timed_out"])
OUTCOME = st.one_of(
    st.builds(lambda result: ToolOutcome(status="succeeded", result=result, elapsed_ms=1), JSON_VALUE),
    st.builds(
        lambda status, result, code, message: ToolOutcome(
            status=status, result=result, error=ToolError(code=code, message=message), elapsed_ms=1
        ),
        UNSUCCESSFUL,
        st.none() | JSON_VALUE,
        st.sampled_from(["tool_failed", "invalid_result", "tool_deadline_passed"]),
        TEXT,
    ),
)
CALL_ID = st.from_regex(r"call_[A-Za-z0-9]{1,32}", fullmatch=True)


def _size(output: str) -> int:
    # Raises on a lone surrogate: a str that is not valid UTF-8 has no size on the wire.
    return len(output.encode("utf-8"))


def _outcome(result: Any) -> ToolOutcome:
    return ToolOutcome(status="succeeded", result=result, elapsed_ms=1)


@PROPERTY_SETTINGS
@given(call_id=CALL_ID, outcome=OUTCOME)
@example(call_id="call_1", outcome=_outcome('"\\' * 10_000))
@example(call_id="call_1", outcome=_outcome("\x01" * 20_000))
@example(call_id="call_1", outcome=_outcome("\ud800" * 20_000))
@example(
    call_id="call_1",
    outcome=ToolOutcome(
        status="failed", error=ToolError(code="tool_failed", message='"' * 20_000), elapsed_ms=1
    ),
)
def test_every_output_is_bounded_valid_utf8_and_valid_json(call_id: str, outcome: ToolOutcome) -> None:
    """Every output fits in 16,000 bytes, encodes as UTF-8, parses as JSON, and keeps the
    call id, the status and the error code."""
    output = continuation_output(call_id, outcome)
    assert _size(output) <= MAXIMUM_CONTINUATION_BYTES
    decoded = json.loads(output, parse_constant=_refuse_constant)
    assert decoded["call_id"] == call_id and decoded["status"] == outcome.status
    if outcome.error is None:
        assert decoded["error"] is None
    else:
        assert decoded["error"]["code"] == outcome.error.code


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def test_a_result_of_quotes_and_backslashes_stays_within_the_bound() -> None:
    """Quotes and backslashes, which JSON escaping doubles, no longer push the output past
    16,000 bytes (it came out at 16,201 when the preview was cut before escaping)."""
    output = continuation_output("call_1", _outcome('"\\' * 10_000))
    assert _size(output) <= MAXIMUM_CONTINUATION_BYTES
    result = json.loads(output)["result"]
    assert result["truncated"] is True and result["note"] == TRUNCATION_NOTE
    assert result["preview"].startswith('"\\"\\\\\\"')


def test_the_preview_uses_the_room_the_bound_leaves() -> None:
    """A truncated output fills the bound to within one escaped character."""
    for result in ('"\\' * 10_000, "é" * 20_000, "a" * 20_000, "\x01" * 20_000):
        size = _size(continuation_output("call_1", _outcome(result)))
        # The widest character, \u0001 escaped twice, takes seven bytes.
        assert MAXIMUM_CONTINUATION_BYTES - 7 < size <= MAXIMUM_CONTINUATION_BYTES, result[:2]


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    """A lone surrogate, which UTF-8 cannot carry, is sent as U+FFFD; nothing else changes."""
    output = continuation_output("call_1", _outcome({"name": "a\ud800b"}))
    assert json.loads(output)["result"] == {"name": "a\ufffdb"}


def test_an_oversized_error_message_is_cut_and_keeps_its_code() -> None:
    """An error message too long for the bound is cut with an ellipsis; its code stays whole."""
    outcome = ToolOutcome(
        status="failed", error=ToolError(code="tool_failed", message="\\" * 20_000), elapsed_ms=1
    )
    output = continuation_output("call_1", outcome)
    assert _size(output) <= MAXIMUM_CONTINUATION_BYTES
    error = json.loads(output)["error"]
    assert error["code"] == "tool_failed" and error["message"].endswith("\\…")


def test_a_result_within_the_bound_is_sent_whole() -> None:
    """A result that fits is sent as it is, not as a preview."""
    output = continuation_output("call_1", _outcome({"order": "4417", "status": "shipped"}))
    assert json.loads(output)["result"] == {"order": "4417", "status": "shipped"}
