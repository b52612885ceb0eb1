"""The gateway's HTTP API as one ASGI app: the route table (gateway/routes/), served with its
own description (gateway/openapi.py), and the guards every request passes before its route:
the bearer token and the role, an address that can be stored, a body in a media type its
operation takes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette

from gateway import openapi
from gateway.keys import KeyRing
from gateway.routes import ROUTES
from gateway.routes.phone import WEBHOOK_PATH
from gateway.routes.service import DESCRIPTION
from gateway.web import ASGIApp, Receive, Scope, Send, error_response, header
from pipeline.api.roles import permission_for

if TYPE_CHECKING:
    from gateway.ports import ApiPort

# Creates that find what an earlier run of the same keyed request made (their ids derive from
# the key, or they add or replace by name or number): a 5xx of theirs is not kept for a day.
RERUNS_SAFELY = frozenset(
    {"/v1/sessions", "/v1/calls", "/v1/campaigns", "/v1/routes", "/v1/trunks", "/v1/suppressions"}
)


def build_api(gateway: ApiPort) -> Starlette:
    """The route table served through `gateway`, with its description at `/openapi.json`."""
    app = ROUTES.app(gateway)
    setattr(app.state, DESCRIPTION, openapi.document())
    return app


def authenticated(app: ASGIApp, keyring: KeyRing) -> ASGIApp:
    """Every HTTP request but the health check and the provider's webhooks carries a bearer
    token: the deployment's API token or an API key (401 otherwise), whose role must allow the
    route (403 otherwise). Checked before routing, so an unauthenticated client learns nothing
    of the routes; the identity rides on the request (`scope["identity"]`). The live stream
    checks its own credentials: it also takes a live token."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _is_open(scope["path"]):
            identity = await keyring.identify(header(scope, b"authorization"))
            if identity is None:
                response = error_response(
                    401,
                    "unauthorized",
                    "a valid bearer token is required",
                    {"WWW-Authenticate": 'Bearer realm="switchboard"'},
                )
                await response(scope, receive, send)
                return
            needed = permission_for(scope["method"], scope["path"])
            if not identity.may(needed):
                message = f"a {identity.role} key may not {needed} (this route needs it)"
                await error_response(403, "forbidden", message)(scope, receive, send)
                return
            scope["identity"] = identity
        await app(scope, receive, send)

    return guard


def storable_addresses(app: ASGIApp) -> ASGIApp:
    """Refuse (422) an HTTP request whose path or query holds U+0000: its parameters reach
    the workers' queries, and PostgreSQL refuses the character, so such a request used to be
    answered 503 `reply_timeout` after the whole reply wait (Schemathesis found it)."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ("\x00" in scope["path"] or b"%00" in scope["query_string"]):
            message = "the path or query holds U+0000, which cannot be stored"
            await error_response(422, "malformed_request", message)(scope, receive, send)
            return
        await app(scope, receive, send)

    return guard


# A JSON body's media types: application/json and any application/*+json (RFC 6839).
_JSON = "application/json"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def json_bodies(app: ASGIApp) -> ASGIApp:
    """Refuse (415 `unsupported_media_type`) a request whose body's Content-Type is not one its
    operation takes (its route declares them: gateway/routes/): JSON (`application/json` or
    `application/*+json`, in UTF-8 if it names a charset) everywhere, an SDP offer or a CSV where
    the operation says so.
    Checked before an idempotency key is claimed or a worker asked, so a refused body changes
    nothing; a request without a body is let through (a verb may take none)."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in _BODY_METHODS and _has_body(scope):
            accepted = ROUTES.accepted_bodies(scope["method"], scope["path"])
            sent = header(scope, b"content-type").decode("latin-1")
            if accepted is not None and not _is_accepted(sent, accepted):
                message = f"the body's Content-Type must be {' or '.join(accepted)}, not {sent[:80]!r}"
                await error_response(415, "unsupported_media_type", message)(scope, receive, send)
                return
        await app(scope, receive, send)

    return guard


def _has_body(scope: Scope) -> bool:
    length = header(scope, b"content-length").strip()
    return bool(header(scope, b"transfer-encoding")) or (bool(length) and length != b"0")


def _is_accepted(content_type: str, accepted: tuple[str, ...]) -> bool:
    kind, *parameters = (part.strip().lower() for part in content_type.split(";"))
    if _JSON in accepted and (kind == _JSON or (kind.startswith("application/") and kind.endswith("+json"))):
        charsets = [
            value.strip('"') for name, _, value in (p.partition("=") for p in parameters) if name == "charset"
        ]
        # JSON is UTF-8 (RFC 8259); a body said to be in another charset would be misread.
        return all(charset in ("utf-8", "utf8") for charset in charsets)
    return kind in accepted


def _is_open(path: str) -> bool:
    """Routes without a bearer token: the health check, the provider's webhooks (signed), the
    API's description and its page, and the console's page and scripts (they hold no data: the
    page asks for a key, and every call it makes carries it)."""
    return path in (
        "/healthz",
        "/readyz",
        WEBHOOK_PATH,
        "/console",
        "/openapi.json",
        "/docs",
    ) or path.startswith("/console/")


__all__ = ["RERUNS_SAFELY", "WEBHOOK_PATH", "authenticated", "build_api", "json_bodies", "storable_addresses"]
