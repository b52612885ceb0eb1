"""Sentry, initialised only by entry points (and before any broker exists, so the Dramatiq
integration can wrap it).

Dramatiq retries a failed event up to ten times, and both the integration's middleware and
Dramatiq's own error log report every failed attempt. Switchboard reports a message once, when
it is dead-lettered (`workers.middleware.ReportDeadLetters`), and drops the per-attempt reports
here; failures a transition decides (an incident of severity error) are reported by the actor
that committed them, tagged with the session.

No caller's card number, SSN, e-mail, phone number or IBAN reaches Sentry in the clear: no
default PII (addresses, headers, users), no local variables in stack frames, and every string
left in an event or breadcrumb redacted (`pipeline.privacy.detect`) before it is sent — an
exception's message quotes what failed, and that may be what the caller said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sentry_sdk
from sentry_sdk.integrations.dramatiq import DramatiqIntegration

from pipeline.platform.config import Settings
from switchboard.logs import redacted

if TYPE_CHECKING:
    from sentry_sdk._types import Breadcrumb, BreadcrumbHint, DataCollectionUserOptions, Event


# Sentry 3 collects by category (`data_collection`) where 2.x had `send_default_pii` and
# `include_local_variables`. Every category that can carry what a caller said or an app sent is
# off: users and cookies, headers, bodies and query strings, SQL parameters, queue payloads (a
# Dramatiq message is an event with its transcript) and the local variables of stack frames.
# Source lines around a frame are the project's own code and stay.
_NOTHING_OF_THE_CALLERS: DataCollectionUserOptions = {
    "user_info": False,
    "cookies": {"mode": "off"},
    "http_headers": {"request": {"mode": "off"}},
    "http_bodies": [],
    "url_query_params": {"mode": "off"},
    "gen_ai": {"inputs": False, "outputs": False},
    "mcp": {"inputs": False, "outputs": False},
    "database_query_data": False,
    "queues": False,
    "stack_frame_variables": False,
}


def init_sentry(settings: Settings, process: str, transport: Any = None) -> bool:
    """Start Sentry when a DSN is set (or a transport is given: tests capture in memory)."""
    if not settings.sentry_dsn and transport is None:
        return False
    sentry_sdk.init(
        dsn=settings.sentry_dsn,
        environment=settings.sentry_environment,
        integrations=[DramatiqIntegration()],
        server_name=f"{process}:{settings.gateway_id if process == 'gateway' else ''}",
        before_send=_reported,
        before_breadcrumb=_scrubbed_breadcrumb,
        data_collection=_NOTHING_OF_THE_CALLERS,
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


def _reported(event: Event, hint: dict[str, Any]) -> Event | None:
    """What is sent of an event: the final failures only, every string in them redacted."""
    kept = only_final_failures(event, hint)
    if kept is None:
        return None
    scrubbed: Event = _scrubbed(kept)
    return scrubbed


def _scrubbed_breadcrumb(crumb: Breadcrumb, hint: BreadcrumbHint) -> Breadcrumb | None:
    """A breadcrumb (a log line, a query, a request) with every string in it redacted."""
    del hint
    scrubbed: Breadcrumb = _scrubbed(crumb)
    return scrubbed


def _scrubbed(value: Any) -> Any:
    """`value` with every string in it redacted, through dicts (their keys too), lists and
    tuples; what nothing changed in is returned as it was (no copy)."""
    if isinstance(value, str):
        masked = redacted(value)
        return value if masked == value else masked
    if isinstance(value, dict):
        items = [(_scrubbed(key), _scrubbed(item)) for key, item in value.items()]
        changed = any(
            new_key is not key or new_item is not item
            for (new_key, new_item), (key, item) in zip(items, value.items(), strict=True)
        )
        return dict(items) if changed else value
    if isinstance(value, list | tuple):
        scrubbed = [_scrubbed(item) for item in value]
        if all(new is old for new, old in zip(scrubbed, value, strict=True)):
            return value
        return scrubbed if isinstance(value, list) else tuple(scrubbed)
    return value
