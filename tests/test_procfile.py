"""The Procfile runs from a fresh clone: with or without an activated virtualenv, on the ports
the README names, and with a consumer for every queue."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from pipeline.platform.names import QUEUES
from simulator.script import load_script

ROOT = Path(__file__).resolve().parent.parent


def _processes() -> dict[str, str]:
    """Each process type's command line."""
    lines = (ROOT / "Procfile").read_text().splitlines()
    return {
        name.strip(): command.strip()
        for name, _, command in (line.partition(":") for line in lines if line and not line.startswith("#"))
    }


def test_every_process_runs_the_checkout_s_virtualenv() -> None:
    """Bare `python` was the system's without an activated virtualenv: every command names
    .venv's, which the Makefile makes."""
    commands = _processes()
    assert commands and all(" .venv/bin/python -m " in f" {command}" for command in commands.values())


def test_every_queue_has_a_consumer() -> None:
    """A queue no process consumes (event_streams once) is work that never happens."""
    consumed: set[str] = set()
    for command in _processes().values():
        words = shlex.split(command)
        if "worker" in words:
            flagged = words[words.index("--queues") + 1] if "--queues" in words else ",".join(QUEUES)
            consumed |= set(flagged.split(","))
    assert consumed == set(QUEUES)


def test_gateways_listen_on_the_readme_s_port_and_the_ones_after_it() -> None:
    """honcho gives each instance a PORT from its type's base (5100, 5101 …): the first gateway
    still listens on 8700, the README's, and so does one started without honcho."""
    command = _processes()["gateway"]
    port = command.partition("--port ")[2]
    ports = [
        subprocess.run(
            ["sh", "-c", f"echo {port}"], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        for env in ({"PORT": "5100"}, {"PORT": "5101"}, {"PORT": "6102"}, {})
    ]
    assert ports == ["8700", "8701", "8702", "8700"]
    assert "8700" in (ROOT / "README.md").read_text()


def test_the_simulator_plays_a_call_that_stays_up() -> None:
    """The README ends the call it started by hand: the caller must not hang up first."""
    (script,) = re.findall(r"--script (\S+)", _processes()["simulator"])
    assert not any(getattr(step, "hangup", False) for step in load_script(script).caller)
