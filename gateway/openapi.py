"""The gateway's API described as OpenAPI 3.1, served at `GET /openapi.json` (and read by `/docs`).

Nothing here is written twice: the operations are the route table's (gateway/routes/, each
route declaring its method, path, request model, answer models and error codes beside its
handler), and the schemas are the pydantic models' own JSON Schemas, request and answer alike,
their `$defs` collected into the components. What this module adds are the rules every route
of a kind shares: the refusals of the guards before the routes (a key, a body, an idempotency
key, an address that can be stored) and the security schemes. `tests/gateway/test_openapi.py`
checks that every route the app serves is described; Schemathesis checks the answers against
it on a live gateway (`tests/e2e/test_openapi.py`), so the answers' schemas come from the code
that makes them.

Answers are described by their success models and by the error shape every refusal has,
`{"error": {"code", "message"}}`, with the codes each status can carry for the operation.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from gateway.routes import ROUTES
from gateway.routes.answers import Error
from gateway.routes.table import Operation, Security

VERSION = "0.2.0"
REF = "#/components/schemas/{model}"

# Every operation, in the route table's order.
OPERATIONS: tuple[Operation, ...] = ROUTES.operations
_OBJECT: dict[str, Any] = {"type": "object"}

# Refusals any keyed operation may answer, whatever its route.
_KEYED_ERRORS: dict[int, tuple[str, ...]] = {
    401: ("unauthorized",),
    403: ("forbidden",),
    # database_unavailable: a read (or the key's look-up) that found PostgreSQL away.
    503: ("reply_timeout", "overloaded", "database_unavailable"),
}
# And any operation that takes a body (the idempotency codes on every POST).
_BODY_ERRORS: dict[int, tuple[str, ...]] = {
    400: ("bad_request",),
    408: ("request_timeout",),
    413: ("body_too_large",),
    422: ("malformed_request",),
}
# And any operation whose body has a media type (gateway.api.json_bodies).
_TYPED_BODY_ERRORS: dict[int, tuple[str, ...]] = {415: ("unsupported_media_type",)}
_POST_ERRORS: dict[int, tuple[str, ...]] = {
    409: ("request_in_progress",),
    422: ("malformed_idempotency_key", "idempotency_key_reused"),
}
_SECURITY: dict[Security, list[dict[str, list[str]]]] = {
    "key": [{"apiKey": []}],
    "open": [],
    "webhook": [{"webhookSignature": []}],
    "live": [{"apiKey": []}, {"liveToken": []}],
}


def error_codes(operation: Operation) -> dict[int, tuple[str, ...]]:
    """Every error code the operation may answer, by status."""
    merged: dict[int, list[str]] = {}
    layers = [operation.errors]
    if operation.security in ("key", "live"):
        layers.append(_KEYED_ERRORS)
    if operation.method in ("POST", "PUT"):
        layers.append(_BODY_ERRORS)
    if operation.body_types:
        layers.append(_TYPED_BODY_ERRORS)
    if operation.method == "POST" and operation.security == "key":
        layers.append(_POST_ERRORS)
    if operation.starts_a_call:
        layers.append({503: ("draining",)})
    if operation.path_names:
        # A parameter holding a "/" (%2F) leaves the path no route matches: Starlette's 404.
        layers.append({404: ("not_found",)})
    if operation.path_names or operation.query:
        # A parameter holding U+0000 (gateway.api.storable_addresses).
        layers.append({422: ("malformed_request",)})
    for layer in layers:
        for status, codes in layer.items():
            merged.setdefault(status, [])
            merged[status] += [code for code in codes if code not in merged[status]]
    return {status: tuple(merged[status]) for status in sorted(merged)}


def _parameters(operation: Operation) -> list[dict[str, Any]]:
    parameters: list[dict[str, Any]] = []
    for name in operation.path_names:
        schema = operation.path_schemas.get(name, {"type": "string"})
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
    parameters += [
        {"name": q.name, "in": "query", "required": False, "description": q.description, "schema": q.schema}
        for q in operation.query
    ]
    if operation.method == "POST" and operation.security == "key":
        parameters.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": "1 to 255 printable ASCII characters: a retry answers the first answer",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e]+$"},
            }
        )
    return parameters


def _request_body(operation: Operation, refs: dict[type[BaseModel], dict[str, Any]]) -> dict[str, Any] | None:
    if operation.body is None:
        if operation.empty_body:
            # Nothing, or an empty object.
            schema = {"type": "object", "maxProperties": 0}
            return {"required": False, "content": {"application/json": {"schema": schema}}}
        return None
    content: dict[str, Any] = {"application/json": {"schema": refs[operation.body]}, **operation.other_bodies}
    return {"required": operation.body_required, "content": content}


def _success_content(
    operation: Operation, status: int, refs: dict[type[BaseModel], dict[str, Any]]
) -> dict[str, Any] | None:
    if status == 101:
        return None
    content = dict(operation.other_answers)
    model = operation.answer_model(status)
    if model is not None or not content:
        content["application/json"] = {"schema": refs[model] if model is not None else _OBJECT}
    return content


def _responses(operation: Operation, refs: dict[type[BaseModel], dict[str, Any]]) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, description in operation.success.items():
        answer: dict[str, Any] = {"description": description}
        content = _success_content(operation, status, refs)
        if content is not None:
            answer["content"] = content
        if status == 201 and operation.location is not None:
            answer["headers"] = {
                "Location": {
                    "description": f"where the created resource is: `{operation.location}`",
                    "required": True,
                    "schema": {"type": "string"},
                }
            }
        responses[str(status)] = answer
    error = refs[Error]
    for status, codes in error_codes(operation).items():
        listed = ", ".join(f"`{code}`" for code in codes)
        # The codes are an enum, so an answer with a code the table does not list fails
        # Schemathesis' schema check: the listed codes cannot drift from the answered ones.
        coded = {"properties": {"error": {"properties": {"code": {"enum": list(codes)}}}}}
        responses[str(status)] = {
            "description": f"error codes: {listed}",
            "content": {"application/json": {"schema": {"allOf": [error, coded]}}},
        }
    # Any other status is a refusal in the same shape (405 for a method no route takes, 500
    # `internal_error`).
    responses["default"] = {"description": "an error", "content": {"application/json": {"schema": error}}}
    return responses


def _operation(operation: Operation, refs: dict[type[BaseModel], dict[str, Any]]) -> dict[str, Any]:
    described: dict[str, Any] = {
        "operationId": _operation_id(operation),
        "summary": operation.summary,
        "tags": [operation.tag],
        "parameters": _parameters(operation),
        "responses": _responses(operation, refs),
        "security": _SECURITY[operation.security],
        "x-error-codes": {str(status): list(codes) for status, codes in error_codes(operation).items()},
    }
    body = _request_body(operation, refs)
    if body is not None:
        described["requestBody"] = body
    if operation.security == "live":
        described["x-websocket"] = True
    return described


def _operation_id(operation: Operation) -> str:
    words = [part.strip("{}") for part in operation.path.split("/") if part and part != "v1"]
    return "_".join([operation.method.lower(), *words]).replace("-", "_").replace(".", "_")


@cache
def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document for this gateway's API."""
    models: set[type[BaseModel]] = {Error, *(op.body for op in OPERATIONS if op.body is not None)}
    models.update(model for op in OPERATIONS for model in op.answer_models())
    mode: JsonSchemaMode = "validation"
    described, definitions = models_json_schema(
        [(model, mode) for model in sorted(models, key=lambda m: m.__name__)], ref_template=REF
    )
    refs = {model: described[(model, mode)] for model in models}
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(operation, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Switchboard",
            "version": VERSION,
            "description": (
                "The control plane for realtime voice-agent calls. Every error is "
                '`{"error": {"code", "message"}}`; each answer lists the codes it may carry.'
            ),
        },
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "an API key (`sbk_…`) or the deployment's API token",
                },
                "liveToken": {
                    "type": "apiKey",
                    "in": "query",
                    "name": "token",
                    "description": "a session's live token (`POST /v1/sessions/{id}/live-token`)",
                },
                "webhookSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "webhook-signature",
                    "description": (
                        "the provider's Standard Webhooks signature (with `webhook-id` and "
                        "`webhook-timestamp`), checked with the webhook secret"
                    ),
                },
            },
        },
    }
