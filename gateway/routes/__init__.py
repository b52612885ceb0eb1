"""The gateway's HTTP API, a room to a module; this module only assembles the route table.

Every route but `GET /healthz` needs `Authorization: Bearer <API token>` (gateway.api's guard);
the live stream also takes a live token (`?token=`, per session, expiring: see
`pipeline.api.watch_tokens`), so a browser never holds the API token. Errors are
`{"error": {"code", "message"}}`.

The handlers decide nothing about a session: they validate the request, then ask a worker (an
RPC on the admission queue) or number an event into the session's log (the sink), and answer
with what came back. Each room declares its routes beside its handlers
(gateway/routes/table.py), and `/openapi.json` is built from this table (gateway/openapi.py).
"""

from __future__ import annotations

from gateway.routes import (
    agents,
    calls,
    campaigns,
    dead_letters,
    desk,
    erasure,
    line,
    models,
    phone,
    service,
    sessions,
    suppressions,
)
from gateway.routes.table import RouteTable

ROUTES = RouteTable(
    service.ROUTES,
    sessions.ROUTES,
    line.ROUTES,
    erasure.ROUTES,
    desk.ROUTES,
    phone.ROUTES,
    calls.ROUTES,
    campaigns.ROUTES,
    suppressions.ROUTES,
    dead_letters.ROUTES,
    models.ROUTES,
    agents.ROUTES,
)

__all__ = ["ROUTES"]
