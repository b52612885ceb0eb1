"""`agents`: create an agent, add a version from a JSON file, list, show, publish, roll back,
diff two versions, through a gateway's API."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pipeline.platform.config import Settings
from switchboard.cli.reach import THROUGH_GATEWAY, through_api


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`agents`."""
    agents = commands.add_parser(
        "agents",
        help="agents and their versions: create NAME, add-version NAME --spec FILE.json, list, show NAME, "
        f"publish NAME VERSION, rollback NAME, diff NAME FROM TO (changes are an admin's), {THROUGH_GATEWAY}",
    )
    agents.add_argument(
        "action",
        choices=["create", "add-version", "list", "show", "publish", "rollback", "diff"],
        help="what to do",
    )
    agents.add_argument("name", nargs="?", help="the agent's name")
    agents.add_argument("versions", nargs="*", type=int, help="publish: the version; diff: the two versions")
    agents.add_argument(
        "--spec", type=Path, help="add-version: a JSON file holding the version (a session body)"
    )
    agents.add_argument("--api", help="the gateway's API (default: from the settings)")
    agents.set_defaults(run=_agents)


def _agents(settings: Settings, arguments: argparse.Namespace) -> int:
    action, name, versions = arguments.action, arguments.name, arguments.versions
    if action == "list":
        return through_api(settings, arguments.api, lambda client: client._ok("GET", "/v1/agents"))
    if not name:
        return _usage(f"agents {action} needs the agent's name")
    path = f"/v1/agents/{quote(name, safe='')}"
    wanted = {"publish": 1, "diff": 2}.get(action, 0)
    if len(versions) != wanted:
        return _usage(f"agents {action} takes {wanted} version number(s), not {len(versions)}")
    calls: dict[str, tuple[str, str, Any]] = {
        "create": ("POST", "/v1/agents", {"name": name}),
        "show": ("GET", path, None),
        "rollback": ("POST", f"{path}/rollback", None),
    }
    if action == "publish":
        calls["publish"] = ("POST", f"{path}/versions/{versions[0]}/publish", None)
    if action == "diff":
        calls["diff"] = ("GET", f"{path}/diff?from={versions[0]}&to={versions[1]}", None)
    if action == "add-version":
        if arguments.spec is None:
            return _usage("agents add-version needs --spec FILE.json")
        try:
            spec = json.loads(arguments.spec.read_text())
        except (OSError, ValueError) as error:
            return _usage(f"{arguments.spec}: not a JSON file ({error})")
        calls["add-version"] = ("POST", f"{path}/versions", spec)
    method, target, body = calls[action]
    return through_api(settings, arguments.api, lambda client: client._ok(method, target, body))


def _usage(message: str) -> int:
    print(f"switchboard: {message}", file=sys.stderr)
    return 2
