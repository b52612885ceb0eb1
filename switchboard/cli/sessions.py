"""`call` and `sessions VERB`: place a call, list sessions, act on a live one through a gateway's
API, or read a session's record, call log or recording from the database."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from pipeline.platform.config import Settings
from switchboard.cli.reach import IN_DATABASE, THROUGH_GATEWAY, Run, api_url, reach_services, through_api

# What the agent of `switchboard call` is told, unless --instructions says otherwise.
CALL_INSTRUCTIONS = "You are the order desk. Answer briefly."

# A follower looks for new entries this often; the log is read from PostgreSQL, not the gateway.
CALL_LOG_POLL_S = 1.0


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`call` and `sessions VERB`."""
    call_summary = (
        "place a call and print its live transcript until it ends (Ctrl-C ends it), "
        f"{THROUGH_GATEWAY}: a session, connected with an SDP offer made up here (the simulator "
        "answers any) or --sdp FILE"
    )
    call = commands.add_parser("call", help=call_summary, description=f"{call_summary}.")
    call.add_argument(
        "--instructions",
        default=CALL_INSTRUCTIONS,
        help=f"the agent's instructions (default: {CALL_INSTRUCTIONS!r})",
    )
    call.add_argument(
        "--sdp",
        type=Path,
        metavar="FILE",
        help="the SDP offer to connect with, a file (default: a placeholder)",
    )
    call.add_argument("--api", help="the gateway's API (default: from the settings)")
    call.set_defaults(run=_call)
    _add_sessions(commands)


