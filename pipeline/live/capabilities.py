"""What the Live API can do: the model holds the conversation and delegates, so the host can
neither cut its speech nor put words or tools into its conversation, and compaction is the
provider's."""

from __future__ import annotations

from pipeline.call.capabilities import Ability, Capabilities

# The provider refuses appended content over 500 tokens (LIVE_PROTOCOL.md §1.3, §4) and
# publishes no tokenizer, so Switchboard counts by `pipeline.call.tokens.estimated_tokens` and
# appends at most APPEND_TOKEN_BUDGET of them: the 10 % left over is for text denser than the
# estimate allows (digits, which tokenizers group at most three to a token; one-letter words),
# and keeps English exactly where the old bound of 1,800 characters had it, so a terminal
# commentary is never refused for its length.
MAXIMUM_APPEND_TOKENS = 500
APPEND_TOKEN_BUDGET = 450

LIVE = Capabilities(
    name="live",
    interrupt=False,
    typed_caller_text=False,
    tools=False,
    take_over=False,
    compaction=False,
    delegations=True,
    usage_in_seconds=True,
    idle_silences=False,
    outbound_calls=True,
    responses=False,
    append_tokens=APPEND_TOKEN_BUDGET,
    reasons={
        Ability.INTERRUPT: (
            "a Live model's speech cannot be cut (Live has no cancel or truncate); hold the line instead"
        ),
        Ability.TYPED_CALLER_TEXT: "a Live session takes no typed caller text (it has no conversation items)",
        Ability.TOOLS: (
            "a Live model calls no tools (end_call among them): its tasks go to the session's "
            "delegation handler, and the call is ended from the API"
        ),
        Ability.TAKE_OVER: (
            "a Live model cannot be kept quiet while it hears the caller (it has no cancel, and "
            "muting it stops the caller's transcript too); hold the line, or speak with say"
        ),
        Ability.COMPACTION: "compaction is the provider's on Live",
        Ability.IDLE_SILENCES: (
            "a Live call reports no silences (it has no idle timeout); leave silences unset"
        ),
    },
)
