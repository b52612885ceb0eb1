"""The API's description: a valid OpenAPI 3.1 document that names every route the app serves."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any, cast

from openapi_spec_validator import validate
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient

from gateway import openapi
from gateway.api import authenticated, build_api, json_bodies, storable_addresses
from gateway.keys import KeyRing
from gateway.ports import ApiPort

ERROR = {"$ref": "#/components/schemas/Error"}


def _served_operations() -> set[tuple[str, str]]:
    """(method, path) of every route the app serves, its path in OpenAPI's template form."""
    gateway = cast(ApiPort, SimpleNamespace(gateway_id="gw", rpc=None, sink=None, watch_secret=b"s"))
    served: set[tuple[str, str]] = set()
    for route in build_api(gateway).routes:
        assert isinstance(route, Route | WebSocketRoute), route
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        if isinstance(route, WebSocketRoute):
            served.add(("GET", path))
            continue
        served.update((method, path) for method in route.methods or () if method != "HEAD")
    return served


def test_the_document_is_valid_openapi_3_1() -> None:
    """openapi-spec-validator accepts the document, and it says it is OpenAPI 3.1."""
    document = openapi.document()
    validate(document)
    assert document["openapi"] == "3.1.0"


def test_every_route_has_an_operation_and_every_operation_a_route() -> None:
    """A route added to the app without an operation in the spec (or the reverse) fails here."""
    described = {
        (method.upper(), path) for path, methods in openapi.document()["paths"].items() for method in methods
    }
    served = _served_operations()
    assert served - described == set(), "routes the spec does not describe"
    assert described - served == set(), "operations no route serves"


def test_every_body_is_its_models_json_schema() -> None:
    """A validated body is described by the JSON Schema of the model the handler validates with."""
    schemas = openapi.document()["components"]["schemas"]
    for operation in openapi.OPERATIONS:
        if operation.body is None:
            continue
        own = operation.body.model_json_schema(ref_template=openapi.REF)
        own.pop("$defs", None)
        assert schemas[operation.body.__name__] == own, operation.body.__name__


def test_every_json_answer_is_its_models_json_schema() -> None:
    """Every success answer in JSON is described by a model the route declares (no bare
    object), and the component is that model's own JSON Schema: the answers' schemas come from
    the code that makes the answers."""
    document = openapi.document()
    schemas = document["components"]["schemas"]
    for operation in openapi.OPERATIONS:
        described = document["paths"][operation.path][operation.method.lower()]["responses"]
        for status in operation.success:
            content = described[str(status)].get("content", {})
            if "application/json" not in content:
                assert status == 101 or content, (operation.method, operation.path, status)
                continue
            model = operation.answer_model(status)
            assert model is not None, (operation.method, operation.path, status)
            assert content["application/json"]["schema"] == {"$ref": openapi.REF.format(model=model.__name__)}
            own = model.model_json_schema(ref_template=openapi.REF)
            own.pop("$defs", None)
            assert schemas[model.__name__] == own, model.__name__


def test_every_error_answer_is_the_error_shape_and_lists_its_codes() -> None:
    """Each 4xx/5xx answer is `{"error": {"code", "message"}}`, its code one of those listed."""
    for path, methods in openapi.document()["paths"].items():
        for method, operation in methods.items():
            for status, answer in operation["responses"].items():
                if status != "default" and int(status) < 400:
                    continue
                schema = answer["content"]["application/json"]["schema"]
                if status == "default":
                    assert schema == ERROR, (method, path)
                    continue
                codes = operation["x-error-codes"][status]
                assert codes, (method, path, status)
                assert schema["allOf"][0] == ERROR, (method, path, status)
                enum = schema["allOf"][1]["properties"]["error"]["properties"]["code"]["enum"]
                assert enum == codes, (method, path, status)
            if {"apiKey": []} in operation["security"]:
                assert "401" in operation["responses"], (method, path)


