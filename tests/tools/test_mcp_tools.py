"""The pure rules of MCP tools: which servers a version may name, what a listing keeps and
leaves out, and that one name is one tool."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.call.catalog import SideEffect, ToolCatalog
from pipeline.call.mcp_tools import (
    MASKED,
    McpServerSpec,
    McpTool,
    McpToolsRefused,
    ToolNameCollision,
    admit_listing,
    refuse_name_collisions,
)
from workers.tools.schema import unsupported_keywords

URL = "https://tools.example.com/mcp"
WHEN = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "title": "Order Id"}},
    "required": ["order_id"],
    "title": "find_orderArguments",
}


def listed(name: str, schema: dict[str, Any] | None = None, **changes: Any) -> McpTool:
    fields: dict[str, Any] = {
        "name": name,
        "description": f"The {name} tool.",
        "input_schema": ORDER_SCHEMA if schema is None else schema,
        "server_url": URL,
        "listed_at": WHEN,
        **changes,
    }
    return McpTool(**fields)


def refusal(**fields: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        McpServerSpec(**fields)
    return str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://tools.example.com/mcp",
        "https://203.0.113.7:8443/mcp",
        "http://127.0.0.1:8000/mcp",
        "http://localhost:8000/mcp",
        "http://[::1]:8000/mcp",
    ],
)
def test_a_server_is_https_or_loopback_http(url: str) -> None:
    """HTTPS anywhere, plain HTTP only on this machine (a development server)."""
    assert McpServerSpec(url=url).url == url


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://tools.example.com/mcp", "plain http is allowed only to loopback"),
        ("http://10.0.0.5/mcp", "plain http is allowed only to loopback"),
        ("ftp://tools.example.com/mcp", "reached over https"),
        ("https:///mcp", "names no host"),
        ("https://user:secret@tools.example.com/mcp", "carries no credentials"),
        ("https://tools.example.com/mcp#part", "has no fragment"),
        ("https://tools.example.com/m cp", "no spaces or control characters"),
        ("https://tools.example.com:99999/mcp", "does not parse"),
    ],
)
def test_a_server_that_cannot_be_reached_safely_is_refused(url: str, said: str) -> None:
    """Each refused URL says why; a URL's credentials are refused, not quoted."""
    message = refusal(url=url)
    assert said in message
    assert "secret" not in message


def test_headers_are_never_shown() -> None:
    """A header's value is in no dump, repr or shown form; only header_values() has it."""
    server = McpServerSpec(url=URL, headers={"Authorization": "Bearer s3cret"}, allowed_tools=["find_order"])
    for shown in (
        repr(server),
        str(server),
        server.model_dump_json(),
        str(server.model_dump()),
        str(server.shown()),
    ):
        assert "s3cret" not in shown
    assert server.shown() == {
        "url": URL,
        "headers": {"Authorization": MASKED},
        "allowed_tools": ["find_order"],
        "timeout_ms": 10_000,
    }
    assert server.header_values() == {"Authorization": "Bearer s3cret"}


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"Content-Type": "text/plain"}, "written by the MCP transport itself"),
        ({"Mcp-Session-Id": "abc"}, "written by the MCP transport itself"),
        ({"X-Key": "s3cret\r\nX-Evil: 1"}, "holds a control character"),
        ({"X-Key": "s3crét"}, "is not ASCII"),
        ({"X Key": "s3cret"}, "is not an HTTP token"),
        ({"X-Key": "s3cret", "x-key": "s3cret"}, "is given twice"),
        ({"X-Key": "s3cret" * 1_000}, "longer than 4096 characters"),
    ],
)
def test_a_wrong_header_is_refused_by_name_never_by_value(headers: dict[str, str], said: str) -> None:
    """The refusal names the header and the rule; the value is not in it."""
    message = refusal(url=URL, headers=headers)
    assert said in message
    assert "s3cr" not in message


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"timeout_ms": 50}, "greater than or equal to 100"),
        ({"timeout_ms": 60_000}, "less than or equal to 30000"),
        ({"allowed_tools": []}, "names at least one tool"),
        ({"allowed_tools": ["a", "b", "a"]}, "names a more than once"),
    ],
)
def test_a_timeout_or_allowed_list_out_of_bounds_is_refused(fields: dict[str, Any], said: str) -> None:
    """The timeout stays within a tool's own limit; allowed_tools names tools, each once."""
    assert said in refusal(url=URL, **fields)


