"""How a call going out is getting on, in words every call shares: each wing says which of its
inputs mean these (`Dialect.call_progress`), and the dialing rules (`pipeline.outbound.dialing`) decide
what they mean for the call."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ringing:
    """The callee's phone rings."""


@dataclass(frozen=True, slots=True)
class Answered:
    """The call was answered: by a person or a machine, which the provider does not say."""


@dataclass(frozen=True, slots=True)
class DialFailed:
    """The call did not connect, with the provider's code (kept as it came) and message."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Said:
    """A piece of what the callee (`by_callee`) or the agent said, as it was written down, on the
    call's timeline: what tells a person from a machine, and when a message has been left."""

    text: str
    start_ms: int
    end_ms: int
    by_callee: bool


@dataclass(frozen=True, slots=True)
class AskedNotToBeCalled:
    """The provider's judge of the callee's words (Live's Decisions) holds they asked never to be
    called again, with this probability."""

    probability: float


CallProgress = Ringing | Answered | DialFailed | Said | AskedNotToBeCalled