def _add_sessions(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`sessions VERB`: one parser per verb, each with only its own arguments."""
    sessions = commands.add_parser(
        "sessions",
        help="list sessions or act on a live call through a gateway's API (end, agent-say, …); a "
        "session's record, call log or recording (show, log, export) from the database",
    )
    verbs = sessions.add_subparsers(dest="action", required=True, metavar="VERB", help="what to do")

    def verb(
        name: str, summary: str, *, through_gateway: bool = True, run: Run = _act_on_session
    ) -> argparse.ArgumentParser:
        where = THROUGH_GATEWAY if through_gateway else IN_DATABASE
        parser = verbs.add_parser(name, help=f"{summary}, {where}", description=f"{summary}, {where}.")
        if name != "list":
            parser.add_argument("session_id", help="the session's id")
        if through_gateway:
            parser.add_argument(
                "--api",
                help="the gateway's API (default: http://SWITCHBOARD_GATEWAY_HOST:SWITCHBOARD_GATEWAY_PORT)",
            )
        parser.set_defaults(run=run)
        return parser

    listing = verb("list", "the deployment's sessions, newest first, a page at a time", run=_list_sessions)
    listing.add_argument("--status", default="", help="only sessions in this status (or live, not_connected)")
    listing.add_argument(
        "--limit", type=int, default=100, help="sessions on the page, 1 to 500 (default 100)"
    )
    listing.add_argument("--cursor", default="", help="the page after the one whose answer said this `next`")
    verb("show", "a session's durable record", through_gateway=False, run=_show_session)
    verb(
        "log", "a session's call log as JSON lines", through_gateway=False, run=_print_call_log
    ).add_argument("--follow", action="store_true", help="keep printing entries until the call ends")
    verb(
        "export", "a session's recording, for `switchboard replay`", through_gateway=False, run=_export
    ).add_argument("--as-case", action="store_true", help="an eval case instead (`switchboard eval run`)")
    verb("end", "end the live call").add_argument(
        "--reason", default="app_ended", help="the reason recorded (default app_ended)"
    )
    for name, summary in (
        ("interrupt", "cut the agent off mid-answer"),
        ("compact", "compact the conversation now (exit 1 when nothing was compacted)"),
        ("hold", "put the caller on hold"),
        ("unhold", "take the caller off hold"),
        ("erase", "erase an ended session's content (admin)"),
    ):
        verb(name, summary)
    for name, summary, text in (
        ("caller-text", "type into the call as the caller", "the caller's words"),
        ("agent-say", "make the agent say these words", "the agent's words"),
        ("agent-reply", "make the agent answer, steered by this", "what steers the answer"),
    ):
        verb(name, summary).add_argument("--text", required=True, help=text)
    attention = verb("attention", "ask for a person to join the call")
    attention.add_argument("--text", required=True, help="the reason")
    attention.add_argument(
        "--wait", type=float, default=60.0, help="seconds to wait for a person (default 60)"
    )
    supervise = verb("supervise", "a supervisor's verb on the call")
    supervise.add_argument(
        "words",
        nargs="+",
        metavar="WORD",
        help="the verb (say, whisper, take_over, release, end, transfer) and its text, reason or target",
    )
    supervise.add_argument("--by", required=True, help="the supervisor's id")
    supervise.add_argument("--name", default="", help="the supervisor's name")
    prompt = verb("prompt", "set (or with an empty --text remove) a block of the agent's prompt")
    prompt.add_argument("words", nargs=1, metavar="NAME", help="the block's name")
    prompt.add_argument("--text", required=True, help="the block's text")
    verb("tools", "change the tools the agent may call").add_argument(
        "words", nargs="*", metavar="TOOL", help="the tools' names (none: no tools)"
    )


def _call(settings: Settings, arguments: argparse.Namespace) -> int:
    """Place a call through a gateway's API and follow it to its end; exit 1 on a refusal (its
    body printed), when no gateway answers, or when the call failed; 130 on a second Ctrl-C."""
    from switchboard.call import place_call
    from switchboard.client import DEMO_SDP_OFFER, ApiError, Client

    api = api_url(settings, arguments.api)
    try:
        sdp = arguments.sdp.read_text() if arguments.sdp else DEMO_SDP_OFFER
    except (OSError, UnicodeDecodeError) as error:
        print(f"switchboard call: --sdp {arguments.sdp}: {error}", file=sys.stderr)
        return 2
    try:
        return place_call(
            Client(api, settings.api_token),
            arguments.instructions,
            sdp=sdp,
            say=lambda line: print(line, flush=True),
        )
    except ApiError as error:
        print(json.dumps(error.body, indent=2), file=sys.stderr)
        return 1
    except OSError as error:
        print(f"switchboard: no gateway answered at {api}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # A second Ctrl-C while the first one's end was on its way: stop waiting.
        return 130


def _list_sessions(settings: Settings, arguments: argparse.Namespace) -> int:
    return through_api(
        settings,
        arguments.api,
        lambda client: client.list_sessions(
            status=arguments.status, limit=arguments.limit, cursor=arguments.cursor
        ),
    )


def _show_session(settings: Settings, arguments: argparse.Namespace) -> int:
    """Print a session's durable record, with its events (exit 1 for an unknown session)."""
    services = reach_services(settings, quiet=True)
    from models.db import connect
    from models.records import session_record
    from pipeline.call.errors import SessionNotFound

    connect(services.database_url)
    try:
        # Read as the database's administrator (whoever has its URL reads every row): any
        # deployment's session, such as the one a replay made in a namespace of its own.
        record = session_record(arguments.session_id, with_events=True)
    except SessionNotFound as error:
        print(f"switchboard sessions show: {error}", file=sys.stderr)
        return 1
    print(json.dumps(record, indent=2, default=str))
    why = record["why"]
    if why is not None:
        # The question people come here with, answered last so it is what they see.
        print(f"\nfailed: {why['code']}: {why['summary']}", file=sys.stderr)
    return 0


