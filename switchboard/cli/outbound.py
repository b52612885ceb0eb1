"""`trunks`, `campaigns` and `suppressions`: calls going out, through a gateway's API (a
campaign's contacts read from a CSV here and paged in)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.platform.config import Settings
from switchboard.cli.reach import THROUGH_GATEWAY, through_api

if TYPE_CHECKING:
    from switchboard.client import Client

# A campaign's contacts go to the API as JSON pages: the first with its creation, the rest with
# `POST /v1/campaigns/{id}/contacts`. A page holds at most the 1,000 contacts a JSON body takes,
# and is cut by its bytes too: a row may carry 20 vars of 200 characters (kilobytes of JSON), so
# a thousand long rows would pass the API's body bound (gateway.web.HttpLimits) and be refused
# whole with 413.
CONTACTS_PER_REQUEST = 1_000
REQUEST_BODY_BYTES = 1024 * 1024
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`trunks`, `campaigns` and `suppressions`."""
    trunks = commands.add_parser(
        "trunks", help=f"SIP trunks calls go out through: add, list or remove one (admin), {THROUGH_GATEWAY}"
    )
    trunks.add_argument("action", choices=["add", "list", "remove"], help="what to do")
    trunks.add_argument("name", nargs="?", help="add, remove: the trunk's name")
    trunks.add_argument("--url", help="add: the trunk's SIP address, sips:host[:port]")
    trunks.add_argument("--username", help="add: the digest username")
    trunks.add_argument("--password", help="add: the digest password (stored encrypted, never shown)")
    trunks.add_argument("--caller-number", help="add: the number calls come from, E.164")
    trunks.add_argument("--api", help="the gateway's API (default: from the settings)")
    trunks.set_defaults(run=_trunks)
    campaigns = commands.add_parser(
        "campaigns",
        help="calls going out to a list: create (from a CSV of contacts), list, show, pause, resume, "
        f"cancel, {THROUGH_GATEWAY}",
    )
    campaigns.add_argument(
        "action", choices=["create", "list", "show", "pause", "resume", "cancel"], help="what to do"
    )
    campaigns.add_argument("campaign", nargs="?", help="show, pause, resume, cancel: the campaign's id")
    campaigns.add_argument("--name", help="create: the campaign's name")
    campaigns.add_argument("--contacts", type=Path, help="create: a CSV with a `to` column (others are vars)")
    campaigns.add_argument("--instructions", help="create: the agent's instructions ({var} placeholders)")
    campaigns.add_argument("--greeting", help="create: what the agent says once a person answers")
    campaigns.add_argument("--handler", help="create: the Live delegation handler the agent's tasks go to")
    campaigns.add_argument("--trunk", help="create: the trunk to call through (default: the only one)")
    campaigns.add_argument("--max-concurrent", type=int, default=5, help="create: calls at once (default 5)")
    campaigns.add_argument("--window", help="create: days and hours to call in, e.g. mon-fri,09:00-20:00")
    campaigns.add_argument("--timezone", help="create: the window's zone for numbers that do not tell one")
    campaigns.add_argument(
        "--retry", action="append", default=[], help="create: OUTCOME=ATTEMPTS/AFTER_S, e.g. no_answer=3/600"
    )
    campaigns.add_argument("--voicemail-message", help="create: leave this on a machine (else hang up)")
    campaigns.add_argument("--api", help="the gateway's API (default: from the settings)")
    campaigns.set_defaults(run=_campaigns)
    suppressions = commands.add_parser(
        "suppressions",
        help=f"numbers never to dial: add, list or remove one (remove: admin), {THROUGH_GATEWAY}",
    )
    suppressions.add_argument("action", choices=["add", "list", "remove"], help="what to do")
    suppressions.add_argument("number", nargs="?", help="add, remove: the number, E.164")
    suppressions.add_argument("--reason", default="", help="add: why (kept with the number)")
    suppressions.add_argument("--cursor", default="", help="list: the `next` of the page before")
    suppressions.add_argument("--api", help="the gateway's API (default: from the settings)")
    suppressions.set_defaults(run=_suppressions)


