"""Heard latency: how long a caller waits, from the end of their speech to the first audio of
the answer, and whose time that was.

Switchboard's share is its own hop, the call log's `latency_ms`: the event that ended the
caller's turn reaching the gateway to the provider acknowledging the control it caused. A
provider that takes its turns itself, as Live does, is sent no control for most of them: there
Switchboard's share is the wait up to where its own answer (a delegation's commentary) took its
place on the call's timeline, when that answer is what the caller heard first, else nothing. The
provider's share is the rest: transcribing the caller, the model's time to its first audio.

Each wing's sideband says when the caller's speech ended and the answer's audio began, in its own
provider's words; what is measured from those two moments is computed here, in one place, for the
call log, the session record, the end-of-call report and the metric alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class HeardWait:
    """The caller's speech ended, then the answer's first audio came (wall seconds, as the gateway
    received each)."""

    speech_ended_at: float
    first_audio_at: float


@dataclass(frozen=True, slots=True)
class Heard:
    """One turn's heard latency, split: `switchboard_ms + provider_ms == heard_ms`."""

    heard_ms: int
    switchboard_ms: int
    provider_ms: int

    def as_log(self) -> dict[str, Any]:
        """The call log's fields of an agent turn (`turn.agent`)."""
        return {
            "heard_ms": self.heard_ms,
            "heard": {"switchboard_ms": self.switchboard_ms, "provider_ms": self.provider_ms},
        }


# An agent turn whose wait is unknown (typed input, a greeting, an answer that began before the
# caller stopped speaking).
UNHEARD: dict[str, Any] = {"heard_ms": None, "heard": None}


def waited_ms(speech_ended: float, first_audio: float, *, per_second: float = 1.0) -> int | None:
    """How long the caller waited in ms, from two moments in one clock (`per_second` of its units
    make a second); None when the answer began before the caller stopped (an overlap: no wait)."""
    wait = round((first_audio - speech_ended) * 1000 / per_second)
    return wait if wait >= 0 else None


def split(heard_ms: int | None, switchboard_ms: int | None) -> Heard | None:
    """A turn's wait split into Switchboard's hop and the provider's rest. Switchboard's hop never
    counts for more than the whole wait (the caller may have spoken again after the words it
    answered); with its hop unknown, none of the wait is taken as Switchboard's."""
    if heard_ms is None:
        return None
    switchboard = min(max(switchboard_ms or 0, 0), heard_ms)
    return Heard(heard_ms, switchboard, heard_ms - switchboard)


def percentile(values: list[int], fraction: float) -> int:
    """The nearest-rank percentile of sorted `values` (not empty): a value that was measured."""
    rank = max(math.ceil(fraction * len(values)), 1)
    return values[rank - 1]


def summary(waits: Iterable[int | None]) -> dict[str, Any]:
    """A call's heard latency over its turns: p50 and p95 in ms (None without a measured turn),
    and how many turns were measured."""
    measured = sorted(wait for wait in waits if wait is not None)
    if not measured:
        return {"p50_ms": None, "p95_ms": None, "turns": 0}
    return {
        "p50_ms": percentile(measured, 0.50),
        "p95_ms": percentile(measured, 0.95),
        "turns": len(measured),
    }
