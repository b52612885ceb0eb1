"""Where a Live call's turns are among its durable events: Live sends no turn boundary (no
final transcript, no `response.done`), so a turn is what heard latency reads off the call's
timeline (`pipeline.live.sideband`, `pipeline.call_log`): the caller's words, then the agent's
first words after them. A turn opens with the caller's first written-down piece; the caller's
further pieces before the agent answers are the same turn (as heard latency waits from the end
of the caller's last words); it ends when the caller speaks again after the agent answered, or
when the sideband closes. What lies between (a delegation, the worker's commentary, the agent's
answer in several pieces, usage) is that turn's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.live.events import LIVE_TRANSCRIPT_TYPE
from pipeline.timeline import Speaker


def spoken_by(event: dict[str, Any]) -> Speaker | None:
    """The speaker of a written-down transcript piece; None for any other event."""
    if event.get("type") != LIVE_TRANSCRIPT_TYPE:
        return None
    try:
        return Speaker(str(event.get("speaker")))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class TurnStep:
    """What one durable event does to the turns: the open turn ends before it, a turn opens
    with it, or neither."""

    ends: bool = False
    opens: bool = False


@dataclass(slots=True)
class LiveTurns:
    """A Live sideband's turn as its durable events go by, in the order they are numbered."""

    open: bool = False
    answered: bool = False

    def step(self, event: dict[str, Any]) -> TurnStep:
        speaker = spoken_by(event)
        if speaker is Speaker.CALLER:
            if self.open and not self.answered:
                return TurnStep()  # more of the caller's words before the answer
            ends = self.open
            self.open, self.answered = True, False
            return TurnStep(ends=ends, opens=True)
        if speaker is Speaker.AGENT and self.open:
            self.answered = True
        return TurnStep()

    def close(self) -> bool:
        """The sideband closed: whether a turn was open (it ends with it)."""
        was_open, self.open, self.answered = self.open, False, False
        return was_open
