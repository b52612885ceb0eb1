"""Tools: the registry of declared tools, the reference tools, and the runner that runs one."""

from pipeline.call.limits import MAXIMUM_TOOL_MS
from workers.tools.registry import (
    Registry,
    RegistryError,
    Tool,
    ToolContext,
    ToolFailed,
    load_registry,
    tool,
)
from workers.tools.runner import run_tool

__all__ = [
    "MAXIMUM_TOOL_MS",
    "Registry",
    "RegistryError",
    "Tool",
    "ToolContext",
    "ToolFailed",
    "load_registry",
    "run_tool",
    "tool",
]
