"""A session's timers, typed: one value per kind of timer, and the one name each is stored by.

A timer travels and is stored by its name: the `session_timers` row, the delayed message, and
the logged `switchboard.timer_fired` event all carry it. `timer_name` makes that name and
`parse_timer` reads it back. The names are durable (rows and logged events of sessions already
running carry them), so they are exactly what they have always been: a fixed name, or a prefix
and the timer's field. A field read from a name is whatever follows its prefix: an id is taken
as it is (even empty), and a number that is not all digits is read as 0 (none is ever written
so; the timer then finds nothing to act on). A name no kind owns parses to None.

This module imports nothing of Switchboard's, so any module may name its timers through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast, get_args

ADMISSION_TIMEOUT = "admission_timeout"
SESSION_CEILING = "session_ceiling"
SIDEBAND_RECONNECT_PREFIX = "sideband_reconnect:"
ATTENTION_PREFIX = "attention:"
DELEGATION_DEADLINE_PREFIX = "delegation_deadline:"
DELEGATION_SETTLE_PREFIX = "settle:"
COMPACTION_DEADLINE_PREFIX = "compaction_deadline:"
TOOL_DEADLINE_PREFIX = "tool_deadline:"
RESPONSE_DEADLINE_PREFIX = "response_deadline:"
SEQ_GAP_PREFIX = "seq_gap:"
KEYPAD_DEADLINE_PREFIX = "keypad_deadline:"
OUTBOUND_PREFIX = "outbound:"


@dataclass(frozen=True, slots=True)
class AdmissionTimeout:
    """The call did not connect within the admission timeout: the session fails."""


@dataclass(frozen=True, slots=True)
class SessionCeiling:
    """The session reached its maximum length: it finishes."""


@dataclass(frozen=True, slots=True)
class SidebandReconnect:
    """The reconnect backoff is over: re-open the lost sideband as `generation` (≥ 0)."""

    generation: int


@dataclass(frozen=True, slots=True)
class AttentionWait:
    """Nobody took the line within attention `number`'s wait (≥ 0): it is given back."""

    number: int


@dataclass(frozen=True, slots=True)
class DelegationDeadline:
    """A delegation handler's outcome never came back within its deadline."""

    delegation_id: str


@dataclass(frozen=True, slots=True)
class DelegationSettle:
    """A delegation's settle window is over: its task goes ahead with the words there are."""

    delegation_id: str


@dataclass(frozen=True, slots=True)
class CompactionDeadline:
    """Compaction `number` (≥ 0) never finished in time: it is abandoned."""

    number: int


@dataclass(frozen=True, slots=True)
class ToolDeadline:
    """A tool call's outcome never came back within its deadline."""

    call_id: str


@dataclass(frozen=True, slots=True)
class ResponseDeadline:
    """Response request `number` (≥ 0) never reported done: if still owed, it is lost."""

    number: int


@dataclass(frozen=True, slots=True)
class KeypadDeadline:
    """Keypad collection `number` is not over in time: the caller did not finish typing, or the
    tool that got the digits never reported back."""

    number: int


# What a call going out waits for, each with its own timer: the ringing to end, the verdict on
# who answered, the callee's pause, a machine's greeting to end, the message to be said.
OutboundStage = Literal["ring", "verdict", "callee_paused", "greeting_over", "message_said"]
OUTBOUND_STAGES: frozenset[str] = frozenset(get_args(OutboundStage))


@dataclass(frozen=True, slots=True)
class OutboundWait:
    """A call going out waited long enough at `stage`. `number` tells apart the waits of one
    stage that a newer one replaced (the count of what was heard when it was armed): only the
    latest one's firing still finds its row."""

    stage: OutboundStage
    number: int = 0


@dataclass(frozen=True, slots=True)
class SeqGap:
    """Seq `seq` (≥ 0) is still missing with events behind it: it is declared lost. The
    session's record acts on it (`models.sessions`), not its transitions."""

    seq: int


Timer = (
    AdmissionTimeout
    | SessionCeiling
    | SidebandReconnect
    | AttentionWait
    | DelegationDeadline
    | DelegationSettle
    | CompactionDeadline
    | ToolDeadline
    | ResponseDeadline
    | KeypadDeadline
    | OutboundWait
    | SeqGap
)


