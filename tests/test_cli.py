"""The command line explains itself: every command, verb, argument and flag has help, each
command that reaches a deployment says whether it goes through a gateway or to the database,
and `--version` is the package's."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version

import pytest

from switchboard.cli import build_parser
from switchboard.cli.reach import IN_DATABASE, ON_THIS_MACHINE, THROUGH_GATEWAY

# The commands that start processes of their own (or are one) rather than reach a deployment.
STARTS_PROCESSES = {"demo", "gateway", "worker", "replay", "bench"}


def _commands(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser under `parser`, with its path (`switchboard sessions list`)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, f"{path} {name}")


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    """The one-line help of each command (or verb) directly under `parser`."""
    return {
        choice.dest: choice.help
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in action._choices_actions
    }


def test_every_command_and_flag_has_help() -> None:
    """A command, verb, argument or flag added without help fails here."""
    missing = []
    for path, parser in _commands(build_parser(), "switchboard"):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        missing += [f"{path} {name}" for name, summary in _summaries(parser).items() if not summary]
    assert missing == []


def test_each_command_says_where_it_goes() -> None:
    """A command (or sessions verb) says where it reads: a gateway's API, the database, or
    only this machine's settings."""
    parser = build_parser()
    sessions = dict(_commands(parser, "switchboard"))["switchboard sessions"]
    summaries = {
        **{name: summary for name, summary in _summaries(parser).items() if name not in STARTS_PROCESSES},
        **{f"sessions {name}": summary for name, summary in _summaries(sessions).items()},
    }
    silent = [
        name
        for name, summary in summaries.items()
        if not any(where in (summary or "") for where in (THROUGH_GATEWAY, IN_DATABASE, ON_THIS_MACHINE))
    ]
    assert len(summaries) > 20 and silent == []


def test_version_is_the_package_s() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "switchboard", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0 and finished.stdout.strip() == f"switchboard {version('switchboard')}"


def test_a_sessions_verb_takes_only_its_own_flags() -> None:
    """`sessions agent-say` needs --text; `sessions show` refuses a flag of another verb's."""
    parser = build_parser()
    said = parser.parse_args(["sessions", "agent-say", "sess_1", "--text", "hello"])
    assert (said.action, said.session_id, said.text) == ("agent-say", "sess_1", "hello")
    for refused in (["sessions", "agent-say", "sess_1"], ["sessions", "show", "sess_1", "--follow"]):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args(refused)
        assert exited.value.code == 2


def test_a_campaign_s_contacts_are_paged_to_fit_the_api_s_body_bound() -> None:
    """Short rows go a thousand to a page; long rows (nine vars of 190 characters) as many as
    fit in 1 MiB with the campaign's own body around them; every contact once, in order."""
    from switchboard.cli.outbound import CONTACTS_PER_REQUEST, REQUEST_BODY_BYTES, _pages

    spec = {"name": "n", "session": {"instructions": "x" * 30_000, "provider": "live"}}
    envelope = len(json.dumps({**spec, "contacts": [], "paused": True}).encode())
    short = [{"to": f"+1212{2_000_000 + index}"} for index in range(2_500)]
    assert [len(page) for page in _pages(short, envelope)] == [CONTACTS_PER_REQUEST] * 2 + [500]
    long_values = {f"v{index}": "é" * 190 for index in range(9)}
    long = [{"to": f"+1212{2_000_000 + index}", "vars": long_values} for index in range(1_500)]
    pages = _pages(long, envelope)
    assert len(pages) > 2 and [contact for page in pages for contact in page] == long
    for page in pages:
        body = json.dumps({**spec, "contacts": page, "paused": True}).encode()
        assert len(body) <= REQUEST_BODY_BYTES
