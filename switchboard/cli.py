"""`switchboard`: run the gateway or a worker, the demo, a replay, the benchmarks."""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.platform.config import ConfigError, Settings, settings_from
from pipeline.privacy.sealing import DeploymentKey, SealedValueUnreadable
from switchboard.data_key import PREVIOUS, DataKeyError, deployment_keys
from switchboard.folders import metrics_folder
from switchboard.logs import redact_logs
from switchboard.services import Services, check_reachable, resolve_services
from workers.tools.registry import RegistryError

if TYPE_CHECKING:
    from switchboard.client import Client

ROOT = Path(__file__).resolve().parent.parent
# The commands that start Switchboard's processes (or are one): each stops at start, exit 2,
# when the deployment key is missing or malformed (switchboard.data_key). Not the gateway: it
# seals with each session's public key and holds no secret that opens anything.
STARTS_PROCESSES = {"worker", "demo", "replay", "bench", "eval"}


# What the agent of `switchboard call` is told, unless --instructions says otherwise.
CALL_INSTRUCTIONS = "You are the order desk. Answer briefly."

# Said in each command's help: where the command's answers come from.
THROUGH_GATEWAY = "through a gateway's API"
IN_DATABASE = "in the database"


def build_parser() -> argparse.ArgumentParser:
    """The command line: every command, verb and flag with its help (a test walks it)."""
    parser = argparse.ArgumentParser(prog="switchboard", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('switchboard')}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to run")
    demo = commands.add_parser(
        "demo", help="place a scripted three-turn call through every process (starts its own)"
    )
    demo.add_argument(
        "--phone",
        action="store_true",
        help="a phone call instead: routed, rung through the SIP door, answered",
    )
    demo.add_argument(
        "--provider",
        choices=["realtime", "live"],
        default="realtime",
        help="the provider protocol of the call: OpenAI's Realtime API (the default) or its Live API",
    )
    demo.add_argument(
        "--campaign",
        action="store_true",
        help="a small campaign instead, on the Live API: every outcome, and its table",
    )
    gateway = commands.add_parser(
        "gateway", help="run a gateway process: the API and the calls' sockets (Redis, not the database)"
    )
    gateway.add_argument(
        "--port", type=int, help="the API's port (default SWITCHBOARD_GATEWAY_PORT; 0: any free port)"
    )
    worker = commands.add_parser(
        "worker", help="run a worker process (all queues): the calls' decisions, in the database and Redis"
    )
    worker.add_argument(
        "--threads", type=int, help="messages handled at once (default SWITCHBOARD_WORKER_THREADS)"
    )
    worker.add_argument("--queues", help="comma-separated queues to consume (default: all)")
    commands.add_parser("migrate", help=f"apply the schema's migrations {IN_DATABASE}")
    replay = commands.add_parser(
        "replay", help="push a recorded call through the real pipeline (starts its own)"
    )
    replay.add_argument("file", type=Path, help="the recording, JSON lines (from `sessions export`)")
    replay.add_argument("--json", action="store_true", help="print controls and a summary as JSON lines")
    replay.add_argument("--speed", type=float, default=1.0, help="playback speed (1 = recorded timing)")
    replay.add_argument(
        "--provider-log", type=Path, help="also write the simulator's log of the call (events, controls)"
    )
    replay.add_argument(
        "--open-loop",
        action="store_true",
        help='play on the recorded clock whatever the host sends (as a header saying "host": "other" does)',
    )
    replay.add_argument(
        "--gate-timeout",
        type=float,
        default=60.0,
        help="closed loop: seconds to wait for the host's control before the replay fails (60)",
    )
    evals = commands.add_parser(
        "eval",
        help=f"run eval cases on fresh sessions: on a simulator it starts, or {THROUGH_GATEWAY} (--gateway)",
    )
    evals.add_argument("action", choices=["run"], help="what to do")
    evals.add_argument("path", type=Path, help="a case file, or a folder of them (*.json)")
    evals.add_argument("--repeat", type=int, default=1, help="run each case N times and report pass rates")
    evals.add_argument("--junit", type=Path, help="also write JUnit XML to this file")
    evals.add_argument(
        "--typed", action="store_true", help="type the caller's lines (the simulator speaks them)"
    )
    evals.add_argument(
        "--gateway",
        help="run against this gateway's API (its provider; the lines are typed) instead of a simulator",
    )
    evals.add_argument("--judge-model", help="the judge model (default gpt-4.1-mini with --gateway)")
    evals.add_argument("--judge-base-url", help="an OpenAI-compatible endpoint for the judge")
    bench = commands.add_parser(
        "bench", help="benchmarks: latency and capacity in one run, or either (starts its own)"
    )
    bench.add_argument(
        "which",
        nargs="?",
        choices=["all", "latency", "capacity"],
        default="all",
        help="which benchmark (default: all)",
    )
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.add_argument("--save", type=Path, help="all: also write the figures as JSON to this file")
    bench.add_argument("--calls", type=int, default=50, help="latency: concurrent calls under load")
    bench.add_argument(
        "--max-calls", type=int, default=800, help="capacity: the highest level of concurrent calls to try"
    )
    bench.add_argument(
        "--levels",
        type=lambda text: tuple(int(part) for part in text.split(",")),
        help="capacity: only these levels of concurrent calls, e.g. 50,100,200 (no scaling or held calls)",
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="latency: only the floor, idle event → control, idle tool turnaround and the peer",
    )
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
    _add_sessions(commands)
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
    callers = commands.add_parser(
        "callers",
        help=f"erase every ended session of a caller's (or callee's) phone number (admin), {THROUGH_GATEWAY}",
    )
    callers.add_argument("action", choices=["erase"], help="what to do")
    callers.add_argument("number", help="the number, E.164: +14155550123")
    callers.add_argument("--api", help="the gateway's API (default: from the settings)")
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
    suppressions = commands.add_parser(
        "suppressions",
        help=f"numbers never to dial: add, list or remove one (remove: admin), {THROUGH_GATEWAY}",
    )
    suppressions.add_argument("action", choices=["add", "list", "remove"], help="what to do")
    suppressions.add_argument("number", nargs="?", help="add, remove: the number, E.164")
    suppressions.add_argument("--reason", default="", help="add: why (kept with the number)")
    suppressions.add_argument("--cursor", default="", help="list: the `next` of the page before")
    suppressions.add_argument("--api", help="the gateway's API (default: from the settings)")
    keys = commands.add_parser(
        "keys", help=f"API keys with roles: add (the key is shown once), list, revoke, {IN_DATABASE}"
    )
    keys.add_argument("action", choices=["add", "list", "revoke"], help="what to do")
    keys.add_argument("target", nargs="?", help="add: the key's name (a person, an app); revoke: the key id")
    keys.add_argument(
        "--role", choices=["app", "supervisor", "viewer", "admin"], help="add: what the key may do"
    )
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
    dlq = commands.add_parser("dlq", help=f"dead letters: list, show, replay or purge them, {IN_DATABASE}")
    dlq.add_argument("action", choices=["list", "show", "replay", "purge"], help="what to do")
    dlq.add_argument("ids", nargs="*", help="message ids (a unique prefix is enough)")
    dlq.add_argument("--all", action="store_true", help="replay or purge every dead letter")
    dlq.add_argument("--json", action="store_true", help="print as JSON")
    return parser


