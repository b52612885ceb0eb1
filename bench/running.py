"""What every `switchboard bench` command does around its measurements: the services (local
PostgreSQL and Redis, or embedded ones) for the run, progress on stderr, figures on stdout."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from pipeline.platform.config import Settings
from switchboard.services import resolve_services

Log = Callable[[str], None]


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def on_services(settings: Settings, work: Callable[[str, str, Log], dict[str, Any]]) -> dict[str, Any]:
    """Run `work(database_url, redis_url, log)` on the run's services, stopping what was started."""
    services = resolve_services(settings.database_url, settings.redis_url, settings.data_dir, log=log)
    try:
        return work(services.database_url, services.redis_url, log)
    finally:
        services.stop()


def report(figures: dict[str, Any], *, as_json: bool, render: Callable[[dict[str, Any]], str]) -> int:
    print(json.dumps(figures) if as_json else render(figures))
    return 0
