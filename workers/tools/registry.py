"""The tool registry: tools declared in Python, registered by module path, and the
`ToolContext` their bodies are given; and beside it the registry of delegation handlers, what a
Live call's delegations run.

An application lists its tool modules in configuration; each module holds a module-level
`TOOLS` list of `Tool`s, usually built with the `tool` decorator:

    @tool(name="echo", version="1", description="Say the text back.",
          parameters={"type": "object", ...}, side_effect=SideEffect.READ_ONLY)
    def echo(arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"text": arguments["text"]}

    TOOLS = [echo]

A delegation handler is registered the same way, from the modules SWITCHBOARD_DELEGATION_MODULES
lists (a module-level `DELEGATION_HANDLERS`), and runs under the same runner as a tool body (its
time limit, its cancellation). It is given the task, the transcript so far and the session's
state, and answers what the model should tell the caller (a string), or raises
`DelegationRefused` with the reason it will not do it:

    @delegation_handler(name="order_desk", version="1", description="Looks orders up.")
    def order_desk(request: DelegationRequest, context: ToolContext) -> str:
        ...

    DELEGATION_HANDLERS = [order_desk]
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from pipeline.call.catalog import TOOL_NAME_PATTERN, SideEffect, ToolCatalog, ToolSpec
from pipeline.call.errors import SwitchboardError
from pipeline.session.state import SessionState
from workers.tools.schema import unsupported_keywords


class ToolContext:
    """What a tool body gets besides its arguments: its deadline, a cancel flag it should
    honour, and whatever the caller passed along (`extra`: session id, call id, …)."""

    def __init__(self, *, deadline: float, extra: dict[str, Any] | None = None) -> None:
        self.deadline = deadline  # time.monotonic() seconds
        self.extra: dict[str, Any] = dict(extra or {})
        self._cancelled = threading.Event()
        self._hooks: list[Callable[[], None]] = []
        self._hooks_lock = threading.Lock()

    def is_cancelled(self) -> bool:
        """True once the runner has stopped waiting for this body."""
        return self._cancelled.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`; False when woken early by cancellation."""
        return not self._cancelled.wait(max(0.0, seconds))

    def on_cancel(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Call `hook` once when the run is cancelled (at once, if it is already): a body
        blocked in I/O, which cannot poll, is woken by it (a socket shut down). The answer
        forgets the hook; a body calls it when the I/O is over."""
        with self._hooks_lock:
            if not self._cancelled.is_set():
                self._hooks.append(hook)
                return lambda: self._forget(hook)
        hook()
        return lambda: None

    def cancel(self) -> None:
        """Ask the body to stop (the runner does this on timeout and on cancellation)."""
        with self._hooks_lock:
            self._cancelled.set()
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()

    def _forget(self, hook: Callable[[], None]) -> None:
        with self._hooks_lock:
            if hook in self._hooks:
                self._hooks.remove(hook)


class ToolFailed(Exception):
    """Raised by a tool body that knows why it failed: the runner answers with this `code`
    (and `status`: failed, or timed_out for a limit of its own that ran out) instead of the
    generic tool_error. The message goes to the model and the step's row, so it names no
    secret and quotes no sensitive argument."""

    def __init__(self, code: str, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.status: Literal["failed", "timed_out"] = "timed_out" if timed_out else "failed"


ToolFunction = Callable[[dict[str, Any], ToolContext], Any]
_Declared = TypeVar("_Declared")
TOOL_NAME = re.compile(TOOL_NAME_PATTERN)


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
    sensitive: tuple[str, ...] = (),
) -> Callable[[ToolFunction], Tool]:
    """Declare the decorated function as a tool (the decorated name becomes the `Tool`);
    `runs_inline` as `Tool` says; `sensitive` names the string parameters the body gets in the
    clear while everything durable holds them sealed (docs/privacy.md, "Keys")."""
    try:
        spec = ToolSpec(
            name=name,
            version=version,
            description=description,
            parameters=parameters,
            side_effect=SideEffect(side_effect),
            sensitive=sensitive,
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
        for declared in _declared_in(path, "TOOLS", Tool):
            registry.register(declared)
    return registry


def _declared_in(path: str, attribute: str, kind: type[_Declared]) -> list[_Declared]:
    try:
        module = importlib.import_module(path)
    except ModuleNotFoundError as exc:
        # A module that exists but imports something missing is a different mistake.
        if exc.name is not None and (path == exc.name or path.startswith(exc.name + ".")):
            raise RegistryError(f"no {_what(attribute)} module {path!r}") from exc
        raise RegistryError(f"{_what(attribute)} module {path!r} failed to import: {exc}") from exc
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise RegistryError(f"{_what(attribute)} module {path!r} failed to import: {reason}") from exc
    declared = getattr(module, attribute, None)
    if declared is None:
        raise RegistryError(f"{_what(attribute)} module {path!r} has no {attribute} list")
    if not isinstance(declared, list | tuple):
        raise RegistryError(
            f"{_what(attribute)} module {path!r}: {attribute} must be a list of {kind.__name__},"
            f" got {type(declared).__name__}"
        )
    for item in declared:
        if not isinstance(item, kind):
            raise RegistryError(
                f"{_what(attribute)} module {path!r}: {attribute} holds a {type(item).__name__},"
                f" not a {kind.__name__}"
            )
    return list(declared)


def _what(attribute: str) -> str:
    return "tool" if attribute == "TOOLS" else "delegation handler"


# ── delegation handlers ─────────────────────────────────────────────────────────────────


class DelegationRefused(Exception):
    """Raised by a delegation handler that will not do the task; the message is the reason,
    which the model tells the caller."""


@dataclass(frozen=True)
class DelegationRequest:
    """What a delegation handler is given: the task (the caller's words up to the delegation's
    offset, and whether the transcript had reached it), the call's transcript so far (role and
    text, oldest first) and the session's state as it was when the handler started."""

    session_id: str
    delegation_id: str
    task: str
    covered: bool
    transcript: tuple[tuple[str, str], ...]
    state: SessionState