def _print_call_log(settings: Settings, arguments: argparse.Namespace) -> int:
    """Print a session's call log as JSON lines; with `--follow`, keep printing new entries until
    `call.ended` (exit 1 for an unknown session)."""
    services = reach_services(settings, quiet=True)
    from models.db import connect
    from models.records import call_log
    from pipeline.call.errors import SessionNotFound

    connect(services.database_url)
    seen = 0
    while True:
        try:
            entries = call_log(arguments.session_id, seen)
        except SessionNotFound as error:
            print(f"switchboard sessions log: {error}", file=sys.stderr)
            return 1
        for entry in entries:
            print(entry.model_dump_json(), flush=True)
            seen = entry.seq
            if entry.kind == "call.ended":
                return 0
        if not arguments.follow:
            return 0
        time.sleep(CALL_LOG_POLL_S)


def _export(settings: Settings, arguments: argparse.Namespace) -> int:
    if arguments.as_case:
        from switchboard.export import run_export_case

        return run_export_case(reach_services(settings, quiet=True), arguments.session_id)
    from switchboard.export import run_export

    return run_export(reach_services(settings, quiet=True), arguments.session_id)


def _act_on_session(settings: Settings, arguments: argparse.Namespace) -> int:
    """End, interrupt, type into or compact a live call through a gateway's API. Exit 1 when
    the gateway refuses (its typed error is printed), and for compact when nothing was
    compacted, so a script can tell."""
    from switchboard.client import ApiError, Client

    api = api_url(settings, arguments.api)
    client = Client(api, settings.api_token)
    session_id = arguments.session_id
    texted = ("caller-text", "agent-say", "agent-reply", "attention")
    if arguments.action in texted and not (arguments.text or "").strip():
        print(f"switchboard: {arguments.action} needs --text", file=sys.stderr)
        return 2
    if arguments.action == "supervise" and not (arguments.by and arguments.words):
        print("switchboard: supervise needs a verb and --by ID", file=sys.stderr)
        return 2
    if arguments.action == "prompt" and (len(arguments.words) != 1 or arguments.text is None):
        print("switchboard: prompt needs the block's name and --text (empty removes it)", file=sys.stderr)
        return 2
    try:
        if arguments.action == "supervise":
            by = {"id": arguments.by, "name": arguments.name}
            result, succeeded = client.supervise(session_id, by, _verb(arguments.words)), True
        elif arguments.action in ("hold", "unhold"):
            result, succeeded = getattr(client, arguments.action)(session_id), True
        elif arguments.action == "attention":
            result, succeeded = client.attention(session_id, arguments.text, arguments.wait), True
        elif arguments.action == "prompt":
            result, succeeded = client.set_prompt(session_id, arguments.words[0], arguments.text), True
        elif arguments.action == "tools":
            result, succeeded = client.set_tools(session_id, arguments.words), True
        elif arguments.action == "compact":
            status, result = client.compact(session_id)
            succeeded = status == 200 and bool(result.get("compacted"))
        elif arguments.action == "caller-text":
            result, succeeded = client.caller_text(session_id, arguments.text), True
        elif arguments.action == "agent-say":
            result, succeeded = client.agent_say(session_id, arguments.text), True
        elif arguments.action == "agent-reply":
            result, succeeded = client.agent_reply(session_id, arguments.text), True
        elif arguments.action == "interrupt":
            result, succeeded = client.interrupt(session_id), True
        elif arguments.action == "erase":
            result, succeeded = client.erase_session(session_id), True
        else:
            result, succeeded = client.end(session_id, arguments.reason), True
    except ApiError as error:
        print(json.dumps(error.body, indent=2), file=sys.stderr)
        return 1
    except OSError as error:
        print(f"switchboard: no gateway answered at {api}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0 if succeeded else 1


def _verb(words: list[str]) -> dict[str, Any]:
    """A supervisor's verb from the command line: `say TEXT`, `whisper TEXT`, `take_over`,
    `release`, `end [REASON]`, `transfer TARGET` (the gateway validates the rest)."""
    kind, rest = words[0], " ".join(words[1:])
    field = {"say": "text", "whisper": "text", "end": "reason", "transfer": "to"}.get(kind)
    return {"type": kind, field: rest} if field and rest else {"type": kind}
