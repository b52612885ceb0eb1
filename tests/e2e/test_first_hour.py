"""A new user's first hour (issue 44): what goes wrong is said in one line, not a traceback, and
a mistake is refused rather than answered as if nothing were wrong."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from datetime import UTC, datetime

from switchboard.client import Client
from switchboard.stack import Stack
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
