"""Tools that count each time their body starts, in a file of their own (tests): `charge_once`
reaches outside the deployment (side effect `external`: at most once, whatever dies), and
`reserve` writes the app's own data idempotently (`writes`: it may run again after a crash).
Each holds for `hold_ms`, so its worker can be killed while it runs. The folder is
COUNTED_TOOLS_DIR."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pipeline.call.catalog import SideEffect
from workers.tools.registry import tool
from workers.tools.runner import ToolContext

_PARAMETERS = {
    "type": "object",
    "properties": {"hold_ms": {"type": "integer", "minimum": 0, "maximum": 20_000}},
    "required": ["hold_ms"],
    "additionalProperties": False,
}


def _counted(name: str, context: ToolContext, hold_ms: int) -> dict[str, Any]:
    # One line per start, appended (O_APPEND): two bodies at once each leave their own line.
    with (Path(os.environ["COUNTED_TOOLS_DIR"]) / name).open("a") as counter:
        counter.write(f"{context.extra.get('call_id', '')}\n")
    context.sleep(hold_ms / 1000)
    return {"done": True}


@tool(
    name="charge_once",
    version="1",
    description="Charge the caller.",
    parameters=_PARAMETERS,
    side_effect=SideEffect.EXTERNAL,
)
def charge_once(arguments: dict[str, Any], context: ToolContext) -> Any:
    return _counted("charge_once", context, arguments["hold_ms"])


@tool(
    name="reserve",
    version="1",
    description="Hold a table.",
    parameters=_PARAMETERS,
    side_effect=SideEffect.WRITES,
)
def reserve(arguments: dict[str, Any], context: ToolContext) -> Any:
    return _counted("reserve", context, arguments["hold_ms"])


TOOLS = [charge_once, reserve]
