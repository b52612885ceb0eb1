"""A new user's first hour (issue 44): what goes wrong is said in one line, not a traceback, and
a mistake is refused rather than answered as if nothing were wrong."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime

import pytest

from models.db import connect
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS
from tests.support.waiting import wait_for


def _gateway(stack: Stack, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", "gateway", "--port", env.pop("port", "0")],
        env={**stack.env, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_gateway_on_a_port_in_use_says_so_in_one_line(stack: Stack) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = _gateway(stack, port=str(port), SWITCHBOARD_GATEWAY_ID=f"{stack.gateway_id}-second")
    assert started.returncode == 2
    assert "Traceback" not in started.stderr
    assert f"127.0.0.1:{port} is in use" in started.stderr.strip().splitlines()[-1]


def test_a_second_gateway_under_a_running_gateways_id_is_refused(stack: Stack) -> None:
    """It would share the running gateway's control queue and its event numbering (the running
    one logged that Redis had lost its data): it stops at start, and the running one goes on."""
    assert stack.gateway is not None
    before = len(stack.gateway.lines)
    started = _gateway(stack, SWITCHBOARD_GATEWAY_ID=stack.gateway_id)
    assert started.returncode == 2, started.stderr[-2000:]
    assert "Traceback" not in started.stderr
    assert f"a gateway with id {stack.gateway_id!r} is running" in started.stderr
    client = Client(stack.api_url, stack.api_token)
    assert client.request("GET", "/healthz")[0] == 200
    session = client.create_session("Still here.")
    assert client.session(session["id"])["status"] == "created"
    time.sleep(1.0)
    assert not [line for line in stack.gateway.lines[before:] if "lost its data" in line]


def test_a_status_filter_nobody_has_is_refused_not_answered_empty(stack: Stack) -> None:
    client = Client(stack.api_url, stack.api_token)
    status, answer = client.request("GET", "/v1/sessions?status=bogus")
    assert (status, answer["error"]["code"]) == (422, "malformed_request")
    assert "listening" in answer["error"]["message"]
    assert client.request("GET", "/v1/sessions?status=live")[0] == 200


def test_a_campaign_outside_its_window_says_it_waits_for_it(stack: Stack) -> None:
    """Not `running` and nothing more: a contact centre reading that wonders why nobody is rung."""
    client = Client(stack.api_url, stack.api_token)
    client.request(
        "POST",
        "/v1/trunks",
        {
            "name": "first-hour",
            "url": "sips:sip.example.com",
            "username": "acme",
            "password": "any-on-the-simulator",
            "caller_number": "+12125550100",
        },
    )
    # Open only on the day after tomorrow: closed now on every contact's clock.
    day = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[(datetime.now(UTC).weekday() + 2) % 7]
    created = client.create_campaign(
        {
            "name": "reminders after hours",
            "session": {"instructions": "Remind them.", "provider": "live"},
            "trunk": "first-hour",
            "contacts": [{"to": "+14155550124"}],
            "window": {"days": [day], "start": "09:00", "end": "17:00"},
        }
    )
    shown = wait_for(
        lambda: (c := client.campaign(created["id"]))["status"] == "running" and c,
        "the campaign's first tick",
    )
    assert shown["activity"] == "waiting for its window"
    listed = [c for c in client.campaigns()["campaigns"] if c["id"] == created["id"]]
    assert listed[0]["activity"] == "waiting for its window"
    client.campaign_verb(created["id"], "cancel")


def _started(services_env: dict[str, str], *arguments: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "switchboard", *arguments],
        env=services_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _found(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    assert found is not None, text
    return found.group(1)


def test_ctrl_c_in_the_demo_ends_its_call_and_stops_its_processes(services: Services) -> None:
    """Interrupted mid-call: exit 130 with one line, its call ended (not left `listening` for
    ever), and its simulator, gateway and worker gone (their API no longer answers)."""
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith("SWITCHBOARD_")},
        "SWITCHBOARD_DATA_KEY": os.environ["SWITCHBOARD_DATA_KEY"],
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
        "SWITCHBOARD_METRICS": "false",
    }
    demo = _started(environment, "demo")
    assert demo.stdout is not None
    said: list[str] = []
    for line in demo.stdout:
        said.append(line)
        if "connected: provider call" in line:
            break
    text = "".join(said)
    session_id = _found(r"session (sess_\w+) created", text)
    api = _found(r"gateway API (http://\S+),", text)
    demo.send_signal(signal.SIGINT)
    demo_out, errors = demo.communicate(timeout=60)
    assert demo.returncode == 130, errors[-2000:]
    assert "Traceback" not in errors and "switchboard: interrupted" in errors
    row = (
        connect(services.database_url)
        .execute_sql("SELECT status, end_reason FROM sessions WHERE id = %s", (session_id,))
        .fetchone()
    )
    assert tuple(row) == ("ended", "host_stopped"), demo_out
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{api}/healthz", timeout=5)


def test_ctrl_c_while_following_a_call_log_and_a_closed_pipe_are_quiet(
    stack: Stack, services: Services
) -> None:
    """`sessions log --follow` stopped with Ctrl-C, and a command whose reader went away (`| head`):
    no traceback either way."""
    client = Client(stack.api_url, stack.api_token)
    session = client.create_session("Follow me.")
    following = _started(stack.env, "sessions", "log", session["id"], "--follow")
    time.sleep(3)  # following: the log is read every second
    following.send_signal(signal.SIGINT)
    _, errors = following.communicate(timeout=30)
    assert following.returncode == 130 and "Traceback" not in errors, errors[-2000:]

    shown = _started(
        {**stack.env, "SWITCHBOARD_GATEWAY_URL": stack.api_url}, "sessions", "show", session["id"]
    )
    assert shown.stdout is not None
    shown.stdout.close()  # the reader is gone before anything is written
    errors = shown.communicate(timeout=30)[1]
    assert "Traceback" not in errors and "BrokenPipeError" not in errors, errors[-2000:]
    client.end(session["id"])


def test_a_procfile_stopped_during_a_call_stops_without_a_traceback(services: Services) -> None:
    """Ctrl-C of `honcho start` reaches every process at once: the provider goes first, the
    gateway's call loses its sideband while the gateway stops. It said "the sink thread is shut
    down" in a traceback: a stopping gateway opens no sideband, and its sockets' closes are
    logged before its sink closes."""
    with Stack(
        services.database_url,
        services.redis_url,
        simulator_args=("--script", str(SCRIPTS / "stays_on_line.json")),
    ) as procfile:
        procfile.start(workers=1)
        client = Client(procfile.api_url, procfile.api_token)
        session = client.create_session("Stay on the line.")
        client.connect(session["id"])
        wait_for(lambda: len(client.session(session["id"])["transcript"]) >= 2, "the call to be under way")
        assert procfile.simulator is not None and procfile.gateway is not None
        for process in (procfile.simulator, procfile.gateway, *procfile.workers):
            process.popen.send_signal(signal.SIGINT)
        procfile.gateway.popen.wait(30)
        time.sleep(0.5)  # its last lines read
    said = "\n".join(procfile.gateway.lines)
    assert "Traceback" not in said and "sink thread is shut down" not in said, said[-3000:]
