from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack

SCRIPTS = Path(__file__).resolve().parents[2] / "simulator" / "scripts"


@pytest.fixture(scope="module")
def stack(services: Services, namespace: str) -> Iterator[Stack]:
    """Simulator, one worker and a gateway as real processes, on the test services."""
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-e2e",
        simulator_args=("--script", str(SCRIPTS / "spoken_call.json")),
    ) as running:
        running.start(workers=1)
        yield running


@pytest.fixture
def client(stack: Stack) -> Client:
    return Client(stack.api_url, stack.api_token, stack.live_url)


def simulator_call(stack: Stack, call_id: str) -> dict[str, Any]:
    """The simulator's log of one call: every event it sent and every control it received."""
    base = stack.simulator_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{base}/_sim/calls/{call_id}", timeout=10) as response:
        return dict(json.loads(response.read()))


def set_script(stack: Stack, script: dict[str, Any] | Path) -> None:
    body = script.read_bytes() if isinstance(script, Path) else json.dumps(script).encode()
    base = stack.simulator_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{base}/_sim/script", data=body, method="PUT", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10):
        pass
