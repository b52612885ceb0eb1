"""`keys` and `data-keys`: the API keys with their roles, and the deployment key that wraps every
session's key, in the database."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.platform.config import Settings
from pipeline.privacy.sealing import DeploymentKey, SealedValueUnreadable
from switchboard.cli.reach import IN_DATABASE, apply_migrations, reach_services
from switchboard.data_key import PREVIOUS


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`keys` and `data-keys` (which `main` runs itself: it reads the deployment keys first)."""
    keys = commands.add_parser(
        "keys", help=f"API keys with roles: add (the key is shown once), list, revoke, {IN_DATABASE}"
    )
    keys.add_argument("action", choices=["add", "list", "revoke"], help="what to do")
    keys.add_argument("target", nargs="?", help="add: the key's name (a person, an app); revoke: the key id")
    keys.add_argument(
        "--role", choices=["app", "supervisor", "viewer", "admin"], help="add: what the key may do"
    )
    keys.set_defaults(run=_keys)
    data_keys = commands.add_parser(
        "data-keys",
        help="the deployment key: rotate (re-wrap every session's key under SWITCHBOARD_DATA_KEY, "
        "opening them with SWITCHBOARD_DATA_KEY_PREVIOUS), check (the ids of the keys a process "
        f"starting here would use) or new (print a fresh key); rotate works {IN_DATABASE}",
    )
    data_keys.add_argument("action", choices=["rotate", "check", "new"], help="what to do")
    data_keys.add_argument(
        "--every-namespace",
        action="store_true",
        help="rotate: every session in the database, not only this deployment's namespace",
    )


def _keys(settings: Settings, arguments: argparse.Namespace) -> int:
    """API keys, in the deployment's database (the first admin key needs no key to make)."""
    from models import keys
    from models.db import connect
    from pipeline.api.roles import Role
    from pipeline.call.errors import KeyNotFound

    services = reach_services(settings, quiet=True)
    connect(services.database_url)
    apply_migrations(services)
    namespace = settings.broker_namespace
    try:
        if arguments.action == "list":
            print(json.dumps(keys.keys(namespace), indent=2))
            return 0
        if not arguments.target or (arguments.action == "add" and not arguments.role):
            print(
                f"switchboard: keys {arguments.action} needs a name and --role (add) or a key id (revoke)",
                file=sys.stderr,
            )
            return 2
        if arguments.action == "revoke":
            keys.revoke_key(namespace, arguments.target)
            print(json.dumps({"revoked": arguments.target}))
            return 0
        made = keys.add_key(namespace, arguments.target, Role(arguments.role))
    except KeyNotFound as error:
        print(f"switchboard: {error}", file=sys.stderr)
        return 1
    finally:
        services.stop()
    print(json.dumps(made, indent=2))
    print("the key is shown this once: keep it now", file=sys.stderr)
    return 0


def rotate_data_keys(settings: Settings, keys: tuple[DeploymentKey, ...], *, every_namespace: bool) -> int:
    """Re-wrap the sessions' keys under the current deployment key; print how many as JSON.
    Exit 2 when a session's key is under a deployment key not given (set it as the previous)."""
    from models import data_keys, outbound
    from models.db import connect

    services = reach_services(settings, quiet=True)
    try:
        connect(services.database_url)
        apply_migrations(services)
        namespace = None if every_namespace else settings.broker_namespace
        rotated = data_keys.rotate(keys, namespace=namespace)
        # The trunks' passwords are under the deployment key too.
        rotated += outbound.rotate_trunks(keys, namespace=namespace)
    except SealedValueUnreadable as error:
        print(f"switchboard: data-keys rotate stopped: {error}; set it as {PREVIOUS}", file=sys.stderr)
        return 2
    finally:
        services.stop()
    print(json.dumps({"rotated": rotated, "key_id": keys[0].key_id}))
    return 0
