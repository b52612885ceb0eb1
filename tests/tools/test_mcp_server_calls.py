"""MCP tools against a real MCP server (tests/tools/mcp_server.py, the `mcp` package's own
server over streamable HTTP): listing it, and calling its tools through the runner, so each
outcome is the one a call's tool step records."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.call.catalog import SideEffect, ToolOutcome
from pipeline.call.mcp_tools import McpServerSpec, McpTool
from tests.tools.mcp_server import TOKEN, Running, running_server
from workers.tools.mcp_tools import (
    MAXIMUM_MCP_CALL_RESPONSE_BYTES,
    MAXIMUM_MCP_RESULT_BYTES,
    McpServerUnavailable,
    list_tools,
    mcp_tool,
)
from workers.tools.runner import run_tool

AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def mcp() -> Iterator[Running]:
    with running_server() as running:
        yield running


@pytest.fixture(scope="module")
def listed(mcp: Running) -> dict[str, McpTool]:
    tools, _ = list_tools(McpServerSpec(url=mcp.url, headers=AUTHORIZED))
    return {tool.name: tool for tool in tools}


def call(
    server: McpServerSpec,
    tool: McpTool,
    arguments: dict[str, Any],
    *,
    timeout_ms: int = 5_000,
    cancelled: Callable[[], bool] = lambda: False,
) -> ToolOutcome:
    return run_tool(
        mcp_tool(server, tool, side_effect=SideEffect.READ_ONLY),
        json.dumps(arguments),
        timeout_ms=timeout_ms,
        cancelled=cancelled,
    )


def failure(outcome: ToolOutcome) -> str:
    assert outcome.status == "failed", outcome
    assert outcome.error is not None and outcome.error.code == "tool_error"
    return outcome.error.message


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_listing_keeps_what_the_provider_can_take_and_says_what_it_left_out(mcp: Running) -> None:
    """The server's tools are listed with its URL and the time; the one whose schema uses
    anyOf and the one whose name has a dot are left out with their reasons; the bearer token
    went with every request."""
    mcp.seen.authorizations.clear()
    when = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    kept, left_out = list_tools(McpServerSpec(url=mcp.url, headers=AUTHORIZED), listed_at=when)
    assert [tool.name for tool in kept] == [
        "add",
        "greet",
        "describe_order",
        "find_order",
        "crash",
        "slow",
        "huge",
        "sized",
    ]
    add = kept[0]
    assert (add.description, add.server_url, add.listed_at) == ("Add two whole numbers.", mcp.url, when)
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    assert add.input_schema["required"] == ["a", "b"]
    reasons = {each.name: each.reason for each in left_out}
    assert reasons.keys() == {"note", "orders.cancel"}
    assert "unsupported keyword 'anyOf'" in reasons["note"]
    assert "not a tool name the provider accepts" in reasons["orders.cancel"]
    assert mcp.seen.authorizations and set(mcp.seen.authorizations) == {f"Bearer {TOKEN}"}


def test_allowed_tools_lists_only_those_named(mcp: Running) -> None:
    """allowed_tools keeps the named tools; one of them left out is still said to be."""
    server = McpServerSpec(url=mcp.url, headers=AUTHORIZED, allowed_tools=["greet", "add", "note"])
    kept, left_out = list_tools(server)
    assert [tool.name for tool in kept] == ["add", "greet"]
    assert [each.name for each in left_out] == ["note"]


def test_a_call_with_arguments_answers_the_tool_s_result(mcp: Running, listed: dict[str, McpTool]) -> None:
    """Structured content is the result when the tool has some, its text otherwise."""
    server = McpServerSpec(url=mcp.url, headers=AUTHORIZED)
    added = call(server, listed["add"], {"a": 2, "b": 40})
    assert (added.status, added.result) == ("succeeded", {"result": 42})
    found = call(server, listed["find_order"], {"order_id": "A-7"})
    assert found.result == {"order_id": "A-7", "status": "shipped", "items": 2}
    described = call(server, listed["describe_order"], {"order_id": "A-7"})
    assert described.result == "Order A-7\nStatus: shipped"


def test_arguments_are_checked_against_the_listed_schema_before_the_server_is_asked(
    mcp: Running, listed: dict[str, McpTool]
) -> None:
    """The listed schema is the runner's: wrong arguments fail without a request."""
    mcp.seen.authorizations.clear()
    outcome = call(McpServerSpec(url=mcp.url, headers=AUTHORIZED), listed["add"], {"a": "two", "b": 40})
    assert outcome.error is not None and outcome.error.code == "invalid_arguments"
    assert mcp.seen.authorizations == []


def test_a_tool_that_reports_an_error_fails_with_its_message(
    mcp: Running, listed: dict[str, McpTool]
) -> None:
    """isError fails the call with the tool's words, naming tool and server; a crash the server
    hides stays hidden."""
    server = McpServerSpec(url=mcp.url, headers=AUTHORIZED)
    message = failure(call(server, listed["find_order"], {"order_id": "missing"}))
    assert message.startswith(f"find_order on MCP server {mcp.url} failed: ")
    assert message.endswith("order missing does not exist")
    crashed = failure(call(server, listed["crash"], {}))
    assert crashed == f"crash on MCP server {mcp.url} failed: Error executing tool crash"


def test_a_slow_tool_times_out_at_the_run_s_deadline(mcp: Running, listed: dict[str, McpTool]) -> None:
    """The runner's deadline ends the call, and the session closed with it reaches the server
    as a cancellation."""
    mcp.seen.slow_started.clear()
    mcp.seen.slow_cancelled.clear()
    started = time.monotonic()
    outcome = call(
        McpServerSpec(url=mcp.url, headers=AUTHORIZED), listed["slow"], {"seconds": 10}, timeout_ms=600
    )
    assert outcome.status == "timed_out"
    assert time.monotonic() - started < 1.5
    assert mcp.seen.slow_started.is_set()
    assert mcp.seen.slow_cancelled.wait(3)


