"""A payment tool that needs a card number in the clear (tests): its `card_number` is sealed by
the gateway and opened only in the runner's memory. It checks the number (Luhn), says which card
it charged by its last four, and can take its time, so that its worker can be killed mid-body."""

from __future__ import annotations

from typing import Any

from pipeline.call.catalog import SideEffect
from workers.tools.registry import tool
from workers.tools.runner import ToolContext


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return len(digits) >= 13 and total % 10 == 0


@tool(
    name="take_payment",
    version="1",
    description="Charge the caller's card the given amount in cents.",
    parameters={
        "type": "object",
        "properties": {
            "card_number": {"type": "string", "maxLength": 40},
            "amount_cents": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
            "hold_ms": {"type": "integer", "minimum": 0, "maximum": 20_000},
        },
        "required": ["card_number", "amount_cents"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.EXTERNAL,
    sensitive=("card_number",),
)
def take_payment(arguments: dict[str, Any], context: ToolContext) -> Any:
    context.sleep(arguments.get("hold_ms", 0) / 1000)
    digits = "".join(char for char in arguments["card_number"] if char.isdigit())
    if not _luhn(digits):
        raise ValueError("that is not a card number")
    return {"charged_cents": arguments["amount_cents"], "card_ending": digits[-4:]}


TOOLS = [take_payment]
