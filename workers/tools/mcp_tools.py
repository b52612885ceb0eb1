"""Listing an MCP server's tools and calling them, over streamable HTTP with the `mcp` package's
client, each within its time and its bound.

`list_tools(server)` lists a server when a version is published (or refreshed): what it keeps
is stored with the version, so a call never waits on a listing. `mcp_tool(server, listed)` is
the `Tool` whose body calls one listed tool (`tools/call`); the runner runs it like any tool
(its deadline, its cancellation, its outcome).

Every exchange opens its own MCP session and closes it: a session is an anyio task group over
an HTTP client, tied to the event loop that opened it, and a body runs on a thread of its own;
two round trips more a call (the session's negotiation, the SDK's look at the tool's output
schema) buy a call that shares nothing with any other.

What goes wrong is an exception whose message names the server and what happened, never a
header: the runner turns it into the call's failed outcome, and the call goes on.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from pipeline.call.catalog import SideEffect
from pipeline.call.errors import Fault, SwitchboardError
from pipeline.call.limits import MAXIMUM_DURABLE_TEXT_BYTES
from pipeline.call.mcp_tools import LeftOut, McpServerSpec, McpTool, admit_listing
from workers.tools.registry import Tool, ToolContext
from workers.tools.runner import CANCELLATION_POLL_MS, MAXIMUM_ERROR_MESSAGE_CHARACTERS
from workers.tools.schema import unsupported_keywords

# A tool's result is kept whole in its step's row (the model is told its first 16,000 bytes):
# one larger than durable text may be is refused rather than cut, so the model never acts on
# half an answer it believes whole.
MAXIMUM_MCP_RESULT_BYTES = MAXIMUM_DURABLE_TEXT_BYTES
# What one answer of a server may carry on the wire while a call runs. Larger than the result's
# bound because the answer wraps it (JSON-RPC, the text beside the structured content, JSON's
# escaping); bounded so that a server answering 10 MB is stopped after a few hundred KB, not
# read into the worker's memory.
MAXIMUM_MCP_CALL_RESPONSE_BYTES = 4 * MAXIMUM_MCP_RESULT_BYTES
# A listing carries every tool's schema; it is read once, at publish, so it may be larger (the
# SDK's own bound on one server-sent event).
MAXIMUM_MCP_LISTING_RESPONSE_BYTES = 1_048_576
# A server that pages its listing past this is not ending it.
MAXIMUM_MCP_LISTING_PAGES = 20

CLIENT_INFO = mcp_types.Implementation(name="switchboard", version="1")

_Result = TypeVar("_Result")


class McpServerUnavailable(Fault):
    """The server could not be reached, did not answer in time, or answered with an error."""

    code = "mcp_server_unavailable"


class McpToolFailed(SwitchboardError):
    """The server ran the tool and the tool reported an error (`isError`)."""

    code = "mcp_tool_failed"


class McpResultTooLarge(SwitchboardError):
    """The server's answer is larger than a tool's result may be."""

    code = "mcp_result_too_large"


class McpCallCancelled(SwitchboardError):
    """The runner stopped waiting (the call was cancelled, or its deadline passed) and the
    session was closed; nobody reads this but the runner's discarded thread."""

    code = "mcp_call_cancelled"