def test_a_server_slower_than_its_timeout_fails_the_call(mcp: Running, listed: dict[str, McpTool]) -> None:
    """A server timeout shorter than the time left to the deadline fails the call at the
    server timeout, saying so."""
    server = McpServerSpec(url=mcp.url, headers=AUTHORIZED, timeout_ms=400)
    started = time.monotonic()
    message = failure(call(server, listed["slow"], {"seconds": 10}, timeout_ms=5_000))
    assert time.monotonic() - started < 1.5
    assert message == f"MCP server {mcp.url} did not answer within 400 ms when slow was called"


def test_a_cancelled_call_closes_its_session(mcp: Running, listed: dict[str, McpTool]) -> None:
    """Cancelled while the tool runs: the outcome is cancelled at once, and the server's tool
    is cancelled too."""
    mcp.seen.slow_started.clear()
    mcp.seen.slow_cancelled.clear()
    started = time.monotonic()
    outcome = call(
        McpServerSpec(url=mcp.url, headers=AUTHORIZED),
        listed["slow"],
        {"seconds": 10},
        cancelled=mcp.seen.slow_started.is_set,
    )
    assert outcome.status == "cancelled"
    assert time.monotonic() - started < 2
    assert mcp.seen.slow_cancelled.wait(3)


def test_a_server_that_is_down_fails_quickly(listed: dict[str, McpTool]) -> None:
    """Nothing listening: the listing raises and a call fails at once, each naming the URL."""
    down = McpServerSpec(url=f"http://127.0.0.1:{free_port()}/mcp", headers=AUTHORIZED)
    started = time.monotonic()
    with pytest.raises(McpServerUnavailable) as caught:
        list_tools(down)
    assert str(caught.value).startswith(
        f"MCP server {down.url} could not be reached when its tools were listed"
    )
    assert caught.value.code == "mcp_server_unavailable"
    message = failure(call(down, listed["add"], {"a": 1, "b": 2}))
    assert message.startswith(f"MCP server {down.url} could not be reached when add was called")
    assert time.monotonic() - started < 2


def test_a_server_that_never_answers_fails_at_its_timeout(listed: dict[str, McpTool]) -> None:
    """A port that accepts and says nothing: the listing and a call each fail at the timeout."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        server = McpServerSpec(url=f"http://127.0.0.1:{silent.getsockname()[1]}/mcp", timeout_ms=300)
        started = time.monotonic()
        with pytest.raises(
            McpServerUnavailable, match=f"MCP server {server.url} did not answer within 300 ms"
        ):
            list_tools(server)
        message = failure(call(server, listed["add"], {"a": 1, "b": 2}))
        assert message == f"MCP server {server.url} did not answer within 300 ms when add was called"
        assert time.monotonic() - started < 2


def test_an_answer_past_the_bound_fails_the_call(mcp: Running, listed: dict[str, McpTool]) -> None:
    """Ten megabytes are cut off on the wire; a result past the result's bound is refused
    whole; one within it is the result."""
    server = McpServerSpec(url=mcp.url, headers=AUTHORIZED)
    started = time.monotonic()
    huge = failure(call(server, listed["huge"], {}))
    bound = MAXIMUM_MCP_CALL_RESPONSE_BYTES
    assert huge == f"MCP server {mcp.url} answered more than {bound} bytes when huge was called"
    assert time.monotonic() - started < 3
    large = failure(call(server, listed["sized"], {"characters": 100_000}))
    assert large.startswith(f"sized on MCP server {mcp.url} answered 100014 bytes")
    assert large.endswith(f"a tool's result is at most {MAXIMUM_MCP_RESULT_BYTES}")
    within = call(server, listed["sized"], {"characters": 1_000})
    assert within.result == {"result": "y" * 1_000}


def test_the_headers_reach_the_server_and_no_answer_shows_them(
    mcp: Running, listed: dict[str, McpTool]
) -> None:
    """Without its token the server refuses (401): the listing raises and the call fails,
    saying so without the header's value."""
    wrong = McpServerSpec(url=mcp.url, headers={"Authorization": "Bearer not-the-token"})
    with pytest.raises(McpServerUnavailable) as caught:
        list_tools(wrong)
    assert str(caught.value) == f"MCP server {mcp.url} answered HTTP 401 when its tools were listed"
    message = failure(call(wrong, listed["greet"], {"name": "Ann"}))
    assert message == f"MCP server {mcp.url} answered HTTP 401 when greet was called"
    assert "not-the-token" not in message
    assert "Bearer not-the-token" in mcp.seen.authorizations


def test_a_call_runs_beside_a_running_event_loop(mcp: Running, listed: dict[str, McpTool]) -> None:
    """The body's event loop is its own: a caller already inside a loop (a worker's) gets the
    same outcome."""
    server = McpServerSpec(url=mcp.url, headers=AUTHORIZED)

    async def inside_a_loop() -> ToolOutcome:
        return call(server, listed["greet"], {"name": "Ann"})

    outcome = asyncio.run(inside_a_loop())
    assert (outcome.status, outcome.result) == ("succeeded", {"result": "Hello, Ann."})


def test_a_listing_asked_for_inside_an_event_loop_is_a_mistake_not_an_outage(mcp: Running) -> None:
    """Listing blocks its thread: from inside a running loop it refuses to start, and does not
    say the server is down."""

    async def inside_a_loop() -> None:
        list_tools(McpServerSpec(url=mcp.url, headers=AUTHORIZED))

    with pytest.raises(RuntimeError, match="call it where no event loop runs"):
        asyncio.run(inside_a_loop())
