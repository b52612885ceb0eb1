"""A quick tool that runs inline but takes long enough to kill its worker mid-body (tests)."""

from __future__ import annotations

from typing import Any

from pipeline.call.catalog import SideEffect
from workers.tools.registry import tool
from workers.tools.runner import ToolContext


@tool(
    name="pause_inline",
    version="1",
    description="Pause for the given milliseconds (under the inline limit), then say so.",
    parameters={
        "type": "object",
        "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 900}},
        "required": ["ms"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.READ_ONLY,
    runs_inline=True,
)
def pause_inline(arguments: dict[str, Any], context: ToolContext) -> Any:
    context.sleep(arguments["ms"] / 1000)
    return {"paused_ms": arguments["ms"]}


TOOLS = [pause_inline]