def test_a_listing_keeps_every_tool_the_provider_can_take() -> None:
    """With no allowed_tools every listed tool is kept, in the server's order."""
    tools = [listed("find_order"), listed("cancel_order")]
    kept, left_out = admit_listing(McpServerSpec(url=URL), tools, unsupported_keywords=unsupported_keywords)
    assert kept == tuple(tools)
    assert left_out == ()


def test_allowed_tools_keeps_only_those_named() -> None:
    """A tool allowed_tools does not name is not offered (and is no problem to report)."""
    server = McpServerSpec(url=URL, allowed_tools=["cancel_order"])
    kept, left_out = admit_listing(
        server, [listed("find_order"), listed("cancel_order")], unsupported_keywords=unsupported_keywords
    )
    assert [tool.name for tool in kept] == ["cancel_order"]
    assert left_out == ()


def test_an_allowed_tool_the_server_does_not_list_is_refused() -> None:
    """A name in allowed_tools that the server does not list refuses the listing, naming it."""
    server = McpServerSpec(url=URL, allowed_tools=["find_order", "refund_order"])
    with pytest.raises(McpToolsRefused, match=f"MCP server {URL} does not list refund_order"):
        admit_listing(server, [listed("find_order")], unsupported_keywords=unsupported_keywords)


def test_a_server_listing_one_name_twice_is_refused() -> None:
    """Two listed tools of one name cannot both be offered; neither is chosen silently."""
    with pytest.raises(McpToolsRefused, match="lists find_order more than once"):
        admit_listing(
            McpServerSpec(url=URL),
            [listed("find_order"), listed("find_order", description="Another.")],
            unsupported_keywords=unsupported_keywords,
        )


def test_tools_the_provider_cannot_take_are_left_out_with_their_reasons() -> None:
    """An unsupported keyword, a name the provider refuses and a schema that is not an object
    are each left out with the reason; the rest are kept."""
    optional = {"type": "object", "properties": {"note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    tools = [
        listed("find_order"),
        listed("note", optional),
        listed("orders.cancel"),
        listed("raw", {"type": "string"}),
    ]
    kept, left_out = admit_listing(McpServerSpec(url=URL), tools, unsupported_keywords=unsupported_keywords)
    assert [tool.name for tool in kept] == ["find_order"]
    reasons = {each.name: each.reason for each in left_out}
    assert reasons == {
        "note": "its input schema uses what the argument validator cannot check:"
        " $.properties.note: unsupported keyword 'anyOf'",
        "orders.cancel": "its name is not a tool name the provider accepts"
        " (1 to 64 letters, digits, '_' or '-')",
        "raw": 'its input schema is not an object schema ("type": "object")',
    }


def test_a_listed_tool_becomes_a_tool_spec_versioned_by_what_it_is() -> None:
    """The spec carries the listing's name, description and schema with the version's side
    effect; its version changes with the description, the schema or the server, not the time."""
    tool = listed("find_order")
    spec = tool.as_tool_spec(SideEffect.READ_ONLY)
    assert (spec.name, spec.description, spec.parameters, spec.side_effect) == (
        "find_order",
        "The find_order tool.",
        ORDER_SCHEMA,
        SideEffect.READ_ONLY,
    )
    assert spec.version.startswith("sha256:")
    assert listed("find_order", listed_at=datetime(2027, 1, 1, tzinfo=UTC)).version == tool.version
    changed = [
        listed("find_order", description="Finds orders."),
        listed("find_order", {**ORDER_SCHEMA, "required": []}),
        listed("find_order", server_url="https://other.example.com/mcp"),
    ]
    assert len({tool.version, *(each.version for each in changed)}) == 4
    assert ToolCatalog(tools=(spec,)).get("find_order") == spec


def test_two_tools_of_one_name_are_refused_naming_both() -> None:
    """The same name from a Python tool and an MCP server is refused, each origin named."""
    tool = listed("find_order")
    refuse_name_collisions([("lookup_weather", "python tool module tests.tools"), (tool.name, tool.origin)])
    with pytest.raises(ToolNameCollision) as caught:
        refuse_name_collisions([("find_order", "python tool module orders.tools"), (tool.name, tool.origin)])
    assert str(caught.value) == (
        "two tools are called 'find_order':"
        f" one from python tool module orders.tools, one from MCP server {URL}"
    )
    assert caught.value.code == "tool_name_collision"
