"""What a provider's own input means for the call log's turns, in words every call shares: the
call log (`pipeline.records.call_log`) tells the agent's turns by these marks, and each wing says which of
its inputs make them (`Dialect.story_mark`)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.call.heard import HeardWait


@dataclass(frozen=True, slots=True)
class ResponseBegun:
    """The agent began a response: how long its caller waited is measured to here."""

    response_id: str


@dataclass(frozen=True, slots=True)
class ResponseEnded:
    """A response ended: the agent's words said in it are one turn, cut short or not; `heard` is
    what the caller waited for its first audio, when it answered their speech."""

    response_id: str
    interrupted: bool
    heard: HeardWait | None = None


@dataclass(frozen=True, slots=True)
class SpokenPiece:
    """A transcript written down in pieces on the call's timeline: consecutive pieces of one
    speaker less than `joins_within_ms` apart are one turn."""

    start_ms: int
    end_ms: int
    joins_within_ms: int


@dataclass(frozen=True, slots=True)
class AnswerPlaced:
    """Words Switchboard sent the model to say took their place on the call's timeline at
    `at_ms` (a provider that takes its turns itself): a caller's wait that ends in them was
    Switchboard's up to there."""

    at_ms: int


StoryMark = ResponseBegun | ResponseEnded | SpokenPiece | AnswerPlaced
