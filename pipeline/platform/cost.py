"""What a call cost, in dollars, from its provider-reported usage and a price table.

Prices are per model, per modality, dollars per million tokens of input, cached input and output;
for a Live model, dollars per active minute, as Live reports seconds and not tokens. They come
from the model catalog (pipeline/model_catalog), and the deployment's SWITCHBOARD_PRICES (a
negotiated rate) wins over it.
"""

from __future__ import annotations

from pipeline.model_catalog.prices import ModelPrices, Rates
from pipeline.session.state import Usage

__all__ = ["ModelPrices", "Rates", "cost_usd", "usage_added"]

PER_TOKENS = 1_000_000


def usage_added(before: Usage, after: Usage) -> Usage | None:
    """What a transaction added to a session's usage (a response's tokens, or on Live its active
    seconds), or None when it added nothing."""
    if after == before:
        return None
    return Usage.model_validate(
        {name: getattr(after, name) - getattr(before, name) for name in Usage.model_fields}
    )


def cost_usd(usage: Usage, prices: ModelPrices | None) -> float | None:
    """The usage's cost (None without prices for the model): cached input at its own rate, the
    rest of the input and the output by modality."""
    if prices is None:
        return None
    text_input = max(usage.input_text_tokens - usage.cached_text_tokens, 0)
    audio_input = max(usage.input_audio_tokens - usage.cached_audio_tokens, 0)
    dollars = (
        text_input * prices.text.input
        + usage.cached_text_tokens * prices.text.cached
        + usage.output_text_tokens * prices.text.output
        + audio_input * prices.audio.input
        + usage.cached_audio_tokens * prices.audio.cached
        + usage.output_audio_tokens * prices.audio.output
    ) / PER_TOKENS + usage.active_seconds / 60 * prices.active_minute
    return round(dollars, 6)
