"""`Capabilities`: one flag for each thing a provider can or cannot do, and the one function
that turns a missing ability into the API's typed refusal.

A request a provider cannot carry out is refused, never faked: 409 `not_supported_on_<name>`
for a verb, with the wing's own words for why. docs/providers.md's table "What is refused where"
is checked against these literals (tests/pipeline/test_dialect.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from pipeline.call.tokens import estimated_tokens


class Ability(StrEnum):
    """What a request may need of the provider; each names a flag of `Capabilities`."""

    INTERRUPT = "interrupt"
    TYPED_CALLER_TEXT = "typed_caller_text"
    TOOLS = "tools"
    TAKE_OVER = "take_over"
    COMPACTION = "compaction"
    DELEGATIONS = "delegations"
    USAGE_IN_SECONDS = "usage_in_seconds"
    IDLE_SILENCES = "idle_silences"
    OUTBOUND_CALLS = "outbound_calls"


@dataclass(frozen=True)
class Capabilities:
    """What one provider can do. A wing defines exactly one, as a literal."""

    name: str
    """The provider's name as a session spec gives it, and in its refusals' codes."""
    interrupt: bool
    """The host can cut the agent's speech mid-sentence (`POST …/interrupt`)."""
    typed_caller_text: bool
    """Words can join the conversation as the caller's, mid-call (`POST …/caller/text`)."""
    tools: bool
    """The model calls the session's function tools, `end_call` among them (`PUT …/tools`)."""
    take_over: bool
    """The model can be kept quiet while it still hears the caller, so a person takes the line."""
    compaction: bool
    """Switchboard prunes and summarizes the model's context itself (`POST …/compact`)."""
    delegations: bool
    """The model delegates tasks to the session's delegation handler (a spec's `live`)."""
    usage_in_seconds: bool
    """Usage is reported in seconds, so a session can have a seconds budget."""
    idle_silences: bool
    """The provider reports the caller's silences (a route's `silences`)."""
    outbound_calls: bool
    """The provider places phone calls through a SIP trunk (`POST /v1/calls`, campaigns)."""
    responses: bool
    """The host asks for each of the agent's responses and sees it end; without them the agent's
    words are a turn as they come (the call log's `turn.agent`)."""
    append_tokens: int | None
    """The most one note to the model may hold, in estimated tokens (None: no bound)."""
    reasons: Mapping[Ability, str]
    """Why each thing the provider cannot do is refused, as the API's message says it."""

    def __post_init__(self) -> None:
        missing = [ability for ability in Ability if not self.can(ability) and ability not in self.reasons]
        if missing:
            raise ValueError(f"{self.name} cannot {', '.join(missing)} and does not say why")

    def can(self, ability: Ability) -> bool:
        flag: bool = getattr(self, ability.value)
        return flag

    @property
    def not_supported(self) -> str:
        """The code of a verb this provider cannot carry out."""
        return f"not_supported_on_{self.name}"

    @property
    def too_long(self) -> str:
        """The code of a note longer than one append."""
        return f"too_long_for_{self.name}"


@dataclass(frozen=True)
class Refusal:
    """A request refused: the HTTP status, the error's code and its message."""

    status: int
    code: str
    message: str


def refusal(capabilities: Capabilities, ability: Ability) -> Refusal | None:
    """Why a request that needs `ability` is refused on this provider, or None when it can."""
    if capabilities.can(ability):
        return None
    return Refusal(409, capabilities.not_supported, capabilities.reasons[ability])


def not_supported(capabilities: Capabilities) -> dict[str, dict[str, str]]:
    """Every ability this provider lacks, with the code and message its refusal is answered
    with: a client (the console) says why a verb is not offered before anyone asks for it."""
    shown: dict[str, dict[str, str]] = {}
    for ability in Ability:
        cannot = refusal(capabilities, ability)
        if cannot is not None:
            shown[ability.value] = {"code": cannot.code, "message": cannot.message}
    return shown


def too_long(capabilities: Capabilities, note: str) -> Refusal | None:
    """Why a note to the model (words to say or heed) is refused for its length on this
    provider, or None: what a person or an app asks for is refused rather than cut."""
    bound = capabilities.append_tokens
    tokens = estimated_tokens(note)
    if bound is None or tokens <= bound:
        return None
    name = capabilities.name.capitalize()
    return Refusal(
        422, capabilities.too_long, f"a {name} append holds at most {bound} tokens; this is about {tokens}"
    )