def list_tools(
    server: McpServerSpec, *, listed_at: datetime | None = None
) -> tuple[tuple[McpTool, ...], tuple[LeftOut, ...]]:
    """The tools `server` lists that a version may offer, and those it leaves out with their
    reasons (`pipeline.call.mcp_tools.admit_listing`). A server that is down, refuses the
    headers or does not answer within its `timeout_ms` raises McpServerUnavailable naming it."""
    when = listed_at or datetime.now(UTC)

    async def listing(client: Client) -> list[McpTool]:
        found: list[McpTool] = []
        cursor: str | None = None
        for _ in range(MAXIMUM_MCP_LISTING_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            found += [
                McpTool(
                    name=listed.name,
                    description=listed.description or "",
                    input_schema=dict(listed.input_schema),
                    server_url=server.url,
                    listed_at=when,
                )
                for listed in page.tools
            ]
            cursor = page.next_cursor
            if cursor is None:
                return found
        raise McpServerUnavailable(
            f"MCP server {server.url} did not end its listing within {MAXIMUM_MCP_LISTING_PAGES} pages"
        )

    found = _exchange(
        server,
        listing,
        seconds=server.timeout_ms / 1_000,
        cancelled=lambda: False,
        response_bytes=MAXIMUM_MCP_LISTING_RESPONSE_BYTES,
        what="its tools were listed",
    )
    return admit_listing(server, found, unsupported_keywords=unsupported_keywords)


def mcp_tool(server: McpServerSpec, listed: McpTool, *, side_effect: SideEffect) -> Tool:
    """The `Tool` that calls `listed` on `server`: its spec is the listing's, and its body calls
    the tool within the server's timeout or the time left to the run's deadline, whichever is
    shorter, and closes the session the moment the run is cancelled."""
    spec = listed.as_tool_spec(side_effect)

    def call(arguments: dict[str, Any], context: ToolContext) -> Any:
        seconds = min(server.timeout_ms / 1_000, context.deadline - time.monotonic())
        if seconds <= 0:
            raise McpServerUnavailable(f"no time was left to call {listed.name} on MCP server {server.url}")

        async def calling(client: Client) -> mcp_types.CallToolResult:
            return await client.call_tool(listed.name, arguments)

        answer = _exchange(
            server,
            calling,
            seconds=seconds,
            cancelled=context.is_cancelled,
            response_bytes=MAXIMUM_MCP_CALL_RESPONSE_BYTES,
            what=f"{listed.name} was called",
        )
        return _result(server, listed.name, answer)

    return Tool(spec=spec, fn=call)


def _result(server: McpServerSpec, name: str, answer: mcp_types.CallToolResult) -> Any:
    """The tool's answer as the step keeps it: its structured content when it has some, else
    its text blocks joined (a block the model cannot hear, an image, is named, not carried)."""
    if answer.is_error:
        message = _text(answer.content) or "the tool reported an error and said nothing more"
        raise McpToolFailed(_bounded_message(f"{name} on MCP server {server.url} failed: {message}"))
    result: Any = (
        answer.structured_content if answer.structured_content is not None else _text(answer.content)
    )
    size = len(json.dumps(result, ensure_ascii=False).encode())
    if size > MAXIMUM_MCP_RESULT_BYTES:
        raise McpResultTooLarge(
            f"{name} on MCP server {server.url} answered {size} bytes; a tool's result is at most"
            f" {MAXIMUM_MCP_RESULT_BYTES}"
        )
    return result


def _text(blocks: list[mcp_types.ContentBlock]) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type} content ({block.mime_type}) left out]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[embedded resource {block.resource.uri} left out]")
    return "\n".join(parts)


def _bounded_message(message: str) -> str:
    if len(message) <= MAXIMUM_ERROR_MESSAGE_CHARACTERS:
        return message
    return message[: MAXIMUM_ERROR_MESSAGE_CHARACTERS - 1] + "…"


# ── one exchange with a server ──────────────────────────────────────────────────────────


def _exchange(
    server: McpServerSpec,
    work: Callable[[Client], Awaitable[_Result]],
    *,
    seconds: float,
    cancelled: Callable[[], bool],
    response_bytes: int,
    what: str,
) -> _Result:
    """Open a session with `server`, do `work` in it, close it; all within `seconds`, given up
    the moment `cancelled()` says so. Every failure is one of this module's errors."""
    if _has_running_loop():
        # A mistake of the caller's, not the server's: it must not read as the server being down.
        raise RuntimeError(
            "an MCP exchange blocks its thread: call it where no event loop runs (asyncio.to_thread)"
        )
    transport = _BoundedTransport(response_bytes)
    try:
        # A private event loop on the calling thread: the runner runs a body on a thread of its
        # own, and the worker's loop (if it has one) must never wait on an MCP server; the loop
        # lives exactly as long as the exchange, so nothing of it outlives the call.
        return asyncio.run(_bounded(server, transport, work, seconds, cancelled))
    except McpCallCancelled:
        raise
    except BaseException as exc:
        if not isinstance(exc, Exception):
            raise
        if transport.exceeded:
            raise McpResultTooLarge(
                f"MCP server {server.url} answered more than {response_bytes} bytes when {what}"
            ) from exc
        if any(isinstance(leaf, TimeoutError) for leaf in _leaves(exc)):
            raise McpServerUnavailable(
                f"MCP server {server.url} did not answer within {math.ceil(seconds * 1_000)} ms when {what}"
            ) from exc
        raise McpServerUnavailable(_bounded_message(_unavailable(server, transport, exc, what))) from exc