def timer_name(timer: Timer) -> str:
    """The durable name of a timer (the one `parse_timer` reads back)."""
    match timer:
        case AdmissionTimeout():
            return ADMISSION_TIMEOUT
        case SessionCeiling():
            return SESSION_CEILING
        case SidebandReconnect(generation):
            return f"{SIDEBAND_RECONNECT_PREFIX}{generation}"
        case AttentionWait(number):
            return f"{ATTENTION_PREFIX}{number}"
        case DelegationDeadline(delegation_id):
            return f"{DELEGATION_DEADLINE_PREFIX}{delegation_id}"
        case DelegationSettle(delegation_id):
            return f"{DELEGATION_SETTLE_PREFIX}{delegation_id}"
        case CompactionDeadline(number):
            return f"{COMPACTION_DEADLINE_PREFIX}{number}"
        case ToolDeadline(call_id):
            return f"{TOOL_DEADLINE_PREFIX}{call_id}"
        case ResponseDeadline(number):
            return f"{RESPONSE_DEADLINE_PREFIX}{number}"
        case KeypadDeadline(number):
            return f"{KEYPAD_DEADLINE_PREFIX}{number}"
        case OutboundWait(stage, number):
            return f"{OUTBOUND_PREFIX}{stage}:{number}"
        case SeqGap(seq):
            return f"{SEQ_GAP_PREFIX}{seq}"


def _digits(text: str) -> int | None:
    """The number `text` spells in digits, or None when it is not all digits (a sign, a space,
    nothing at all, or digits `int` cannot read, such as a superscript)."""
    if not text.isdigit():
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _number(text: str) -> int:
    """A timer's number as it has always been read: anything but digits counts as 0."""
    number = _digits(text)
    return 0 if number is None else number


def parse_timer(name: str) -> Timer | None:
    """The timer a name stands for, or None for a name no kind of timer owns (or a gap's whose
    seq is not digits: it was never a gap's). Never raises."""
    if name == ADMISSION_TIMEOUT:
        return AdmissionTimeout()
    if name == SESSION_CEILING:
        return SessionCeiling()
    if name.startswith(DELEGATION_DEADLINE_PREFIX):
        return DelegationDeadline(name.removeprefix(DELEGATION_DEADLINE_PREFIX))
    if name.startswith(DELEGATION_SETTLE_PREFIX):
        return DelegationSettle(name.removeprefix(DELEGATION_SETTLE_PREFIX))
    if name.startswith(TOOL_DEADLINE_PREFIX):
        return ToolDeadline(name.removeprefix(TOOL_DEADLINE_PREFIX))
    if name.startswith(SIDEBAND_RECONNECT_PREFIX):
        return SidebandReconnect(_number(name.removeprefix(SIDEBAND_RECONNECT_PREFIX)))
    if name.startswith(COMPACTION_DEADLINE_PREFIX):
        return CompactionDeadline(_number(name.removeprefix(COMPACTION_DEADLINE_PREFIX)))
    if name.startswith(ATTENTION_PREFIX):
        return AttentionWait(_number(name.removeprefix(ATTENTION_PREFIX)))
    if name.startswith(RESPONSE_DEADLINE_PREFIX):
        return ResponseDeadline(_number(name.removeprefix(RESPONSE_DEADLINE_PREFIX)))
    if name.startswith(KEYPAD_DEADLINE_PREFIX):
        return KeypadDeadline(_number(name.removeprefix(KEYPAD_DEADLINE_PREFIX)))
    if name.startswith(OUTBOUND_PREFIX):
        stage, _, number = name.removeprefix(OUTBOUND_PREFIX).partition(":")
        if stage not in OUTBOUND_STAGES:
            return None
        return OutboundWait(cast(OutboundStage, stage), _number(number))
    if name.startswith(SEQ_GAP_PREFIX):
        seq = _digits(name.removeprefix(SEQ_GAP_PREFIX))
        return None if seq is None else SeqGap(seq)
    return None
