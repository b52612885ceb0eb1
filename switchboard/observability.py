"""Sentry, initialised only by entry points (and before any broker exists, so the Dramatiq
integration can wrap it).

Dramatiq retries a failed event up to ten times, and both the integration's middleware and
Dramatiq's own error log report every failed attempt. Switchboard reports a message once, when
it is dead-lettered (`workers.middleware.ReportDeadLetters`), and drops the per-attempt reports
here; failures a transition decides (an incident of severity error) are reported by the actor
that committed them, tagged with the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sentry_sdk
from sentry_sdk.integrations.dramatiq import DramatiqIntegration

from pipeline.config import Settings

if TYPE_CHECKING:
    from sentry_sdk._types import Event


def init_sentry(settings: Settings, process: str, transport: Any = None) -> bool:
    """Start Sentry when a DSN is set (or a transport is given: tests capture in memory)."""
    if not settings.sentry_dsn and transport is None:
        return False
    sentry_sdk.init(
        dsn=settings.sentry_dsn,
        environment=settings.sentry_environment,
        integrations=[DramatiqIntegration()],
        server_name=f"{process}:{settings.gateway_id if process == 'gateway' else ''}",
        before_send=only_final_failures,
        transport=transport,
    )
    sentry_sdk.set_tag("process", process)
    return True


def only_final_failures(event: Event, hint: dict[str, Any]) -> Event | None:
    """Drop the reports of a single failed Dramatiq attempt (a retry may still succeed)."""
    del hint
    if str(event.get("logger", "")).startswith("dramatiq"):
        return None
    for value in (event.get("exception") or {}).get("values") or []:
        if (value.get("mechanism") or {}).get("type") == "dramatiq":
            return None
    return event