def _add_sessions(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`sessions VERB`: one parser per verb, each with only its own arguments."""
    sessions = commands.add_parser(
        "sessions",
        help="list sessions or act on a live call through a gateway's API (end, agent-say, …); a "
        "session's record, call log or recording (show, log, export) from the database",
    )
    verbs = sessions.add_subparsers(dest="action", required=True, metavar="VERB", help="what to do")

    def verb(name: str, summary: str, *, through_gateway: bool = True) -> argparse.ArgumentParser:
        where = THROUGH_GATEWAY if through_gateway else IN_DATABASE
        parser = verbs.add_parser(name, help=f"{summary}, {where}", description=f"{summary}, {where}.")
        if name != "list":
            parser.add_argument("session_id", help="the session's id")
        if through_gateway:
            parser.add_argument(
                "--api",
                help="the gateway's API (default: http://SWITCHBOARD_GATEWAY_HOST:SWITCHBOARD_GATEWAY_PORT)",
            )
        return parser

    listing = verb("list", "the deployment's sessions, newest first, a page at a time")
    listing.add_argument("--status", default="", help="only sessions in this status (or live, not_connected)")
    listing.add_argument(
        "--limit", type=int, default=100, help="sessions on the page, 1 to 500 (default 100)"
    )
    listing.add_argument("--cursor", default="", help="the page after the one whose answer said this `next`")
    verb("show", "a session's durable record", through_gateway=False)
    verb("log", "a session's call log as JSON lines", through_gateway=False).add_argument(
        "--follow", action="store_true", help="keep printing entries until the call ends"
    )
    verb("export", "a session's recording, for `switchboard replay`", through_gateway=False).add_argument(
        "--as-case", action="store_true", help="an eval case instead (`switchboard eval run`)"
    )
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


def main(argv: list[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    # Tool and delegation modules (SWITCHBOARD_TOOL_MODULES) are named as from the working
    # directory, as `python -m switchboard` finds them; the `switchboard` script's path starts
    # at its own folder, so a checkout's `tests.tools.weather_tools` or a `mytools.py` beside the
    # .env was "no tool module". Last, so nothing there hides an installed package.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())

    try:
        settings = settings_from(os.environ)
    except ConfigError as error:
        print(f"switchboard: {error}", file=sys.stderr)
        return 2
    if arguments.command in STARTS_PROCESSES or arguments.command == "data-keys":
        if arguments.command == "data-keys" and arguments.action == "new":
            print(DeploymentKey.generate().text)
            return 0
        try:
            in_effect = deployment_keys(
                os.environ,
                embedded=settings.database_url is None,
                state_dir=settings.data_dir,
                log=lambda message: print(f"switchboard: {message}", flush=True),
            )
        except (DataKeyError, ConfigError) as error:
            print(f"switchboard: {error}", file=sys.stderr)
            return 2
        # The processes this one starts (the demo's, a replay's, a benchmark's) use the same key.
        os.environ.setdefault("SWITCHBOARD_DATA_KEY", in_effect[0].text)
        if arguments.command == "data-keys" and arguments.action == "check":
            print(json.dumps({"key_ids": [key.key_id for key in in_effect]}))
            return 0
        if arguments.command == "data-keys":
            return _rotate_data_keys(settings, in_effect, every_namespace=arguments.every_namespace)
    _ctrl_c_interrupts()
    try:
        return _run(settings, arguments)
    except ConfigError as error:
        # A URL that names nothing reachable, found by the first connection (`_services`).
        print(f"switchboard: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C: what the command started is stopped on the way out (a stack ends its calls);
        # the shell's convention for an interrupted command.
        print("switchboard: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went (`campaigns show … | head`): nothing more to say, and nothing to say it
        # to; stdout goes to /dev/null so the interpreter's flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except RegistryError as error:
        # A tool or delegation module that will not import, or declares its tools wrongly.
        print(
            f"switchboard: {error} (SWITCHBOARD_TOOL_MODULES / SWITCHBOARD_DELEGATION_MODULES)",
            file=sys.stderr,
        )
        return 2


def _run(settings: Settings, arguments: argparse.Namespace) -> int:
    """Run the command parsed from the command line with the settings (checked by now)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    redact_logs()  # a caller's card number, SSN, e-mail, phone or IBAN never in the clear
    # pgserver narrates initdb and every start at INFO; Switchboard says what it started itself.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    if arguments.command == "gateway":
        return run_gateway(settings, arguments.port)
    if arguments.command == "worker":
        queues = set(arguments.queues.split(",")) if arguments.queues else None
        return run_worker(settings, arguments.threads, queues)
    if arguments.command == "migrate":
        services = _services(settings)
        print(f"applied: {', '.join(_migrate(services)) or 'nothing new'}")
        return 0
    if arguments.command == "demo":
        from switchboard.demo import run_demo

        return run_demo(
            settings, phone=arguments.phone, provider=arguments.provider, campaign=arguments.campaign
        )
    if arguments.command == "replay":
        from switchboard.replay import run_replay

        return run_replay(
            settings,
            arguments.file,
            as_json=arguments.json,
            speed=arguments.speed,
            provider_log=arguments.provider_log,
            closed_loop=not arguments.open_loop,
            gate_timeout_s=arguments.gate_timeout,
        )
    if arguments.command == "eval":
        from switchboard.evals import run_evals

        return run_evals(
            settings,
            arguments.path,
            repeat=arguments.repeat,
            junit=arguments.junit,
            typed=arguments.typed,
            gateway=arguments.gateway,
            judge_model=arguments.judge_model,
            judge_base_url=arguments.judge_base_url,
        )
    if arguments.command == "bench" and arguments.which == "all":
        from bench.everything import run_everything

        return run_everything(
            settings,
            as_json=arguments.json,
            load_calls=arguments.calls,
            max_calls=arguments.max_calls,
            save=arguments.save,
        )
    if arguments.command == "bench" and arguments.which == "capacity":
        from bench.capacity import run_capacity_bench

        return run_capacity_bench(
            settings, as_json=arguments.json, max_calls=arguments.max_calls, levels=arguments.levels
        )
    if arguments.command == "bench":
        from bench.latency import run_latency_bench

        return run_latency_bench(
            settings, as_json=arguments.json, load_calls=arguments.calls, quick=arguments.quick
        )
    if arguments.command == "call":
        return _call(settings, arguments)
    if arguments.command == "routes":
        return _routes(settings, arguments)
    if arguments.command == "keys":
        return _keys(settings, arguments)
    if arguments.command == "callers":
        return _callers(settings, arguments)
    if arguments.command == "trunks":
        return _trunks(settings, arguments)
    if arguments.command == "suppressions":
        return _suppressions(settings, arguments)
    if arguments.command == "campaigns":
        return _campaigns(settings, arguments)
    if arguments.command == "dlq":
        from switchboard.dlq import run_dlq

        services = _services(settings, quiet=True)
        return run_dlq(
            settings, services, arguments.action, arguments.ids, every=arguments.all, as_json=arguments.json
        )
    if arguments.command == "sessions" and arguments.action == "list":
        return _through_api(
            settings,
            arguments.api,
            lambda client: client.list_sessions(
                status=arguments.status, limit=arguments.limit, cursor=arguments.cursor
            ),
        )
    if arguments.command == "sessions" and arguments.action == "log":
        return _print_call_log(_services(settings, quiet=True), arguments.session_id, follow=arguments.follow)
    if arguments.command == "sessions" and arguments.action == "export" and arguments.as_case:
        from switchboard.export import run_export_case

        return run_export_case(_services(settings, quiet=True), arguments.session_id)
    if arguments.command == "sessions" and arguments.action == "export":
        from switchboard.export import run_export

        return run_export(_services(settings, quiet=True), arguments.session_id)
    if arguments.command == "sessions" and arguments.action != "show":
        return _act_on_session(settings, arguments)
    if arguments.command == "sessions":
        services = _services(settings, quiet=True)
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
    return 2


# A follower looks for new entries this often; the log is read from PostgreSQL, not the gateway.
CALL_LOG_POLL_S = 1.0


def _print_call_log(services: Services, session_id: str, *, follow: bool) -> int:
    """Print a session's call log as JSON lines; with `follow`, keep printing new entries until
    `call.ended` (exit 1 for an unknown session)."""
    from models.db import connect
    from models.records import call_log
    from pipeline.call.errors import SessionNotFound

    connect(services.database_url)
    seen = 0
    while True:
        try:
            entries = call_log(session_id, seen)
        except SessionNotFound as error:
            print(f"switchboard sessions log: {error}", file=sys.stderr)
            return 1
        for entry in entries:
            print(entry.model_dump_json(), flush=True)
            seen = entry.seq
            if entry.kind == "call.ended":
                return 0
        if not follow:
            return 0
        time.sleep(CALL_LOG_POLL_S)


def _act_on_session(settings: Settings, arguments: argparse.Namespace) -> int:
    """End, interrupt, type into or compact a live call through a gateway's API. Exit 1 when
    the gateway refuses (its typed error is printed), and for compact when nothing was
    compacted, so a script can tell."""
    from switchboard.client import ApiError, Client

    api = arguments.api or f"http://{settings.gateway_host}:{settings.gateway_port}"
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


def _keys(settings: Settings, arguments: argparse.Namespace) -> int:
    """API keys, in the deployment's database (the first admin key needs no key to make)."""
    from models import keys
    from models.db import connect
    from pipeline.api.roles import Role
    from pipeline.call.errors import KeyNotFound

    services = _services(settings, quiet=True)
    connect(services.database_url)
    _migrate(services)
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


def _rotate_data_keys(settings: Settings, keys: tuple[DeploymentKey, ...], *, every_namespace: bool) -> int:
    """Re-wrap the sessions' keys under the current deployment key; print how many as JSON.
    Exit 2 when a session's key is under a deployment key not given (set it as the previous)."""
    from models import data_keys, outbound
    from models.db import connect

    services = _services(settings, quiet=True)
    try:
        connect(services.database_url)
        _migrate(services)
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


def _through_api(settings: Settings, api_url: str | None, work: Callable[[Client], Any]) -> int:
    """Ask a gateway's API with the deployment's token and print the JSON answer; exit 1 on a
    refusal (its body printed) or when no gateway answers."""
    from switchboard.client import ApiError, Client

    api = api_url or f"http://{settings.gateway_host}:{settings.gateway_port}"
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


def _call(settings: Settings, arguments: argparse.Namespace) -> int:
    """Place a call through a gateway's API and follow it to its end; exit 1 on a refusal (its
    body printed), when no gateway answers, or when the call failed; 130 on a second Ctrl-C."""
    from switchboard.call import place_call
    from switchboard.client import DEMO_SDP_OFFER, ApiError, Client

    api = arguments.api or f"http://{settings.gateway_host}:{settings.gateway_port}"
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


def _trunks(settings: Settings, arguments: argparse.Namespace) -> int:
    """Add, list or remove SIP trunks through a gateway's API."""
    if arguments.action == "list":
        return _through_api(settings, arguments.api, lambda client: client.trunks())
    if not arguments.name:
        print(f"switchboard: trunks {arguments.action} needs the trunk's name", file=sys.stderr)
        return 2
    if arguments.action == "remove":
        return _through_api(settings, arguments.api, lambda client: client.remove_trunk(arguments.name))
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
    return _through_api(settings, arguments.api, lambda client: client.add_trunk(trunk))


def _suppressions(settings: Settings, arguments: argparse.Namespace) -> int:
    """Add, list or remove numbers never to dial through a gateway's API."""
    if arguments.action == "list":
        return _through_api(
            settings, arguments.api, lambda client: client.suppressions(cursor=arguments.cursor)
        )
    if not arguments.number:
        print(f"switchboard: suppressions {arguments.action} needs the number", file=sys.stderr)
        return 2
    if arguments.action == "remove":
        return _through_api(settings, arguments.api, lambda client: client.unsuppress(arguments.number))
    return _through_api(
        settings, arguments.api, lambda client: client.suppress(arguments.number, arguments.reason)
    )


# A campaign's contacts go to the API as JSON pages: the first with its creation, the rest with
# `POST /v1/campaigns/{id}/contacts`. A page holds at most the 1,000 contacts a JSON body takes,
# and is cut by its bytes too: a row may carry 20 vars of 200 characters (kilobytes of JSON), so
# a thousand long rows would pass the API's body bound (gateway.web.HttpLimits) and be refused
# whole with 413.
CONTACTS_PER_REQUEST = 1_000
REQUEST_BODY_BYTES = 1024 * 1024
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _campaigns(settings: Settings, arguments: argparse.Namespace) -> int:
    """Create (paging a CSV's contacts in), list, show, pause, resume or cancel campaigns."""
    if arguments.action == "list":
        return _through_api(settings, arguments.api, lambda client: client.campaigns())
    if arguments.action != "create":
        if not arguments.campaign:
            print(f"switchboard: campaigns {arguments.action} needs the campaign's id", file=sys.stderr)
            return 2
        if arguments.action == "show":
            return _through_api(settings, arguments.api, lambda client: client.campaign(arguments.campaign))
        return _through_api(
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
    return _through_api(
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


def _routes(settings: Settings, arguments: argparse.Namespace) -> int:
    """Add, list or remove routes through a gateway's API; exit 1 on a refusal."""
    if arguments.action == "list":
        return _through_api(settings, arguments.api, lambda client: client.routes())
    if arguments.action == "remove":
        if not arguments.target:
            print("switchboard: routes remove needs the route id", file=sys.stderr)
            return 2
        return _through_api(settings, arguments.api, lambda client: client.remove_route(arguments.target))
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
    return _through_api(
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

    status = _through_api(settings, arguments.api, erase)
    return 1 if status or any(skipped) else 0


def _verb(words: list[str]) -> dict[str, Any]:
    """A supervisor's verb from the command line: `say TEXT`, `whisper TEXT`, `take_over`,
    `release`, `end [REASON]`, `transfer TARGET` (the gateway validates the rest)."""
    kind, rest = words[0], " ".join(words[1:])
    field = {"say": "text", "whisper": "text", "end": "reason", "transfer": "to"}.get(kind)
    return {"type": kind, field: rest} if field and rest else {"type": kind}


def _services(settings: Settings, *, quiet: bool = False, database: bool = True) -> Services:
    """Find or start the services, then reach them once: one that does not answer is a
    `ConfigError` naming its variable (exit 2) before anything else starts."""
    log = (lambda _message: None) if quiet else (lambda message: print(f"switchboard: {message}", flush=True))
    services = resolve_services(settings.database_url, settings.redis_url, settings.data_dir, log=log)
    check_reachable(services, database=database)
    return services


def _migrate(services: Services) -> list[str]:
    from models.db import connect
    from models.migrate import migrate

    return migrate(connect(services.database_url))


def _ctrl_c_interrupts() -> None:
    """Ctrl-C raises KeyboardInterrupt, whatever the process inherited: a shell without job
    control starts a background command with SIGINT ignored, and Python then installs no
    handler, so a demo started that way and interrupted left its stack and its call up."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT,))


def _wait_for_signal() -> None:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()


def run_worker(settings: Settings, threads: int | None, queues: set[str] | None = None) -> int:
    from models.db import database_answers
    from switchboard.observability import init_sentry
    from switchboard.tracing import init_tracing
    from workers import metrics, runtime, tracing
    from workers.health import WorkerHealth
    from workers.redis_watch import ConsumerRetries, RedisWatch

    # Before any server is reached: a folder it cannot write is one line at start, not a
    # traceback once it runs (and a restart into the same).
    counted_in = metrics_folder(settings) if settings.metrics else None
    services = _services(settings)
    init_sentry(settings, "worker")
    traced = init_tracing("worker")
    if traced is not None:
        tracing.use(traced.get_tracer("switchboard.worker"))
    _migrate(services)
    if counted_in is not None:
        metrics.use_directory(counted_in)
    rt = runtime.configure(settings, services.database_url, services.redis_url)
    if settings.metrics:
        metrics.count_messages(rt.broker)
    import workers.actors  # noqa: F401  (declares the actors on the configured broker)

    declared = rt.broker.get_declared_queues()
    unknown = (queues or set()) - declared
    if unknown:
        print(
            f"switchboard worker: unknown queues {sorted(unknown)}; known: {sorted(declared)}",
            file=sys.stderr,
        )
        return 2
    worker = runtime.start_worker(rt.broker, queues=queues, threads=threads or settings.worker_threads)
    # Redis going away is said once, and its return once, instead of Dramatiq's line per retry.
    for handler in logging.getLogger().handlers:
        handler.addFilter(ConsumerRetries())
    watch = RedisWatch(services.redis_url)
    watch.start()
    served = ""
    if settings.metrics:
        port = metrics.serve(settings.worker_metrics_host, settings.worker_metrics_port)
        # None: the machine's port is another worker's, which serves this one's metrics too.
        served = f" metrics={port}" if port is not None else " metrics=elsewhere"
    health = WorkerHealth(lambda: watch.is_reachable, database_answers)
    if settings.worker_health_port is not None:
        served += f" health={health.serve(settings.worker_health_host, settings.worker_health_port)}"
    print(f"worker ready pid={os.getpid()} queues={','.join(sorted(queues or declared))}{served}", flush=True)
    _wait_for_signal()
    # Not ready from now on; Dramatiq's stop waits for the messages the worker holds.
    health.drain()
    print("worker draining: finishing the messages it holds", flush=True)
    worker.stop()
    watch.stop()
    health.stop()
    if settings.metrics:
        metrics.process_exited()
    rt.broker.close()
    return 0


def _gateway_id_taken(redis_url: str, settings: Settings) -> bool:
    from gateway.liveness import held_elsewhere
    from gateway.redis_clients import redis_client

    client = redis_client(redis_url)
    try:
        return held_elsewhere(client, settings.broker_namespace, settings.gateway_id)
    finally:
        client.close()


def run_gateway(settings: Settings, port: int | None) -> int:
    from gateway import tracing
    from gateway.app import Gateway
    from gateway.liveness import GatewayIdTaken
    from gateway.providers.realtime import provider_from
    from pipeline.api.roles import DEVELOPMENT_TOKEN, is_loopback
    from switchboard.observability import init_sentry
    from switchboard.tracing import init_tracing
    from workers.broker import make_broker

    if settings.api_token == DEVELOPMENT_TOKEN and not is_loopback(settings.gateway_host):
        # Anyone who can reach the address would hold the deployment's admin token.
        print(
            f"switchboard: refusing to listen on {settings.gateway_host} with the development API token;"
            " set SWITCHBOARD_API_TOKEN (and make keys: switchboard keys add)",
            file=sys.stderr,
        )
        return 2
    # The gateway talks to Redis only; the workers hold the database.
    services = _services(settings, database=False)
    init_sentry(settings, "gateway")
    traced = init_tracing("gateway")
    if traced is not None:
        tracing.use(traced.get_tracer("switchboard.gateway"), with_content=settings.trace_content)
    overrides: dict[str, Any] = {}
    if port is not None:
        overrides["gateway_port"] = port
    settings = settings.model_copy(update=overrides)
    broker = make_broker(
        services.redis_url, namespace=settings.broker_namespace, consumer=settings.broker_consumer
    )

    async def serve() -> None:
        # Before anything writes under the id: a second gateway under a running one's id would
        # overwrite its restart marker and share its control queue.
        if await asyncio.to_thread(_gateway_id_taken, services.redis_url, settings):
            raise GatewayIdTaken(
                f"a gateway with id {settings.gateway_id!r} is running in this deployment"
                f" ({settings.broker_namespace!r}): give this one another SWITCHBOARD_GATEWAY_ID"
            )
        gateway = Gateway(settings, services.redis_url, broker, provider_from(settings))
        try:
            await gateway.start()
        except BaseException:
            await gateway.stop()
            raise
        print(
            f"gateway ready id={gateway.gateway_id} http={gateway.http_port} provider={settings.provider}",
            flush=True,
        )
        signals: asyncio.Queue[int] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, signals.put_nowait, signum)
        await signals.get()
        # The first signal drains (no new calls; the calls held here move to a peer); a second
        # one, or the drain's deadline, stops the gateway as it is.
        draining = asyncio.ensure_future(gateway.drain(settings.drain_seconds))
        again = asyncio.ensure_future(signals.get())
        await asyncio.wait({draining, again}, return_when=asyncio.FIRST_COMPLETED)
        again.cancel()
        draining.cancel()
        await gateway.stop()

    try:
        asyncio.run(serve())
    except GatewayIdTaken as taken:
        print(f"switchboard gateway: {taken}", file=sys.stderr)
        return 2
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        print(
            f"switchboard gateway: {settings.gateway_host}:{settings.gateway_port} is in use (another"
            " gateway?): give this one another port (--port or SWITCHBOARD_GATEWAY_PORT)",
            file=sys.stderr,
        )
        return 2
    return 0
