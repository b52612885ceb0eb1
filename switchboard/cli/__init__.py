"""`switchboard`: run the gateway or a worker, the demo, a replay, the benchmarks."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from importlib.metadata import version

from pipeline.platform.config import ConfigError, Settings, settings_from
from pipeline.privacy.sealing import DeploymentKey
from switchboard.cli import agents, dead_letters, keys, models, numbers, outbound, processes, sessions
from switchboard.cli.reach import Run
from switchboard.data_key import DataKeyError, deployment_keys
from switchboard.logs import redact_logs
from workers.tools.registry import RegistryError

# The commands that start Switchboard's processes (or are one): each stops at start, exit 2,
# when the deployment key is missing or malformed (switchboard.data_key). Not the gateway: it
# seals with each session's public key and holds no secret that opens anything.
STARTS_PROCESSES = {"worker", "demo", "replay", "bench", "eval"}


def build_parser() -> argparse.ArgumentParser:
    """The command line: every command, verb and flag with its help (a test walks it); each
    command's parser says what it runs (`run`)."""
    parser = argparse.ArgumentParser(prog="switchboard", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('switchboard')}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to run")
    # In the order `switchboard --help` lists them.
    processes.add_commands(commands)
    sessions.add_commands(commands)
    numbers.add_commands(commands)
    outbound.add_commands(commands)
    agents.add_commands(commands)
    keys.add_commands(commands)
    dead_letters.add_commands(commands)
    models.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: the process's); its exit status."""
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
            return keys.rotate_data_keys(settings, in_effect, every_namespace=arguments.every_namespace)
    _ctrl_c_interrupts()
    try:
        return _run(settings, arguments)
    except ConfigError as error:
        # A URL that names nothing reachable, found by the first connection (`reach_services`).
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
    run: Run = arguments.run
    return run(settings, arguments)


def _ctrl_c_interrupts() -> None:
    """Ctrl-C raises KeyboardInterrupt, whatever the process inherited: a shell without job
    control starts a background command with SIGINT ignored, and Python then installs no
    handler, so a demo started that way and interrupted left its stack and its call up."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT,))
