"""The tool registry: tools declared in Python, registered by module path.

An application lists its tool modules in configuration; each module holds a module-level
`TOOLS` list of `Tool`s, usually built with the `tool` decorator:

    @tool(name="echo", version="1", description="Say the text back.",
          parameters={"type": "object", ...}, side_effect=SideEffect.READ_ONLY)
    def echo(arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"text": arguments["text"]}

    TOOLS = [echo]
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pipeline.catalog import SideEffect, ToolCatalog, ToolSpec
from pipeline.errors import SwitchboardError
from workers.tools.schema import unsupported_keywords

if TYPE_CHECKING:
    from workers.tools.runner import ToolContext

ToolFunction = Callable[[dict[str, Any], "ToolContext"], Any]


class RegistryError(SwitchboardError):
    """A tool or tool module is declared wrongly; the process cannot serve tools until fixed."""

    code = "tool_registry_invalid"


@dataclass(frozen=True)
class Tool:
    """A declared tool: the spec the provider sees and the Python body that runs it.

    `runs_inline`: the body is quick (a computation, a lookup of its own), so it runs on the
    worker that took the call up, right after the transaction that decided it commits, instead
    of one queue hop away on `tool_runs`; it is then bounded by INLINE_TOOL_MS, since that
    worker's thread waits for it."""

    spec: ToolSpec
    fn: ToolFunction
    runs_inline: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def origin(self) -> str:
        """The module the body was written in, for error messages."""
        return getattr(self.fn, "__module__", None) or "<unknown>"


def tool(
    *,
    name: str,
    version: str,
    description: str,
    parameters: dict[str, Any],
    side_effect: SideEffect | str,
    runs_inline: bool = False,
) -> Callable[[ToolFunction], Tool]:
    """Declare the decorated function as a tool (the decorated name becomes the `Tool`);
    `runs_inline` as `Tool` says."""
    try:
        spec = ToolSpec(
            name=name,
            version=version,
            description=description,
            parameters=parameters,
            side_effect=SideEffect(side_effect),
        )
    except (ValidationError, ValueError) as exc:
        raise RegistryError(f"tool {name!r} is declared wrongly: {exc}") from exc
    # A keyword the validator does not enforce would be a rule the model is told about but
    # the runner never checks.
    problems = unsupported_keywords(parameters)
    if problems:
        raise RegistryError(f"tool {name!r} parameters use what the validator cannot check: {problems}")

    def declare(fn: ToolFunction) -> Tool:
        return Tool(spec=spec, fn=fn, runs_inline=runs_inline)

    return declare


class Registry:
    """The tools this process can run, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for declared in tools:
            self.register(declared)

    def register(self, declared: Tool) -> None:
        """Add a tool; a second tool of the same name is refused."""
        existing = self._tools.get(declared.name)
        if existing is not None:
            raise RegistryError(
                f"tool {declared.name!r} from {declared.origin} is already registered from {existing.origin}"
            )
        self._tools[declared.name] = declared

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None."""
        return self._tools.get(name)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Every registered tool, in registration order."""
        return tuple(self._tools.values())

    @property
    def catalog(self) -> ToolCatalog:
        """The specs of every registered tool, as a session is admitted with them."""
        return ToolCatalog(tools=tuple(declared.spec for declared in self._tools.values()))


def load_registry(module_paths: Iterable[str]) -> Registry:
    """Import each module by dotted path and register its module-level `TOOLS`."""
    registry = Registry()
    for path in module_paths:
        for declared in _module_tools(path):
            registry.register(declared)
    return registry


def _module_tools(path: str) -> list[Tool]:
    try:
        module = importlib.import_module(path)
    except ModuleNotFoundError as exc:
        # A module that exists but imports something missing is a different mistake.
        if exc.name is not None and (path == exc.name or path.startswith(exc.name + ".")):
            raise RegistryError(f"no tool module {path!r}") from exc
        raise RegistryError(f"tool module {path!r} failed to import: {exc}") from exc
    except ImportError as exc:
        raise RegistryError(f"tool module {path!r} failed to import: {exc}") from exc
    declared = getattr(module, "TOOLS", None)
    if declared is None:
        raise RegistryError(f"tool module {path!r} has no TOOLS list")
    if not isinstance(declared, list | tuple):
        raise RegistryError(
            f"tool module {path!r}: TOOLS must be a list of Tool, got {type(declared).__name__}"
        )
    for item in declared:
        if not isinstance(item, Tool):
            raise RegistryError(f"tool module {path!r}: TOOLS holds a {type(item).__name__}, not a Tool")
    return list(declared)
