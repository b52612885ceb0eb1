"""The registry: declaring tools, loading them by module path, and the errors of both."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.call.catalog import SideEffect
from workers.tools import Registry, RegistryError, Tool, ToolContext, load_registry, reference, tool

OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}


def test_the_default_module_registers_the_reference_tools() -> None:
    """Loading workers.tools.reference registers its five tools, whose catalog lists them all."""
    registry = load_registry(["workers.tools.reference"])
    assert [declared.name for declared in registry.tools] == [
        "echo",
        "wait",
        "generate",
        "fail",
        "lookup_order",
    ]
    assert registry.get("lookup_order") is reference.lookup_order
    assert registry.catalog.get("lookup_order") == reference.lookup_order.spec
    assert registry.get("nope") is None


def test_the_decorator_builds_a_tool() -> None:
    """@tool turns a function into a Tool with its spec and body."""

    @tool(name="ping", version="3", description="Answer pong.", parameters=OBJECT, side_effect="external")
    def ping(arguments: dict[str, Any], context: ToolContext) -> Any:
        return "pong"

    assert isinstance(ping, Tool)
    assert ping.spec.version == "3" and ping.spec.side_effect is SideEffect.EXTERNAL
    assert ping.fn({}, ToolContext(deadline=0)) == "pong"


def test_the_reference_tools_declare_honest_side_effects() -> None:
    """The reference tools only read: none of them changes anything."""
    assert {declared.spec.side_effect for declared in reference.TOOLS} == {SideEffect.READ_ONLY}


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("tests.tools.no_such_module", "no tool module 'tests.tools.no_such_module'"),
        ("no_such_package.tools", "no tool module 'no_such_package.tools'"),
        ("tests.tools.broken_tools", "failed to import"),
        ("tests.tools.missing_tools_list", "has no TOOLS list"),
        ("tests.tools.wrong_tools_list", "TOOLS holds a str, not a Tool"),
    ],
)
def test_a_bad_module_is_a_registry_error(module: str, message: str) -> None:
    """A missing module, one that fails to import, or one without a list of Tools is refused by name."""
    with pytest.raises(RegistryError, match=message):
        load_registry([module])


def test_a_name_registered_twice_is_a_registry_error() -> None:
    """Two modules declaring one tool name are refused, naming both."""
    with pytest.raises(RegistryError, match=r"'echo' from workers\.tools\.reference is already registered"):
        load_registry(["workers.tools.reference", "workers.tools.reference"])
    with pytest.raises(RegistryError):
        Registry([reference.echo, reference.echo])


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ({"name": "look up"}, "declared wrongly"),
        ({"parameters": {"type": "string"}}, "declared wrongly"),
        (
            {"parameters": {"type": "object", "properties": {"x": {"type": "string", "format": "date"}}}},
            "cannot check",
        ),
    ],
)
def test_a_wrong_declaration_is_a_registry_error(declaration: dict[str, Any], message: str) -> None:
    """A bad name, a non-object schema or an unenforceable keyword fails at declaration."""
    fields: dict[str, Any] = {
        "name": "ok",
        "version": "1",
        "description": "",
        "parameters": OBJECT,
        "side_effect": SideEffect.READ_ONLY,
    }
    with pytest.raises(RegistryError, match=message):
        tool(**(fields | declaration))
