"""Sentry, initialised only by entry points (and before any broker exists, so the Dramatiq
integration can wrap it)."""

from __future__ import annotations

import sentry_sdk
from sentry_sdk.integrations.dramatiq import DramatiqIntegration

from pipeline.config import Settings


def init_sentry(settings: Settings, process: str) -> bool:
    if not settings.sentry_dsn:
        return False
    sentry_sdk.init(
        dsn=settings.sentry_dsn,
        environment=settings.sentry_environment,
        integrations=[DramatiqIntegration()],
        server_name=f"{process}:{settings.gateway_id if process == 'gateway' else ''}",
    )
    sentry_sdk.set_tag("process", process)
    return True
