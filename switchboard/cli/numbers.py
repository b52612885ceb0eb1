"""`routes` and `callers`: the phone numbers the agents answer, and erasing a number's sessions,
through a gateway's API."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from pipeline.platform.config import Settings
from switchboard.cli.reach import THROUGH_GATEWAY, through_api

if TYPE_CHECKING:
    from switchboard.client import Client


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`routes` and `callers`."""
    routes = commands.add_parser(
        "routes",
        help=f"phone numbers and the agents that answer them: add, list or remove a route, {THROUGH_GATEWAY}",
    )
    routes.add_argument("action", choices=["add", "list", "remove"], help="what to do")
    routes.add_argument(
        "target", nargs="?", help="add: the number (or a prefix ending in *); remove: the route id"
    )
    routes.add_argument("--instructions", help="add: the agent's instructions")
    routes.add_argument("--tools", default="", help="add: registered tools, comma-separated")
    routes.add_argument("--greeting", help="add: words the agent says when it answers")
    routes.add_argument("--hangup-when", help="add: when the agent may end the call itself")
    routes.add_argument("--max-calls", type=int, help="add: calls the route answers at once (then busy)")
    routes.add_argument(
        "--transfer-to", action="append", default=[], help="add: a tel:/sip: target (repeatable)"
    )
    routes.add_argument("--key", action="append", default=[], help="add: KEY=attention|end (repeatable)")
    routes.add_argument("--silences", type=int, help="add: idle timeouts before the agent hangs up")
    routes.add_argument("--api", help="the gateway's API (default: from the settings)")
    routes.set_defaults(run=_routes)
    callers = commands.add_parser(
        "callers",
        help=f"erase every ended session of a caller's (or callee's) phone number (admin), {THROUGH_GATEWAY}",
    )
    callers.add_argument("action", choices=["erase"], help="what to do")
    callers.add_argument("number", help="the number, E.164: +14155550123")
    callers.add_argument("--api", help="the gateway's API (default: from the settings)")
    callers.set_defaults(run=_callers)


def _routes(settings: Settings, arguments: argparse.Namespace) -> int:
    """Add, list or remove routes through a gateway's API; exit 1 on a refusal."""
    if arguments.action == "list":
        return through_api(settings, arguments.api, lambda client: client.routes())
    if arguments.action == "remove":
        if not arguments.target:
            print("switchboard: routes remove needs the route id", file=sys.stderr)
            return 2
        return through_api(settings, arguments.api, lambda client: client.remove_route(arguments.target))
    if not (arguments.target and arguments.instructions):
        print("switchboard: routes add needs a number and --instructions", file=sys.stderr)
        return 2
    session: dict[str, Any] = {"instructions": arguments.instructions}
    if arguments.tools:
        session["tools"] = [name.strip() for name in arguments.tools.split(",") if name.strip()]
    if arguments.greeting:
        session["greeting"] = {"say": arguments.greeting}
    if arguments.hangup_when:
        session["hangup"] = {"when": arguments.hangup_when}
    terms: dict[str, Any] = {"transfer_targets": arguments.transfer_to}
    if arguments.max_calls is not None:
        terms["max_calls"] = arguments.max_calls
    if arguments.silences is not None:
        terms["silences"] = arguments.silences
    if arguments.key:
        terms["keys"] = dict(pair.split("=", 1) for pair in arguments.key if "=" in pair)
    return through_api(
        settings, arguments.api, lambda client: client.add_route(arguments.target, session, **terms)
    )


def _callers(settings: Settings, arguments: argparse.Namespace) -> int:
    """Erase a number's ended sessions through a gateway's API; print the JSON answer. Exit 1
    on a refusal (a malformed number, a key that may not), and when live sessions were skipped."""
    skipped: list[bool] = []

    def erase(client: Client) -> Any:
        result = client.erase_caller(arguments.number)
        skipped.append(bool(result.get("skipped_live")))
        return result

    status = through_api(settings, arguments.api, erase)
    return 1 if status or any(skipped) else 0
