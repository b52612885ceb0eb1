"""The runner: every way one tool call can end, each a typed outcome and never an exception."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from pipeline.call.catalog import SideEffect, ToolError
from workers.tools import ToolContext, ToolFailed, run_tool, tool
from workers.tools.reference import echo, fail, generate, wait

ANYTHING = {"type": "object"}


def body(fn: Any) -> Any:
    """A test tool with free-form arguments around `fn`."""
    declare = tool(
        name="body", version="1", description="", parameters=ANYTHING, side_effect=SideEffect.READ_ONLY
    )
    return declare(fn)


def test_a_tool_that_returns_succeeds() -> None:
    """A body that returns JSON succeeds with that result and its elapsed time."""
    outcome = run_tool(echo, '{"text": "hello"}')
    assert outcome.status == "succeeded"
    assert outcome.result == {"text": "hello"}
    assert outcome.error is None
    assert 0 <= outcome.elapsed_ms < 1_000


def test_arguments_that_are_not_json_fail() -> None:
    """Argument text that does not parse fails as invalid_arguments without running the body."""
    outcome = run_tool(echo, '{"text": "hel')
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error.code == "invalid_arguments"
    assert "not JSON" in outcome.error.message


def test_arguments_with_nan_fail() -> None:
    """NaN is not JSON, though Python's parser accepts it."""
    outcome = run_tool(body(lambda arguments, context: arguments), '{"x": NaN}')
    assert outcome.error is not None and outcome.error.code == "invalid_arguments"


def test_arguments_that_are_not_an_object_fail() -> None:
    """JSON that is not an object fails as invalid_arguments, naming what it was."""
    outcome = run_tool(echo, '["hello"]')
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error.code == "invalid_arguments"
    assert outcome.error.message == "arguments for echo must be a JSON object, got array"


def test_arguments_that_break_the_schema_fail_with_the_problems() -> None:
    """Arguments that fail the schema fail as invalid_arguments, the validator's lines in the message."""
    outcome = run_tool(wait, '{"ms": "soon", "unit": "s"}')
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error.code == "invalid_arguments"
    assert outcome.error.message == (
        "arguments for wait do not match its parameters: "
        "$.ms: expected integer, got string; $.unit: unexpected property"
    )


def test_a_tool_that_raises_fails_with_its_message() -> None:
    """A raising body fails as tool_error with the exception's message and no traceback."""
    outcome = run_tool(fail, '{"message": "the warehouse is closed"}')
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.message) == ("tool_error", "the warehouse is closed")


def test_a_result_that_is_not_json_fails() -> None:
    """A body returning something JSON cannot carry (an object, NaN) fails as invalid_result."""
    for result in (object(), {"ratio": float("nan")}, {("a", "b"): 1}):
        outcome = run_tool(body(lambda arguments, context, result=result: result), "{}")
        assert outcome.status == "failed", result
        assert outcome.error is not None and outcome.error.code == "invalid_result"


def test_a_result_comes_back_as_json_would_carry_it() -> None:
    """Tuples become lists and keys become strings, as the step row and the model will see them."""
    outcome = run_tool(body(lambda arguments, context: {"pair": (1, 2), 3: "three"}), "{}")
    assert outcome.result == {"pair": [1, 2], "3": "three"}


def test_a_tool_that_runs_too_long_times_out_and_is_told_to_stop() -> None:
    """Past timeout_ms the runner answers timed_out at once and sets the body's cancel flag."""
    stopped = threading.Event()
    seen: list[ToolContext] = []

    def slow(arguments: dict[str, Any], context: ToolContext) -> Any:
        seen.append(context)
        context.sleep(10)
        stopped.set()
        return {}

    started = time.monotonic()
    outcome = run_tool(body(slow), "{}", timeout_ms=50)
    assert outcome.status == "timed_out"
    assert outcome.error is not None and outcome.error.code == "tool_timeout"
    assert 50 <= outcome.elapsed_ms < 500
    assert time.monotonic() - started < 0.5
    assert seen[0].is_cancelled()
    assert stopped.wait(1)


def test_the_wait_tool_times_out() -> None:
    """wait(5000) under a 50 ms bound is timed out."""
    outcome = run_tool(wait, '{"ms": 5000}', timeout_ms=50)
    assert outcome.status == "timed_out"


def test_the_wait_tool_waits() -> None:
    """wait(30) returns after about 30 ms and says so."""
    outcome = run_tool(wait, '{"ms": 30}')
    assert outcome.status == "succeeded"
    assert outcome.result == {"waited_ms": 30}
    assert outcome.elapsed_ms >= 30


