"""The reference tools: small, exact tools for the demo and the tests, and one realistic one.

`echo`, `wait`, `generate` and `fail` exercise the runner's paths (a result, a cooperative
cancellation or timeout, a large result, a raising body); `lookup_order` reads the demo
shop's orders from PostgreSQL.
"""

from __future__ import annotations

import time
from typing import Any

from models.orders import find_order
from pipeline.call.catalog import SideEffect
from workers.tools.registry import ToolContext, tool

# Above the runner's 30 s bound on purpose, so a test or a demo script can make a tool time out.
MAXIMUM_WAIT_MS = 60_000

# Large enough to overflow any continuation bound many times over, small enough to hold in memory.
MAXIMUM_GENERATED_BYTES = 5_000_000

# A spoken echo longer than this is a model in a loop, not a caller's sentence.
MAXIMUM_ECHO_CHARACTERS = 4_000

# The demo's order numbers are short; anything longer is not one of them.
MAXIMUM_ORDER_ID_CHARACTERS = 64

# Generated data repeats this alphabet, so a preview of it shows where it was cut.
_GENERATED_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


@tool(
    name="echo",
    version="1",
    description="Say the given text back, unchanged.",
    parameters={
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "description": "The text to say back.",
                "maxLength": MAXIMUM_ECHO_CHARACTERS,
            }
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.READ_ONLY,
    runs_inline=True,
)
def echo(arguments: dict[str, Any], context: ToolContext) -> Any:
    return {"text": arguments["text"]}


@tool(
    name="wait",
    version="1",
    description="Wait for the given number of milliseconds, then report how long it waited.",
    parameters={
        "type": "object",
        "properties": {
            "ms": {
                "type": "integer",
                "description": "How long to wait, in milliseconds.",
                "minimum": 0,
                "maximum": MAXIMUM_WAIT_MS,
            }
        },
        "required": ["ms"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.READ_ONLY,
)
def wait(arguments: dict[str, Any], context: ToolContext) -> Any:
    ms = int(arguments["ms"])
    started = time.monotonic()
    if context.sleep(ms / 1_000):
        return {"waited_ms": ms}
    # Cancelled: the runner has already answered; this only ends the thread early.
    return {"waited_ms": round((time.monotonic() - started) * 1_000), "cancelled": True}


@tool(
    name="generate",
    version="1",
    description="Produce a string of the given number of ASCII bytes.",
    parameters={
        "type": "object",
        "properties": {
            "bytes": {
                "type": "integer",
                "description": "How many bytes of data to produce.",
                "minimum": 1,
                "maximum": MAXIMUM_GENERATED_BYTES,
            }
        },
        "required": ["bytes"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.READ_ONLY,
)
def generate(arguments: dict[str, Any], context: ToolContext) -> Any:
    size = int(arguments["bytes"])
    repeats = size // len(_GENERATED_ALPHABET) + 1
    return {"data": (_GENERATED_ALPHABET * repeats)[:size]}


@tool(
    name="fail",
    version="1",
    description="Fail with the given message (for testing how failures are reported).",
    parameters={
        "type": "object",
        "properties": {"message": {"type": "string", "description": "The error message to fail with."}},
        "required": ["message"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.READ_ONLY,
)
def fail(arguments: dict[str, Any], context: ToolContext) -> Any:
    raise RuntimeError(arguments["message"])


@tool(
    name="lookup_order",
    version="1",
    description="Look up an order's shipping status by its number.",
    parameters={
        "type": "object",
        "properties": {
            "order_id": {
                "type": "string",
                "description": "The order number the caller gave, e.g. 4417.",
                "minLength": 1,
                "maxLength": MAXIMUM_ORDER_ID_CHARACTERS,
            }
        },
        "required": ["order_id"],
        "additionalProperties": False,
    },
    side_effect=SideEffect.READ_ONLY,
)
def lookup_order(arguments: dict[str, Any], context: ToolContext) -> Any:
    order_id = arguments["order_id"]
    order = find_order(order_id)
    # An unknown number is an answer for the caller, not a failure of the tool.
    if order is None:
        return {"found": False, "order_id": order_id}
    return {"found": True, **order}


TOOLS = [echo, wait, generate, fail, lookup_order]
