"""The pure tool declarations: specs, the catalog and its digest, outcomes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.call.catalog import (
    SideEffect,
    ToolCatalog,
    ToolError,
    ToolOutcome,
    ToolSpec,
    canonical_json,
    digest_of,
)
from simulator.oracle import wire_errors
from workers.tools.reference import TOOLS


def spec(name: str = "echo", **changes: Any) -> ToolSpec:
    fields: dict[str, Any] = {
        "name": name,
        "version": "1",
        "description": "Say the text back.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "side_effect": SideEffect.READ_ONLY,
    }
    return ToolSpec(**(fields | changes))


def test_the_digest_is_the_same_in_any_order() -> None:
    """Two catalogs of the same specs in different orders have one digest."""
    first = ToolCatalog(tools=(spec("echo"), spec("wait"), spec("fail")))
    second = ToolCatalog(tools=(spec("fail"), spec("echo"), spec("wait")))
    assert first.digest == second.digest
    assert first.digest.startswith("sha256:") and len(first.digest) == len("sha256:") + 64


@pytest.mark.parametrize(
    "changes",
    [
        {"version": "2"},
        {"description": "Say it back."},
        {"side_effect": SideEffect.WRITES},
        {"parameters": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 9}}}},
    ],
)
def test_the_digest_changes_when_a_spec_changes(changes: dict[str, Any]) -> None:
    """Changing any field of one spec changes the catalog's digest."""
    before = ToolCatalog(tools=(spec("echo"), spec("wait")))
    after = ToolCatalog(tools=(spec("echo", **changes), spec("wait")))
    assert before.digest != after.digest


def test_the_reference_tools_pass_the_wire_oracle() -> None:
    """A session.update carrying every reference tool validates against the openai wire types."""
    catalog = ToolCatalog(tools=tuple(declared.spec for declared in TOOLS))
    event = {"type": "session.update", "session": {"type": "realtime", "tools": catalog.provider_tools()}}
    assert wire_errors(event, direction="client") == []


def test_a_provider_tool_has_the_function_shape() -> None:
    """provider_tool carries type, name, description and parameters, and nothing of ours."""
    assert spec().provider_tool() == {
        "type": "function",
        "name": "echo",
        "description": "Say the text back.",
        "parameters": spec().parameters,
    }


def test_a_catalog_refuses_a_name_twice() -> None:
    """Two specs with one name are a ValueError."""
    with pytest.raises(ValueError, match="declared twice"):
        ToolCatalog(tools=(spec("echo"), spec("echo", version="2")))


def test_a_catalog_finds_a_tool_by_name() -> None:
    """get returns the spec by name, or None for a name it lacks."""
    catalog = ToolCatalog(tools=(spec("echo"), spec("wait")))
    assert catalog.get("wait") == spec("wait")
    assert catalog.get("nope") is None


@pytest.mark.parametrize(
    "changes",
    [
        {"name": "look up"},
        {"name": "x" * 65},
        {"name": ""},
        {"version": ""},
        {"parameters": {"type": "array"}},
        {"parameters": {"properties": {}}},
        {"side_effect": "sometimes"},
        {"colour": "blue"},
    ],
)
def test_a_spec_refuses_what_the_provider_would(changes: dict[str, Any]) -> None:
    """Bad names, empty versions, non-object parameters, unknown side effects and fields are refused."""
    with pytest.raises(ValidationError):
        spec(**changes)


def test_the_argument_digest_ignores_key_order_and_whitespace() -> None:
    """The same JSON written differently has one digest; different values have different digests."""
    first = '{"order_id": "4417", "options": {"a": 1, "b": [1, 2]}}'
    second = '{ "options":{"b":[1,2],"a":1},\n"order_id":"4417" }'
    assert digest_of(json.loads(first)) == digest_of(json.loads(second))
    assert digest_of(json.loads(first)) != digest_of({"order_id": "4418", "options": {"a": 1, "b": [1, 2]}})


def test_canonical_json_is_compact_sorted_and_keeps_unicode() -> None:
    """Canonical JSON sorts keys, drops whitespace and writes non-ASCII text as itself."""
    assert canonical_json({"b": 1, "a": "café"}) == '{"a":"café","b":1}'


def test_a_succeeded_outcome_carries_no_error() -> None:
    """A succeeded outcome with an error is refused."""
    with pytest.raises(ValidationError):
        ToolOutcome(status="succeeded", error=ToolError(code="x", message="y"), elapsed_ms=1)


@pytest.mark.parametrize(
    "status", ["failed", "refused", "cancelled", "unavailable", "interrupted", "timed_out"]
)
def test_every_other_outcome_says_why(status: Any) -> None:
    """An outcome that is not succeeded must carry an error."""
    with pytest.raises(ValidationError):
        ToolOutcome(status=status, elapsed_ms=1)
    assert ToolOutcome(status=status, error=ToolError(code="c", message="m"), elapsed_ms=1).error is not None