def test_a_cancelled_call_is_answered_cancelled() -> None:
    """When the cancelled callback turns true the runner answers cancelled and stops the body."""
    seen: list[ToolContext] = []

    def cooperative(arguments: dict[str, Any], context: ToolContext) -> Any:
        seen.append(context)
        return wait.fn({"ms": 10_000}, context)

    cancel_at = time.monotonic() + 0.05
    outcome = run_tool(body(cooperative), "{}", cancelled=lambda: time.monotonic() >= cancel_at)
    assert outcome.status == "cancelled"
    assert outcome.error is not None and outcome.error.code == "cancelled"
    assert 50 <= outcome.elapsed_ms < 500
    assert seen[0].is_cancelled()


def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    """A call already cancelled is answered cancelled without running its body."""
    ran = threading.Event()
    outcome = run_tool(body(lambda arguments, context: ran.set()), "{}", cancelled=lambda: True)
    assert outcome.status == "cancelled"
    assert not ran.is_set()


def test_a_megabyte_result_succeeds() -> None:
    """generate(1 MB) succeeds with exactly that many ASCII bytes (bounding it is the continuation's job)."""
    outcome = run_tool(generate, json.dumps({"bytes": 1_048_576}))
    assert outcome.status == "succeeded"
    data = outcome.result["data"]
    assert len(data) == len(data.encode()) == 1_048_576


def test_the_body_gets_its_deadline_and_extra() -> None:
    """The context carries the caller's extra values and a deadline timeout_ms ahead."""
    seen: list[ToolContext] = []

    def look(arguments: dict[str, Any], context: ToolContext) -> Any:
        seen.append(context)
        return {}

    before = time.monotonic()
    run_tool(body(look), "{}", timeout_ms=2_000, context_extra={"session_id": "s1"})
    assert seen[0].extra == {"session_id": "s1"}
    assert before + 1.9 < seen[0].deadline < time.monotonic() + 2.0


def test_a_sensitive_parameter_is_opened_for_the_body_and_an_unopenable_one_is_refused_unread() -> None:
    """The body gets the clear value of a sealed sensitive parameter; a value that cannot be
    opened (its session's key destroyed) fails the call without the body running or the
    message quoting it."""
    from pipeline.privacy.sealing import SealedValueUnreadable, new_session_key_pair, open_sealed, seal

    private, public = new_session_key_pair()
    seen: list[str] = []
    declare = tool(
        name="pay",
        version="1",
        description="",
        parameters={"type": "object", "properties": {"card": {"type": "string"}}, "required": ["card"]},
        side_effect=SideEffect.EXTERNAL,
        sensitive=("card",),
    )
    pay = declare(lambda arguments, context: seen.append(arguments["card"]) or {"ok": True})
    sealed = seal("4111 1111 1111 1111", public_key=public, session_id="sess_1")
    arguments = json.dumps({"card": sealed})

    opened = run_tool(
        pay, arguments, open_sealed_value=lambda v: open_sealed(v, private_key=private, session_id="sess_1")
    )
    assert opened.status == "succeeded" and seen == ["4111 1111 1111 1111"]

    def destroyed(value: str) -> str:
        raise SealedValueUnreadable("session sess_1's data key was destroyed")

    refused = run_tool(pay, arguments, open_sealed_value=destroyed)
    assert refused.status == "failed" and refused.error is not None
    assert refused.error.code == "invalid_arguments" and "destroyed" in refused.error.message
    assert sealed not in refused.error.message and len(seen) == 1
    assert run_tool(pay, arguments).status == "failed"  # no key at all: never run on the sealed text


def test_a_body_that_knows_why_it_failed_gives_its_code() -> None:
    """A ToolFailed is answered with its own code and status (failed, or timed_out for a limit of
    the body's own), not the generic tool_error."""

    def refused(arguments: dict[str, Any], context: ToolContext) -> Any:
        raise ToolFailed("crm_refused", "the CRM refused the lookup")

    def ran_out(arguments: dict[str, Any], context: ToolContext) -> Any:
        raise ToolFailed("crm_timeout", "the CRM did not answer within 200 ms", timed_out=True)

    outcome = run_tool(body(refused), "{}")
    assert outcome.status == "failed"
    assert outcome.error == ToolError(code="crm_refused", message="the CRM refused the lookup")
    outcome = run_tool(body(ran_out), "{}")
    assert outcome.status == "timed_out"
    assert outcome.error is not None and outcome.error.code == "crm_timeout"


def test_a_cancel_hook_runs_once_when_the_run_is_cancelled() -> None:
    """A hook runs at cancellation (at once when registered after it), once; a forgotten one never."""
    context = ToolContext(deadline=time.monotonic() + 1)
    called: list[str] = []
    context.on_cancel(lambda: called.append("kept"))
    forget = context.on_cancel(lambda: called.append("forgotten"))
    forget()
    context.cancel()
    context.cancel()
    context.on_cancel(lambda: called.append("late"))
    assert called == ["kept", "late"]