def _trunks(settings: Settings, arguments: argparse.Namespace) -> int:
    """Add, list or remove SIP trunks through a gateway's API."""
    if arguments.action == "list":
        return through_api(settings, arguments.api, lambda client: client.trunks())
    if not arguments.name:
        print(f"switchboard: trunks {arguments.action} needs the trunk's name", file=sys.stderr)
        return 2
    if arguments.action == "remove":
        return through_api(settings, arguments.api, lambda client: client.remove_trunk(arguments.name))
    missing = [
        flag for flag in ("url", "username", "password", "caller_number") if not getattr(arguments, flag)
    ]
    if missing:
        flags = ", ".join("--" + flag.replace("_", "-") for flag in missing)
        print(f"switchboard: trunks add needs {flags}", file=sys.stderr)
        return 2
    trunk = {
        "name": arguments.name,
        "url": arguments.url,
        "username": arguments.username,
        "password": arguments.password,
        "caller_number": arguments.caller_number,
    }
    return through_api(settings, arguments.api, lambda client: client.add_trunk(trunk))


def _suppressions(settings: Settings, arguments: argparse.Namespace) -> int:
    """Add, list or remove numbers never to dial through a gateway's API."""
    if arguments.action == "list":
        return through_api(
            settings, arguments.api, lambda client: client.suppressions(cursor=arguments.cursor)
        )
    if not arguments.number:
        print(f"switchboard: suppressions {arguments.action} needs the number", file=sys.stderr)
        return 2
    if arguments.action == "remove":
        return through_api(settings, arguments.api, lambda client: client.unsuppress(arguments.number))
    return through_api(
        settings, arguments.api, lambda client: client.suppress(arguments.number, arguments.reason)
    )


def _campaigns(settings: Settings, arguments: argparse.Namespace) -> int:
    """Create (paging a CSV's contacts in), list, show, pause, resume or cancel campaigns."""
    if arguments.action == "list":
        return through_api(settings, arguments.api, lambda client: client.campaigns())
    if arguments.action != "create":
        if not arguments.campaign:
            print(f"switchboard: campaigns {arguments.action} needs the campaign's id", file=sys.stderr)
            return 2
        if arguments.action == "show":
            return through_api(settings, arguments.api, lambda client: client.campaign(arguments.campaign))
        return through_api(
            settings, arguments.api, lambda client: client.campaign_verb(arguments.campaign, arguments.action)
        )
    if not (arguments.name and arguments.contacts and arguments.instructions):
        print(
            "switchboard: campaigns create needs --name, --contacts FILE.csv and --instructions",
            file=sys.stderr,
        )
        return 2
    from pipeline.call.errors import BadInput

    try:
        spec = _campaign_spec(arguments)
        contacts, refused = _read_contacts(arguments.contacts, spec.get("window"))
    except (OSError, UnicodeDecodeError, ValueError, BadInput) as error:
        print(f"switchboard: campaigns create: {arguments.contacts}: {error}", file=sys.stderr)
        return 2
    for line, reason in refused:
        print(f"{arguments.contacts}:{line}: refused: {reason}", file=sys.stderr)
    if not contacts:
        print(
            f"switchboard: campaigns create: no campaign was created: every one of the {len(refused):,} "
            f"rows of {arguments.contacts} was refused, each for the reason above",
            file=sys.stderr,
        )
        return 1
    return through_api(
        settings,
        arguments.api,
        lambda client: _create_campaign(client, spec, contacts, refused, source=str(arguments.contacts)),
    )


def _read_contacts(
    path: Path, window: dict[str, Any] | None
) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """The contacts of a CSV file, each with its line, and its refused rows (line, why): read
    and checked here as the API would, a contact whose zone the window cannot tell included,
    so every refusal names its line. A file that is no contact list raises `BadInput`."""
    from pipeline.outbound.contacts import RefusedRow, iter_numbered_contacts, zone_refusal
    from pipeline.outbound.window import Window

    checked_window = Window.model_validate(window) if window is not None else None
    contacts: list[tuple[int, dict[str, Any]]] = []
    refused: list[tuple[int, str]] = []
    with path.open(encoding="utf-8-sig", newline="") as lines:
        for row in iter_numbered_contacts(lines):
            if isinstance(row, RefusedRow):
                refused.append((row.line, row.reason))
                continue
            why = zone_refusal(row.contact, checked_window)
            if why is None:
                contacts.append((row.line, row.contact.model_dump(mode="json", exclude_defaults=True)))
            else:
                refused.append((row.line, why))
    return contacts, refused


