"""`dlq`: the dead letters, in the database (switchboard.dlq lists, shows, replays and purges)."""

from __future__ import annotations

import argparse

from pipeline.platform.config import Settings
from switchboard.cli.reach import IN_DATABASE, reach_services


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`dlq`."""
    dlq = commands.add_parser("dlq", help=f"dead letters: list, show, replay or purge them, {IN_DATABASE}")
    dlq.add_argument("action", choices=["list", "show", "replay", "purge"], help="what to do")
    dlq.add_argument("ids", nargs="*", help="message ids (a unique prefix is enough)")
    dlq.add_argument("--all", action="store_true", help="replay or purge every dead letter")
    dlq.add_argument("--json", action="store_true", help="print as JSON")
    dlq.set_defaults(run=_dlq)


def _dlq(settings: Settings, arguments: argparse.Namespace) -> int:
    from switchboard.dlq import run_dlq

    services = reach_services(settings, quiet=True)
    return run_dlq(
        settings, services, arguments.action, arguments.ids, every=arguments.all, as_json=arguments.json
    )
