"""How a command reaches a deployment: through a gateway's API, or in the database (its services
found or started, then reached once)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pipeline.platform.config import Settings
from switchboard.services import Services, check_reachable, resolve_services

if TYPE_CHECKING:
    from switchboard.client import Client

# Said in each command's help: where the command's answers come from.
THROUGH_GATEWAY = "through a gateway's API"
IN_DATABASE = "in the database"
# A command that reads only this machine's files (the model catalog its settings name).
ON_THIS_MACHINE = "from this machine's settings"

# What a command runs (its parser's `run`): the settings and the parsed command line in, the
# exit status out.
Run = Callable[[Settings, argparse.Namespace], int]


def api_url(settings: Settings, given: str | None) -> str:
    """The gateway's API a command asks: `--api`, else the settings' host and port."""
    return given or f"http://{settings.gateway_host}:{settings.gateway_port}"


def through_api(settings: Settings, given_api: str | None, work: Callable[[Client], Any]) -> int:
    """Ask a gateway's API with the deployment's token and print the JSON answer; exit 1 on a
    refusal (its body printed) or when no gateway answers."""
    from switchboard.client import ApiError, Client

    api = api_url(settings, given_api)
    try:
        result = work(Client(api, settings.api_token))
    except ApiError as error:
        print(json.dumps(error.body, indent=2), file=sys.stderr)
        return 1
    except OSError as error:
        print(f"switchboard: no gateway answered at {api}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0


def reach_services(settings: Settings, *, quiet: bool = False, database: bool = True) -> Services:
    """Find or start the services, then reach them once: one that does not answer is a
    `ConfigError` naming its variable (exit 2) before anything else starts."""
    log = (lambda _message: None) if quiet else (lambda message: print(f"switchboard: {message}", flush=True))
    services = resolve_services(settings.database_url, settings.redis_url, settings.data_dir, log=log)
    check_reachable(services, database=database)
    return services


def apply_migrations(services: Services) -> list[str]:
    """Apply the schema's migrations not applied yet; the names of those applied."""
    from models.db import connect
    from models.migrate import migrate

    return migrate(connect(services.database_url))
