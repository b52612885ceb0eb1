"""`switchboard demo`: the Realtime call (`make demo`) and, with `--provider live`, the same
call on the Live API, and with `--campaign` a small campaign with every outcome, each through
every real process, pass as a user would run them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from switchboard.services import Services

PHONE_PASSED = "demo passed: the phone call was answered, talked on and hung up"


@pytest.mark.parametrize(
    ("flags", "passed"),
    [
        ((), "demo passed: the call completed and every turn is durable"),
        (("--provider", "live"), "demo passed: the delegation was answered once and the call is durable"),
        (
            ("--provider", "live", "--phone"),
            "demo passed: the phone call was answered, talked on and hung up",
        ),
        (("--campaign",), "demo passed: every contact came to its outcome, each dialled once"),
    ],
)
def test_the_demo_runs_its_call_end_to_end(services: Services, flags: tuple[str, ...], passed: str) -> None:
    env = {
        **os.environ,
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
    }
    finished = subprocess.run(
        [sys.executable, "-m", "switchboard", "demo", *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert passed in finished.stdout
    if "live" in flags:
        assert "session.commentary.append" in finished.stdout and "tool.result" in finished.stdout