def _has_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _unavailable(server: McpServerSpec, transport: _BoundedTransport, exc: Exception, what: str) -> str:
    leaf = next(_leaves(exc), exc)
    if isinstance(leaf, McpServerUnavailable):
        return str(leaf)
    if transport.refusing_status is not None:
        return f"MCP server {server.url} answered HTTP {transport.refusing_status} when {what}"
    if isinstance(leaf, httpx2.TransportError):
        return f"MCP server {server.url} could not be reached when {what}: {leaf or type(leaf).__name__}"
    if isinstance(leaf, MCPError):
        return f"MCP server {server.url} answered an error when {what}: {leaf.message}"
    return f"MCP server {server.url} failed when {what}: {type(leaf).__name__}: {leaf}"


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions an exception group holds, depth first (anyio's task groups wrap what a
    transport's task raised)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


async def _bounded(
    server: McpServerSpec,
    transport: _BoundedTransport,
    work: Callable[[Client], Awaitable[_Result]],
    seconds: float,
    cancelled: Callable[[], bool],
) -> _Result:
    results: list[_Result] = []
    was_cancelled = False
    with anyio.fail_after(seconds):
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                nonlocal was_cancelled
                while not cancelled():
                    await anyio.sleep(CANCELLATION_POLL_MS / 1_000)
                was_cancelled = True
                # Leaving the client's context closes the HTTP connections: the server sees its
                # request's stream closed, which is an MCP request's cancellation.
                group.cancel_scope.cancel()

            group.start_soon(watch)
            results.append(await _in_session(server, transport, work, seconds))
            group.cancel_scope.cancel()
    if was_cancelled or not results:
        raise McpCallCancelled(f"the exchange with MCP server {server.url} was cancelled")
    return results[0]


async def _in_session(
    server: McpServerSpec,
    transport: _BoundedTransport,
    work: Callable[[Client], Awaitable[_Result]],
    seconds: float,
) -> _Result:
    headers = server.header_values()
    # Identity: a compressed answer is counted as it arrives, and must not grow past the bound
    # once decoded.
    headers["accept-encoding"] = "identity"
    # The exchange's own bound (`_bounded`) ends it; the HTTP client's, a second later, is only
    # a backstop, so that a timeout always reads as the exchange's.
    async with httpx2.AsyncClient(
        transport=transport, headers=headers, timeout=httpx2.Timeout(seconds + 1), follow_redirects=False
    ) as http:
        connection = streamable_http_client(
            server.url, http_client=http, max_sse_event_size=transport.maximum_bytes
        )
        async with Client(connection, client_info=CLIENT_INFO, cache=None) as client:
            return await work(client)


class _ResponseTooLarge(httpx2.StreamError):
    """An answer's body went past its bound; the body is not read further."""


class _BoundedTransport(httpx2.AsyncBaseTransport):
    """The default HTTP transport, each answer's body cut off past `maximum_bytes`; it notes
    whether that happened, and the last error status, because the MCP client reports either as
    a generic JSON-RPC error."""

    def __init__(self, maximum_bytes: int) -> None:
        self.maximum_bytes = maximum_bytes
        self.exceeded = False
        self.refusing_status: int | None = None
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method != "DELETE":
            # The last answer's refusal explains a failure that follows it; a DELETE closing the
            # session may be refused without the exchange failing.
            self.refusing_status = response.status_code if response.status_code >= 400 else None
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_BoundedStream(response.stream, self),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, transport: _BoundedTransport) -> None:
        self._inner = inner
        self._transport = transport

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._transport.maximum_bytes:
                self._transport.exceeded = True
                raise _ResponseTooLarge(f"an answer larger than {self._transport.maximum_bytes} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