def test_the_document_and_its_page_need_no_key() -> None:
    """`/openapi.json` and `/docs` answer without a bearer token; the API's routes still ask one."""
    gateway = cast(ApiPort, SimpleNamespace(gateway_id="gw", rpc=None, sink=None, watch_secret=b"s"))
    keyring = KeyRing("token-for-the-test", cast(Any, None))
    app = authenticated(build_api(gateway), keyring)
    with TestClient(cast(Any, app)) as client:
        document = client.get("/openapi.json")
        assert document.status_code == 200
        assert document.json()["paths"]["/v1/sessions"]["post"]["operationId"] == "post_sessions"
        page = client.get("/docs")
        assert page.status_code == 200
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert '<script src="/console/docs.js"' in page.text
        assert client.get("/console/docs.js").status_code == 200
        refused = client.get("/v1/me")
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"


def test_a_path_or_query_holding_nul_is_refused_before_a_worker_is_asked() -> None:
    """U+0000 in a path parameter or a query value is 422 at once (it used to wait out the
    reply timeout: PostgreSQL refused it in the worker)."""
    gateway = cast(ApiPort, SimpleNamespace(gateway_id="gw", rpc=None, sink=None, watch_secret=b"s"))
    with TestClient(cast(Any, storable_addresses(build_api(gateway)))) as client:
        for method, path in (("GET", "/v1/suppressions?cursor=%00"), ("DELETE", "/v1/routes/x%00")):
            answer = client.request(method, path)
            assert (answer.status_code, answer.json()["error"]["code"]) == (422, "malformed_request")


def test_a_body_is_taken_only_in_a_media_type_its_operation_declares() -> None:
    """JSON (`application/json`, `application/*+json`, UTF-8 if a charset is named) everywhere;
    an SDP offer on connect and a CSV of contacts where the table says so; the provider's
    webhook whatever it sends. Anything else is 415 before the routes (so before an
    idempotency key is claimed or a worker asked); a verb sent without a body is let through."""
    reached: list[str] = []

    async def routes(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await JSONResponse({}, status_code=204)(scope, receive, send)

    cases = [
        ("POST", "/v1/sessions", "application/json", b"{}", 204),
        ("POST", "/v1/sessions", "Application/JSON; charset=UTF-8", b"{}", 204),
        ("POST", "/v1/sessions", "application/vnd.switchboard+json", b"{}", 204),
        ("PUT", "/v1/sessions/s/prompt/rules", "application/json", b"{}", 204),
        ("POST", "/v1/sessions/s/connect", "application/sdp", b"v=0", 204),
        ("POST", "/v1/campaigns/c/contacts", "text/csv; charset=utf-8", b"to\n", 204),
        ("POST", "/v1/webhooks/openai", "text/plain", b"signed", 204),
        ("POST", "/v1/sessions/s/hold", None, b"", 204),
        ("POST", "/v1/sessions", "text/plain", b"{}", 415),
        ("POST", "/v1/sessions", None, b"{}", 415),
        ("POST", "/v1/sessions", "application/x-www-form-urlencoded", b"a=1", 415),
        ("POST", "/v1/sessions", "application/json; charset=latin-1", b"{}", 415),
        ("POST", "/v1/sessions", "text/csv", b"to\n", 415),
        ("PUT", "/v1/sessions/s/tools", "text/plain", b"{}", 415),
        ("POST", "/v1/campaigns/c/contacts", "text/plain", b"to\n", 415),
        ("POST", "/v1/campaigns/c/pause", "application/sdp", b"v=0", 415),
        ("POST", "/v1/sessions/s/hold", "text/plain", b"x", 415),
    ]
    # Not entered as a context: these routes have no lifespan to run.
    client = TestClient(cast(Any, json_bodies(routes)))
    for method, path, content_type, body, status in cases:
        reached.clear()
        headers = {"content-type": content_type} if content_type else {}
        answer = client.request(method, path, content=body, headers=headers)
        assert answer.status_code == status, (method, path, content_type)
        if status == 415:
            assert answer.json()["error"]["code"] == "unsupported_media_type"
            assert reached == [], (method, path, content_type)
        else:
            assert reached == [path]


def test_every_201_declares_its_location_and_every_body_its_415() -> None:
    for path, methods in openapi.document()["paths"].items():
        for method, operation in methods.items():
            created = operation["responses"].get("201")
            if created is not None:
                assert created["headers"]["Location"]["required"] is True, (method, path)
            if "requestBody" in operation:
                assert operation["x-error-codes"]["415"] == ["unsupported_media_type"], (method, path)
            else:
                assert "415" not in operation["responses"], (method, path)
