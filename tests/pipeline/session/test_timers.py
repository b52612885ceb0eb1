"""Typed timers: every kind's name reads back as the same timer, the names are exactly the ones
rows and logged events already carry, and no text makes the parse raise."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipeline.session.timers import (
    AdmissionTimeout,
    AttentionWait,
    CompactionDeadline,
    DelegationDeadline,
    DelegationSettle,
    KeypadDeadline,
    OutboundWait,
    ResponseDeadline,
    SeqGap,
    SessionCeiling,
    SidebandReconnect,
    Timer,
    ToolDeadline,
    parse_timer,
    timer_name,
)

# The numbers a timer is named with are counters (never negative); ids are any text.
_NUMBERS = st.integers(min_value=0, max_value=2**63)
_IDS = st.text()

TIMERS: st.SearchStrategy[Timer] = st.one_of(
    st.just(AdmissionTimeout()),
    st.just(SessionCeiling()),
    st.builds(SidebandReconnect, _NUMBERS),
    st.builds(AttentionWait, _NUMBERS),
    st.builds(DelegationDeadline, _IDS),
    st.builds(DelegationSettle, _IDS),
    st.builds(CompactionDeadline, _NUMBERS),
    st.builds(ToolDeadline, _IDS),
    st.builds(ResponseDeadline, _NUMBERS),
    st.builds(KeypadDeadline, _NUMBERS),
    st.builds(
        OutboundWait,
        st.sampled_from(["ring", "verdict", "callee_paused", "greeting_over", "message_said"]),
        _NUMBERS,
    ),
    st.builds(SeqGap, _NUMBERS),
)


@given(TIMERS)
def test_every_timer_reads_back_from_its_name(timer: Timer) -> None:
    assert parse_timer(timer_name(timer)) == timer


@given(st.text())
@example("attention:²")  # a digit `int` cannot read
@example("seq_gap:①")
@example("response_deadline:" + "9" * 5_000)  # more digits than `int` reads from text
@example("seq_gap:" + "9" * 5_000)
def test_no_text_makes_the_parse_raise(name: str) -> None:
    parse_timer(name)


@given(
    st.sampled_from(["sideband_reconnect:", "attention:", "compaction_deadline:", "response_deadline:"]),
    st.text(),
)
def test_any_name_with_a_prefix_is_that_prefix_s_timer(prefix: str, rest: str) -> None:
    """As the prefix guards had it: whatever follows a prefix, the timer is that prefix's."""
    timer = parse_timer(prefix + rest)
    assert timer is not None
    assert timer_name(timer).startswith(prefix)


@pytest.mark.parametrize(
    ("name", "timer"),
    [
        ("admission_timeout", AdmissionTimeout()),
        ("session_ceiling", SessionCeiling()),
        ("sideband_reconnect:3", SidebandReconnect(3)),
        ("attention:2", AttentionWait(2)),
        ("delegation_deadline:d_1", DelegationDeadline("d_1")),
        ("settle:d_1", DelegationSettle("d_1")),
        ("compaction_deadline:4", CompactionDeadline(4)),
        ("tool_deadline:call_1", ToolDeadline("call_1")),
        ("response_deadline:5", ResponseDeadline(5)),
        ("keypad_deadline:2", KeypadDeadline(2)),
        ("outbound:callee_paused:3", OutboundWait("callee_paused", 3)),
        ("seq_gap:17", SeqGap(17)),
    ],
)
def test_today_s_names_are_read_as_their_timers(name: str, timer: Timer) -> None:
    assert parse_timer(name) == timer
    assert timer_name(timer) == name


@pytest.mark.parametrize(
    ("name", "timer"),
    [
        # A number that is not all digits has always been read as 0.
        ("sideband_reconnect:", SidebandReconnect(0)),
        ("sideband_reconnect:x", SidebandReconnect(0)),
        ("attention:-1", AttentionWait(0)),
        ("compaction_deadline: 4", CompactionDeadline(0)),
        ("response_deadline:2.5", ResponseDeadline(0)),
        ("attention:²", AttentionWait(0)),
        # An id is whatever follows its prefix, even nothing, even another prefix.
        ("delegation_deadline:", DelegationDeadline("")),
        ("settle:settle:x", DelegationSettle("settle:x")),
        ("tool_deadline:a:b", ToolDeadline("a:b")),
    ],
)
def test_malformed_fields_are_read_as_before(name: str, timer: Timer) -> None:
    assert parse_timer(name) == timer


@pytest.mark.parametrize(
    "name",
    [
        "",
        "x",
        "admission_timeout ",
        "admission_timeout:1",
        "Session_ceiling",
        "seq_gap:",
        "seq_gap:x",
        "seq_gap:-1",
    ],
)
def test_names_no_timer_owns_parse_to_none(name: str) -> None:
    """Unknown names (and a gap's without a seq, which was never a gap's) change nothing."""
    assert parse_timer(name) is None


def _as_the_guards_read_it(name: str) -> Timer | None:
    """What `pipeline.transitions` made of a timer's name before the timers were typed: its prefix
    guards, in their order, and `sequencer.gap_of` for a gap (which reached the guards as an
    unknown name when its seq was not digits)."""
    if name.startswith("delegation_deadline:"):
        return DelegationDeadline(name.removeprefix("delegation_deadline:"))
    if name.startswith("settle:"):
        return DelegationSettle(name.removeprefix("settle:"))
    if name.startswith("tool_deadline:"):
        return ToolDeadline(name.removeprefix("tool_deadline:"))
    if name.startswith("sideband_reconnect:"):
        text = name.removeprefix("sideband_reconnect:")
        return SidebandReconnect(int(text) if text.isdigit() else 0)
    if name.startswith("compaction_deadline:"):
        text = name.removeprefix("compaction_deadline:")
        return CompactionDeadline(int(text) if text.isdigit() else 0)
    if name.startswith("attention:"):
        text = name.removeprefix("attention:")
        return AttentionWait(int(text) if text.isdigit() else 0)
    if name.startswith("response_deadline:"):
        text = name.removeprefix("response_deadline:")
        return ResponseDeadline(int(text) if text.isdigit() else 0)
    if name.startswith("seq_gap:"):
        text = name.removeprefix("seq_gap:")
        return SeqGap(int(text)) if text.isdigit() else None
    if name == "admission_timeout":
        return AdmissionTimeout()
    if name == "session_ceiling":
        return SessionCeiling()
    return None


_PREFIXES = [
    "",
    "admission_timeout",
    "session_ceiling",
    "sideband_reconnect:",
    "attention:",
    "delegation_deadline:",
    "settle:",
    "compaction_deadline:",
    "tool_deadline:",
    "response_deadline:",
    "seq_gap:",
]
_RESTS = st.one_of(st.text(), st.integers().map(str), st.text(alphabet="0123456789²٣ -+_:"))


@given(st.sampled_from(_PREFIXES), _RESTS)
def test_every_name_is_read_as_the_guards_read_it(prefix: str, rest: str) -> None:
    """Behaviour preserved: any name (a kind's prefix and anything after it, or any text) is
    the timer today's guards took it for. Where they raised (digits `int` cannot read), the
    number is now read as 0, as any other non-number is, and a gap's is no gap."""
    name = prefix + rest
    try:
        before = _as_the_guards_read_it(name)
    except ValueError:
        assert parse_timer(name) in (
            SidebandReconnect(0),
            CompactionDeadline(0),
            AttentionWait(0),
            ResponseDeadline(0),
            None,
        )
        return
    assert parse_timer(name) == before