def _create_campaign(
    client: Client,
    spec: dict[str, Any],
    contacts: list[tuple[int, dict[str, Any]]],
    refused: list[tuple[int, str]],
    *,
    source: str,
) -> dict[str, Any]:
    """Create the campaign held (paused) with its first page of contacts, send the rest a page at
    a time, then let it dial; the answer lists the rows of `source` refused, by line, and why."""
    from switchboard.client import ApiError

    lines = {str(contact["to"]): line for line, contact in contacts}
    envelope = len(json.dumps({**spec, "contacts": [], "paused": True}).encode())
    pages = _pages([contact for _, contact in contacts], envelope)
    created = client.create_campaign({**spec, "contacts": pages[0], "paused": True})
    campaign_id = str(created["id"])
    added = len(pages[0])
    for page in pages[1:]:
        try:
            answer = client.add_campaign_contacts(campaign_id, page)
        except ApiError:
            print(
                f"switchboard: campaigns create: campaign {campaign_id} was created held (paused) with "
                f"its first {added:,} contacts; the contacts from line {lines[str(page[0]['to'])]} on were "
                f"not taken (below). Add them, then `switchboard campaigns resume {campaign_id}`, or "
                "cancel it",
                file=sys.stderr,
            )
            raise
        added += len(page)
        for row in answer.get("refused", []):
            line = lines.get(str(row.get("to")), row.get("line"))
            refused.append((line, str(row.get("reason"))))
            print(f"{source}:{line}: refused: {row.get('reason')}", file=sys.stderr)
    resumed = client.campaign_verb(campaign_id, "resume")
    return {**resumed, "refused_rows": [{"line": line, "reason": reason} for line, reason in refused]}


def _pages(contacts: list[dict[str, Any]], envelope_bytes: int) -> list[list[dict[str, Any]]]:
    """The contacts cut into pages of at most `CONTACTS_PER_REQUEST`, each of which, placed in a
    body of `envelope_bytes` without contacts, keeps it within `REQUEST_BODY_BYTES` (as the
    client encodes it: `json.dumps`, a comma and a space between items)."""
    pages: list[list[dict[str, Any]]] = [[]]
    size = envelope_bytes
    for contact in contacts:
        length = len(json.dumps(contact).encode()) + len(", ")
        page = pages[-1]
        if page and (len(page) == CONTACTS_PER_REQUEST or size + length > REQUEST_BODY_BYTES):
            pages.append([])
            size = envelope_bytes
        pages[-1].append(contact)
        size += length
    return pages


def _campaign_spec(arguments: argparse.Namespace) -> dict[str, Any]:
    """The campaign's body from the command line (the gateway checks the rest)."""
    session: dict[str, Any] = {"instructions": arguments.instructions, "provider": "live"}
    if arguments.greeting:
        session["greeting"] = {"say": arguments.greeting}
    if arguments.handler:
        session["live"] = {"delegation": arguments.handler}
    spec: dict[str, Any] = {
        "name": arguments.name,
        "session": session,
        "max_concurrent": arguments.max_concurrent,
    }
    if arguments.trunk:
        spec["trunk"] = arguments.trunk
    if arguments.window:
        spec["window"] = _window(arguments.window, arguments.timezone)
    if arguments.retry:
        spec["retry"] = {}
        for rule in arguments.retry:
            outcome, _, terms = rule.partition("=")
            attempts, _, after_s = terms.partition("/")
            spec["retry"][outcome] = {"attempts": int(attempts), "after_s": int(after_s or 3_600)}
    if arguments.voicemail_message:
        spec["voicemail"] = {"action": "leave_message", "message": arguments.voicemail_message}
    return spec


def _window(text: str, timezone: str | None) -> dict[str, Any]:
    """`mon-fri,09:00-20:00` (or `sat,10:00-14:00`) as a window."""
    days_text, _, hours = text.partition(",")
    first, _, last = days_text.partition("-")
    if first not in _DAYS or (last and last not in _DAYS):
        raise ValueError(f"--window {text!r}: days are mon..sun, one or a range (mon-fri)")
    days = list(_DAYS[_DAYS.index(first) : _DAYS.index(last or first) + 1])
    start, _, end = hours.partition("-")
    return {"timezone": timezone, "days": days, "start": start, "end": end}
