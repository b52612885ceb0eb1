"""Running one tool call: arguments checked, the body run on its own thread, bounded in time,
cancellable, and whatever happens turned into a typed `ToolOutcome` — never an exception.

The body runs on a daemon thread so the runner can stop waiting the moment the deadline
passes or the call is cancelled. Python cannot stop a thread from outside, so cancellation is
cooperative: the runner sets the context's cancel flag, and a well-behaved body polls
`context.is_cancelled()` or waits with `context.sleep()`. A body that ignores the flag runs
on unobserved; its result is discarded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from pipeline.call.catalog import ToolError, ToolOutcome, ToolStatus
from pipeline.call.limits import MAXIMUM_TOOL_MS
from pipeline.privacy.sealing import SealedValueUnreadable, is_sealed
from workers.tools.registry import Tool, ToolFailed

# Re-exported: ToolContext lives beside Tool, and tool modules written before it moved import it here.
from workers.tools.registry import ToolContext as ToolContext
from workers.tools.schema import json_type, validate

# A tool that outlives MAXIMUM_TOOL_MS (pipeline.call.limits, 30 s) is cancelled and answered as
# timed out: the caller is on the line in silence while a tool runs.

# How often the runner asks the `cancelled` callback while a body runs; short enough that a
# barge-in stops the wait within a frame of audio, long enough to cost nothing.
CANCELLATION_POLL_MS = 15

# An error message goes back to the model and into the step's row; a body that raises with
# a megabyte of text must not carry it there.
MAXIMUM_ERROR_MESSAGE_CHARACTERS = 2_000


def _never() -> bool:
    return False


def run_tool(
    tool: Tool,
    raw_arguments: str,
    *,
    timeout_ms: int = MAXIMUM_TOOL_MS,
    cancelled: Callable[[], bool] = _never,
    context_extra: dict[str, Any] | None = None,
    asked_before_start: bool = True,
    open_sealed_value: Callable[[str], str] | None = None,
) -> ToolOutcome:
    """Run `tool` on the model's raw argument text and say what it came to. `cancelled` is
    asked before the body starts (a run that waited in a queue may have been cancelled
    meanwhile) unless `asked_before_start` is False, and while it runs. The tool's sensitive
    parameters arrive sealed and are opened with `open_sealed_value`, in memory only."""
    started = time.monotonic()
    arguments, problem = _parse_arguments(tool, raw_arguments, open_sealed_value)
    if arguments is None:
        return _unsuccessful("failed", "invalid_arguments", problem, started)

    context = ToolContext(deadline=started + timeout_ms / 1_000, extra=context_extra)
    if asked_before_start and cancelled():
        context.cancel()
        return _unsuccessful(
            "cancelled", "cancelled", f"{tool.name} was cancelled before it started", started
        )
    body = _Body(tool, arguments, context)
    body.start()
    try:
        while not body.finished.wait(_next_wait(context.deadline)):
            if cancelled():
                context.cancel()
                return _unsuccessful(
                    "cancelled",
                    "cancelled",
                    f"{tool.name} was cancelled after {_ms_since(started):.0f} ms",
                    started,
                )
            if time.monotonic() >= context.deadline:
                context.cancel()
                return _unsuccessful(
                    "timed_out", "tool_timeout", f"{tool.name} did not finish within {timeout_ms} ms", started
                )
    except BaseException:
        # The caller's callback failed; the body must not run on as if still wanted.
        context.cancel()
        raise

    if isinstance(body.error, ToolFailed):
        return _unsuccessful(body.error.status, body.error.code, str(body.error), started)
    if body.error is not None:
        return _unsuccessful("failed", "tool_error", str(body.error) or type(body.error).__name__, started)
    try:
        # The JSON round trip is what the step row and the model will see (tuples become
        # lists, keys become strings); NaN is refused because JSON has no such value.
        result = json.loads(json.dumps(body.result, allow_nan=False, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError) as exc:
        return _unsuccessful(
            "failed", "invalid_result", f"{tool.name} returned a result that is not JSON: {exc}", started
        )
    return ToolOutcome(status="succeeded", result=result, elapsed_ms=_ms_since(started))


class _Body:
    """One run of a tool body on a daemon thread, with what it returned or raised."""

    def __init__(self, tool: Tool, arguments: dict[str, Any], context: ToolContext) -> None:
        self.finished = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(tool, arguments, context), name=f"tool-{tool.name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self, tool: Tool, arguments: dict[str, Any], context: ToolContext) -> None:
        try:
            self.result = tool.fn(arguments, context)
        except BaseException as exc:  # noqa: BLE001 (it becomes the outcome; a thread has nobody else to tell)
            self.error = exc
        finally:
            self.finished.set()


def _parse_arguments(
    tool: Tool, raw_arguments: str, open_sealed_value: Callable[[str], str] | None = None
) -> tuple[dict[str, Any] | None, str]:
    try:
        arguments = json.loads(raw_arguments, parse_constant=_refuse_constant)
    except (TypeError, ValueError, RecursionError) as exc:
        return None, f"arguments for {tool.name} are not JSON: {exc}"
    if not isinstance(arguments, dict):
        return None, f"arguments for {tool.name} must be a JSON object, got {json_type(arguments)}"
    for name in tool.spec.sensitive:
        value = arguments.get(name)
        if not isinstance(value, str) or not is_sealed(value):
            continue  # absent, or masked (a session without a key): the schema decides
        if open_sealed_value is None:
            return None, f"{tool.name}'s {name} is sealed and this run has no key to open it"
        try:
            arguments[name] = open_sealed_value(value)
        except SealedValueUnreadable as exc:
            # The message names the key's fate (destroyed, wrong key), never the value.
            return None, f"{tool.name}'s {name} cannot be opened: {exc}"
    problems = validate(arguments, tool.spec.parameters)
    if problems:
        return None, f"arguments for {tool.name} do not match its parameters: {'; '.join(problems)}"
    return arguments, ""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _next_wait(deadline: float) -> float:
    return max(0.0, min(CANCELLATION_POLL_MS / 1_000, deadline - time.monotonic()))


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1_000


def _unsuccessful(status: ToolStatus, code: str, message: str, started: float) -> ToolOutcome:
    if len(message) > MAXIMUM_ERROR_MESSAGE_CHARACTERS:
        message = message[: MAXIMUM_ERROR_MESSAGE_CHARACTERS - 1] + "…"
    return ToolOutcome(
        status=status, error=ToolError(code=code, message=message), elapsed_ms=_ms_since(started)
    )
