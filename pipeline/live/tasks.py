"""A delegation's task: the caller's words up to its offset, and the settle window that waits
for the fragment covering it (see the package's docstring for the rules)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from pipeline.live.frames import DELEGATION_SETTLE_MS, spoken_text
from pipeline.session.timeline import Speaker, TranscriptFragment
from pipeline.session.timers import DelegationSettle, timer_name

# ── delegation tasks ────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class DelegationTask:
    """What the caller asked for, as far as the transcript says: their words from just after
    `since_ms` up to the delegation's `offset_ms`, the fragments they came from, and whether
    the caller's transcript had passed the offset (else the last words may be missing)."""

    delegation_id: str
    offset_ms: int
    text: str
    fragment_ids: tuple[str, ...]
    is_covered: bool
    since_ms: int | None = None


def distinct_fragments(fragments: Iterable[TranscriptFragment]) -> tuple[TranscriptFragment, ...]:
    """Each fragment once, in timeline order: a delta delivered twice (by event id, or the same
    words at the same place under another id, as a gateway re-sending after a restart may) counts
    once, and fragments that arrived out of order are put back in order of where they start."""
    seen_ids: set[str] = set()
    seen_places: set[tuple[Speaker, int, int, str]] = set()
    kept: list[TranscriptFragment] = []
    for fragment in fragments:
        place = (fragment.speaker, fragment.start_ms, fragment.end_ms, fragment.text)
        if fragment.event_id in seen_ids or place in seen_places:
            continue
        seen_ids.add(fragment.event_id)
        seen_places.add(place)
        kept.append(fragment)
    # Stable: two fragments starting at the same point keep their arrival order.
    return tuple(sorted(kept, key=lambda fragment: (fragment.start_ms, fragment.end_ms)))


def is_offset_covered(fragments: Iterable[TranscriptFragment], offset_ms: int) -> bool:
    """Whether the caller's transcript has passed the offset: a caller fragment ends after it."""
    # Ranges are half-open, [start_ms, end_ms): the word at the offset is the one that starts
    # there (recorded: offset 4600, covering fragment 4600-4800 " result."), so a fragment
    # that ends exactly at the offset is the word before it and does not cover it.
    return any(fragment.speaker is Speaker.CALLER and fragment.end_ms > offset_ms for fragment in fragments)


def build_task(
    fragments: Iterable[TranscriptFragment],
    *,
    delegation_id: str,
    offset_ms: int,
    since_ms: int | None = None,
) -> DelegationTask:
    """The task of a client delegation: the caller's fragments that start after `since_ms` (the
    previous delegation's offset, whose own task took the words up to it; None for the whole
    call) and at or before `offset_ms`, each once, in timeline order."""
    ordered = distinct_fragments(fragments)
    words = [
        fragment
        for fragment in ordered
        if fragment.speaker is Speaker.CALLER
        and fragment.start_ms <= offset_ms
        and (since_ms is None or fragment.start_ms > since_ms)
    ]
    return DelegationTask(
        delegation_id=delegation_id,
        offset_ms=offset_ms,
        text=" ".join(spoken_text(words).split()),
        fragment_ids=tuple(fragment.event_id for fragment in words),
        is_covered=is_offset_covered(ordered, offset_ms),
        since_ms=since_ms,
    )


class SettleVerdict(StrEnum):
    """Whether a delegation's task can be built now: COVERED (the covering fragment is known),
    EXPIRED (the settle window is over without it: go ahead with what there is), or WAIT."""

    COVERED = "covered"
    EXPIRED = "expired"
    WAIT = "wait"


@dataclass(frozen=True, slots=True)
class Settle:
    """A settle decision: the verdict, the window's wall-clock deadline (seconds), and how long
    from now a delayed message should fire to look again (0 once ready)."""

    verdict: SettleVerdict
    deadline: float
    wait_ms: int = 0

    @property
    def is_ready(self) -> bool:
        return self.verdict is not SettleVerdict.WAIT


def settle(
    fragments: Iterable[TranscriptFragment],
    *,
    offset_ms: int,
    delegated_at: float,
    now: float,
    settle_ms: int = DELEGATION_SETTLE_MS,
) -> Settle:
    """Decide whether a delegation that arrived at `delegated_at` (wall seconds) can have its
    task built at `now`, or must wait for the fragment covering its offset until the deadline."""
    deadline = delegated_at + settle_ms / 1000
    if is_offset_covered(fragments, offset_ms):
        return Settle(SettleVerdict.COVERED, deadline)
    if now >= deadline:
        return Settle(SettleVerdict.EXPIRED, deadline)
    # Rounded up (after the float noise of wall-clock seconds is rounded away): a timer that
    # fires a millisecond early would only find it still waiting.
    return Settle(SettleVerdict.WAIT, deadline, math.ceil(round((deadline - now) * 1000, 3)))


def settle_timer(delegation_id: str) -> str:
    """The name of the durable timer that ends a delegation's settle window."""
    return timer_name(DelegationSettle(delegation_id))
