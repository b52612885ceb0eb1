"""The sideband's protocol core, whichever provider speaks it: frames in, actions out.

A wing's `Sideband` holds what one socket must remember between frames (the function calls it
has seen, what is playing, words not yet written down) and turns each provider frame into the
actions the gateway carries out, in order. It does no I/O and reads no clock: the gateway's
socket class feeds it and carries out what it says, the way websockets' connection drives its
`Protocol`, so every rule of the sideband is tested without a socket.

The actions name no provider:

- `Submit`: a durable event, numbered into the session's log and queued for the workers.
- `Incident`: a frame that could not be taken, recorded as the session's incident.
- `Delta`: words as they arrive, for the people watching the call (never logged).
- `Final`: a finished line of the transcript, for the people watching the call (of a wing that
  `WritesDownInPieces`, the line as written down so far).
- `Waited`: how long the caller waited for an answer's first audio, for the metric
  (`pipeline.call.heard`; the call log reads the same wait from the durable log).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["user", "assistant"]

# What of a bad frame its incident quotes: enough to recognise it, never the whole frame.
FRAME_PREVIEW_CHARACTERS = 200


@dataclass(frozen=True, slots=True)
class Submit:
    """A durable event, to be numbered into the session's log and queued."""

    event: dict[str, Any]
    received_at: float


@dataclass(frozen=True, slots=True)
class Incident:
    """A frame that could not be taken: the session's incident, with what it was."""

    code: str
    summary: str
    context: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Delta:
    """New words of a line being spoken, for the people watching the call."""

    role: Role
    item_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Final:
    """A finished line of the transcript, for the people watching the call."""

    role: Role
    item_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Waited:
    """The caller waited `wait_ms` from the end of their speech to the answer's first audio, on a
    call of `provider`: counted once, by the gateway that saw both (no worker's retry can count
    it again)."""

    provider: str
    wait_ms: int


Action = Submit | Incident | Delta | Final | Waited


def bad_frame(frame: str | bytes, code: str, summary: str) -> Incident:
    """The incident of a frame refused as `code`, quoting its start."""
    head = frame[:FRAME_PREVIEW_CHARACTERS]
    preview = head if isinstance(head, str) else head.decode(errors="replace")
    return Incident(code, summary, {"frame_preview": preview, "bytes": len(frame)})


class Sideband(Protocol):
    """One socket's protocol state for its provider; every entry point answers the actions to
    carry out, in order. Wall times are seconds since the epoch (as an envelope's
    `received_at`); `now` is a monotonic reading in seconds, for durations only."""

    tick_every_s: float | None
    """How often the sideband wants `tick` while it is open (None: never)."""

    closed_by_provider_within_s: float | None
    """How long the provider may take to close the sideband itself once the host ended the
    call (None: the host closes it at once)."""

    def receive(self, frame: str | bytes, received_at: float, now: float) -> list[Action]:
        """One frame from the provider, received at wall time `received_at`."""

    def tick(self, at: float) -> list[Action]:
        """Wall time `at` has come without a frame."""

    def close(self, at: float) -> list[Action]:
        """The sideband closed at wall time `at`: what it still holds is carried out now."""

    def playback(self, now: float) -> dict[str, Any] | None:
        """What the caller is hearing at `now`: the playing item and how long it has played
        (None when nothing plays, or the provider does not say)."""


OpenTail = Callable[[str], int]
"""Where the end of a text stops being safe to write down on its own: the index from which it
could be the start of a value said on (a card number's first digits), or the text's length when
nothing of its end could be."""


@runtime_checkable
class WritesDownInPieces(Protocol):
    """A sideband that writes a speaker's words down in pieces while they are still speaking
    (Live, which sends no final transcript). Its `Final`s are a line so far: the next piece of
    the same speaker may go on it."""

    def keep_open_tails(self, open_tail: OpenTail) -> None:
        """From now on, a piece written down while its speaker is still speaking ends before
        `open_tail` of its text; the rest is kept for the next piece."""
