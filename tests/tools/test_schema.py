"""The parameter validator: typical tool schemas accepted and refused, with JSON paths."""

from __future__ import annotations

from typing import Any

import pytest

from workers.tools.schema import unsupported_keywords, validate

ORDER = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "minLength": 1, "maxLength": 8},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
        "speed": {"type": "string", "enum": ["standard", "express"]},
        "gift": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "price": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
    "required": ["order_id"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "arguments",
    [
        {"order_id": "4417"},
        {
            "order_id": "4417",
            "quantity": 3,
            "speed": "express",
            "gift": False,
            "note": None,
            "price": 9.5,
            "tags": ["a"],
            "address": {"city": "Lyon"},
        },
        {"order_id": "4417", "quantity": 2.0, "price": 3},
    ],
)
def test_valid_arguments_have_no_problems(arguments: dict[str, Any]) -> None:
    """Arguments that follow the schema (an integral float counts as an integer) are valid."""
    assert validate(arguments, ORDER) == []


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"order_id": 4417}, "$.order_id: expected string, got integer"),
        ({}, "$.order_id: required property is missing"),
        ({"order_id": "1", "colour": "red"}, "$.colour: unexpected property"),
        ({"order_id": "1", "quantity": True}, "$.quantity: expected integer, got boolean"),
        ({"order_id": "1", "quantity": 1.5}, "$.quantity: expected integer, got number"),
        ({"order_id": "1", "quantity": 0}, "$.quantity: 0 is less than the minimum 1"),
        ({"order_id": "1", "quantity": 11}, "$.quantity: 11 is greater than the maximum 10"),
        ({"order_id": ""}, "$.order_id: shorter than 1 characters (0)"),
        ({"order_id": "123456789"}, "$.order_id: longer than 8 characters (9)"),
        ({"order_id": "1", "speed": "slow"}, '$.speed: expected one of "standard", "express", got "slow"'),
        ({"order_id": "1", "note": 3}, "$.note: expected string or null, got integer"),
        ({"order_id": "1", "price": "3"}, "$.price: expected number, got string"),
        ({"order_id": "1", "tags": []}, "$.tags: fewer than 1 items (0)"),
        ({"order_id": "1", "tags": ["a", "b", "c"]}, "$.tags: more than 2 items (3)"),
        ({"order_id": "1", "tags": ["a", 2]}, "$.tags[1]: expected string, got integer"),
        ({"order_id": "1", "address": {}}, "$.address.city: required property is missing"),
        ({"order_id": "1", "address": {"city": "x", "zip": 1}}, "$.address.zip: unexpected property"),
        ({"order_id": "1", "odd key": 1}, '$["odd key"]: unexpected property'),
    ],
)
def test_invalid_arguments_name_the_path_and_the_problem(arguments: dict[str, Any], problem: str) -> None:
    """Each departure from the schema is one readable line starting with its JSON path."""
    assert validate(arguments, ORDER) == [problem]


def test_every_problem_is_reported() -> None:
    """Several problems in one document are all reported."""
    problems = validate({"quantity": "3", "extra": 1}, ORDER)
    assert problems == [
        "$.order_id: required property is missing",
        "$.quantity: expected integer, got string",
        "$.extra: unexpected property",
    ]


def test_an_enum_does_not_take_true_for_one() -> None:
    """In JSON a boolean is never equal to a number, whatever Python thinks."""
    assert validate(True, {"enum": [1, 2]}) == ["$: expected one of 1, 2, got true"]


def test_keywords_the_validator_cannot_check_are_reported() -> None:
    """A schema using a rule the validator does not enforce is reported, annotations are not."""
    schema = {
        "type": "object",
        "description": "fine",
        "properties": {"code": {"type": "string", "pattern": "^[0-9]+$"}},
        "oneOf": [],
    }
    assert unsupported_keywords(schema) == [
        "$: unsupported keyword 'oneOf'",
        "$.properties.code: unsupported keyword 'pattern'",
    ]
