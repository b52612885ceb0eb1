"""The gateway refuses to listen beyond loopback while the development API token is configured:
anyone who could reach it would hold the deployment's admin token."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.api.roles import DEVELOPMENT_TOKEN, is_loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.5", "::"])
def test_the_development_token_on_a_public_address_refuses_to_start(host: str) -> None:
    environment = {**os.environ, "SWITCHBOARD_GATEWAY_HOST": host, "SWITCHBOARD_API_TOKEN": DEVELOPMENT_TOKEN}
    started = subprocess.run(
        [sys.executable, "-m", "switchboard", "gateway", "--port", "0"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode == 2
    assert "refusing to listen" in started.stderr


def test_loopback_is_told_from_any_other_address() -> None:
    assert all(is_loopback(host) for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"))
    assert not any(is_loopback(host) for host in ("0.0.0.0", "::", "192.168.1.2", "example.com"))
