"""A JSON-schema validator for the subset tool parameters use.

Supported keywords: `type` (one name or a list), `properties`, `required`,
`additionalProperties` (a boolean or a schema), `enum`, `minimum`/`maximum`,
`minLength`/`maxLength`, `items`, `minItems`/`maxItems`. Annotations (`description`,
`title`, `default`, `examples`, `$comment`, `$schema`) are allowed and ignored. Anything else
is reported by `unsupported_keywords`, so a tool cannot declare a rule that is silently not
enforced.

As in JSON Schema, a boolean is not a number, and an integer is any number with no fraction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "items",
        "minItems",
        "maxItems",
    }
)
ANNOTATION_KEYWORDS = frozenset({"description", "title", "default", "examples", "$comment", "$schema"})

# Problem lines go back to the model; a quoted value longer than this is cut.
_MAXIMUM_SHOWN_CHARACTERS = 80

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate(instance: Any, schema: dict[str, Any]) -> list[str]:
    """Every way `instance` departs from `schema`, as `<json path>: <problem>`; empty when valid."""
    return list(_problems(instance, schema, "$"))


def unsupported_keywords(schema: dict[str, Any]) -> list[str]:
    """Keywords in `schema` (at any depth) that `validate` would not enforce, with their paths."""
    return list(_unsupported(schema, "$"))


def json_type(value: Any) -> str:
    """The JSON type name of a parsed JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    actual = json_type(value)
    if name == "number":
        return actual in ("integer", "number")
    if name == "integer":
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    return actual == name


def _member_path(path: str, key: str) -> str:
    return f"{path}.{key}" if _PLAIN_KEY.match(key) else f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _problems(instance: Any, schema: dict[str, Any], path: str) -> Iterator[str]:
    if "type" in schema:
        expected = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(instance, name) for name in expected):
            # The other rules would only repeat this one in other words.
            yield f"{path}: expected {' or '.join(expected)}, got {json_type(instance)}"
            return
    if "enum" in schema and not any(_same_json(instance, option) for option in schema["enum"]):
        choices = ", ".join(json.dumps(option, ensure_ascii=False) for option in schema["enum"])
        yield f"{path}: expected one of {choices}, got {_shown(instance)}"
    kind = json_type(instance)
    if kind in ("integer", "number"):
        yield from _number_problems(instance, schema, path)
    elif kind == "string":
        yield from _string_problems(instance, schema, path)
    elif kind == "array":
        yield from _array_problems(instance, schema, path)
    elif kind == "object":
        yield from _object_problems(instance, schema, path)


def _number_problems(instance: float, schema: dict[str, Any], path: str) -> Iterator[str]:
    if "minimum" in schema and instance < schema["minimum"]:
        yield f"{path}: {_shown(instance)} is less than the minimum {schema['minimum']}"
    if "maximum" in schema and instance > schema["maximum"]:
        yield f"{path}: {_shown(instance)} is greater than the maximum {schema['maximum']}"


def _string_problems(instance: str, schema: dict[str, Any], path: str) -> Iterator[str]:
    # JSON Schema counts characters (code points), not bytes.
    if "minLength" in schema and len(instance) < schema["minLength"]:
        yield f"{path}: shorter than {schema['minLength']} characters ({len(instance)})"
    if "maxLength" in schema and len(instance) > schema["maxLength"]:
        yield f"{path}: longer than {schema['maxLength']} characters ({len(instance)})"


def _array_problems(instance: list[Any], schema: dict[str, Any], path: str) -> Iterator[str]:
    if "minItems" in schema and len(instance) < schema["minItems"]:
        yield f"{path}: fewer than {schema['minItems']} items ({len(instance)})"
    if "maxItems" in schema and len(instance) > schema["maxItems"]:
        yield f"{path}: more than {schema['maxItems']} items ({len(instance)})"
    if isinstance(schema.get("items"), dict):
        for index, member in enumerate(instance):
            yield from _problems(member, schema["items"], f"{path}[{index}]")


def _object_problems(instance: dict[str, Any], schema: dict[str, Any], path: str) -> Iterator[str]:
    properties: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in instance:
            yield f"{_member_path(path, name)}: required property is missing"
    extra_schema = schema.get("additionalProperties", True)
    for name, value in instance.items():
        member = _member_path(path, name)
        if name in properties:
            yield from _problems(value, properties[name], member)
        elif extra_schema is False:
            yield f"{member}: unexpected property"
        elif isinstance(extra_schema, dict):
            yield from _problems(value, extra_schema, member)


def _same_json(left: Any, right: Any) -> bool:
    # In Python True == 1; in JSON a boolean and a number are never equal.
    if isinstance(left, bool) != isinstance(right, bool):
        return False
    return bool(left == right)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    # A problem line quotes the offending value, not a whole document.
    return text if len(text) <= _MAXIMUM_SHOWN_CHARACTERS else text[:_MAXIMUM_SHOWN_CHARACTERS] + "…"


def _unsupported(schema: Any, path: str) -> Iterator[str]:
    if not isinstance(schema, dict):
        yield f"{path}: a schema must be an object"
        return
    for keyword in schema:
        if keyword not in SUPPORTED_KEYWORDS and keyword not in ANNOTATION_KEYWORDS:
            yield f"{path}: unsupported keyword {keyword!r}"
    for name, member in schema.get("properties", {}).items():
        yield from _unsupported(member, f"{path}.properties.{name}")
    if "items" in schema:
        yield from _unsupported(schema["items"], f"{path}.items")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _unsupported(schema["additionalProperties"], f"{path}.additionalProperties")
