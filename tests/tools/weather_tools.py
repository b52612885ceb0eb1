"""The tool the captured recordings offer (recordings/captured/): `get_weather`, as the captured
session declared it. Each run appends a line to the file named by TEST_TOOL_WITNESS,
so a test can see whether the body ran at all, not only what Switchboard says of it."""

from __future__ import annotations

import json
import os
from typing import Any

from pipeline.call.catalog import SideEffect
from workers.tools.registry import tool
from workers.tools.runner import ToolContext


@tool(
    name="get_weather",
    version="1",
    description="Look up the weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.READ_ONLY,
)
def get_weather(arguments: dict[str, Any], context: ToolContext) -> Any:
    witness = os.environ.get("TEST_TOOL_WITNESS")
    if witness:
        with open(witness, "a", encoding="utf-8") as runs:
            runs.write(json.dumps(arguments) + "\n")
    return {"city": arguments["city"], "forecast": "foggy, 12 degrees"}


TOOLS = [get_weather]