DelegationFunction = Callable[[DelegationRequest, ToolContext], Any]


@dataclass(frozen=True)
class DelegationHandler:
    """A declared delegation handler: its name and version (a session is fixed to both when it
    is created) and the Python body."""

    name: str
    version: str
    description: str
    fn: DelegationFunction

    @property
    def origin(self) -> str:
        return getattr(self.fn, "__module__", None) or "<unknown>"


def delegation_handler(
    *, name: str, version: str, description: str
) -> Callable[[DelegationFunction], DelegationHandler]:
    """Declare the decorated function as a delegation handler."""
    if not TOOL_NAME.fullmatch(name):
        raise RegistryError(f"delegation handler {name!r}: a name is 1 to 64 letters, digits, '_' or '-'")
    if not version:
        raise RegistryError(f"delegation handler {name!r} needs a version")

    def declare(fn: DelegationFunction) -> DelegationHandler:
        return DelegationHandler(name=name, version=version, description=description, fn=fn)

    return declare


class HandlerRegistry:
    """The delegation handlers this process can run, by name."""

    def __init__(self, handlers: Iterable[DelegationHandler] = ()) -> None:
        self._handlers: dict[str, DelegationHandler] = {}
        for declared in handlers:
            existing = self._handlers.get(declared.name)
            if existing is not None:
                raise RegistryError(
                    f"delegation handler {declared.name!r} from {declared.origin} is already"
                    f" registered from {existing.origin}"
                )
            self._handlers[declared.name] = declared

    def get(self, name: str) -> DelegationHandler | None:
        return self._handlers.get(name)

    @property
    def handlers(self) -> tuple[DelegationHandler, ...]:
        return tuple(self._handlers.values())


def load_handlers(module_paths: Iterable[str]) -> HandlerRegistry:
    """Import each module by dotted path and register its module-level `DELEGATION_HANDLERS`."""
    handlers: list[DelegationHandler] = []
    for path in module_paths:
        handlers += _declared_in(path, "DELEGATION_HANDLERS", DelegationHandler)
    return HandlerRegistry(handlers)
