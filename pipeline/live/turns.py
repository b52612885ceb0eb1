"""Where a Live call's turns are among its durable events: Live sends no turn boundary (no
final transcript, no `response.done`), so a turn is what heard latency reads off the call's
timeline (`pipeline.live.sideband`, `pipeline.records.call_log`): the caller's words, then the agent's
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
from pipeline.session.timeline import Speaker


def spoken_by(event: dict[str, Any]) -> Speaker | None:
    """The speaker of a written-down transcript piece; None for any other event."""
    if event.get("type") != LIVE_TRANSCRIPT_TYPE:
        return None
    try:
        return Speaker(str(event.get("speaker")))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class LiveTurns:
    """Where a Live sideband is among its turns, as its durable events go by in the order they
    are numbered: a turn open or not, and answered by the agent yet or not."""

    is_open: bool = False
    is_answered: bool = False

    def step(self, event: dict[str, Any]) -> TurnStep:
        """What one durable event does to the turns."""
        speaker = spoken_by(event)
        if speaker is Speaker.CALLER and not (self.is_open and not self.is_answered):
            # The caller's words after the answer (or the call's first): a new turn.
            return TurnStep(LiveTurns(is_open=True), ends=self.is_open, opens=True)
        if speaker is Speaker.AGENT and self.is_open:
            return TurnStep(LiveTurns(is_open=True, is_answered=True))
        # More of the caller's words before the answer, a greeting, or any other event.
        return TurnStep(self)


@dataclass(frozen=True, slots=True)
class TurnStep:
    """The turns after one durable event, and whether the open turn ends before it and a turn
    opens with it."""

    turns: LiveTurns
    ends: bool = False
    opens: bool = False
