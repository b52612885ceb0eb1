"""The operator console: one server-rendered page and a little plain JavaScript, no build step.

The page and its script hold no data and need no key to fetch; the page asks the person for an
API key (kept in the tab's sessionStorage, never in a URL) and every call it makes to the API
carries it. The transcript comes over the watchers' stream with a per-session watch token.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response

from gateway.web import error_response

ASSETS = Path(__file__).resolve().parent
_SERVED = {
    "console.js": "text/javascript",
    "console.css": "text/css",
    "docs.js": "text/javascript",
    "docs.css": "text/css",
}
# The page may run only its own script and talk only to this gateway.
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


async def page(_request: Request) -> Response:
    return FileResponse(ASSETS / "console.html", media_type="text/html", headers=_headers())


async def docs_page(_request: Request) -> Response:
    """The API's description (`/openapi.json`) as a page, drawn by docs.js."""
    return FileResponse(ASSETS / "docs.html", media_type="text/html", headers=_headers())


async def asset(request: Request) -> Response:
    name = request.path_params["asset"]
    if name not in _SERVED:
        return error_response(404, "not_found", f"no console asset {name!r}")
    return FileResponse(ASSETS / name, media_type=_SERVED[name], headers=_headers())


def _headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": _POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
