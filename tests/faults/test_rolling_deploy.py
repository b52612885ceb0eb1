"""Deploys under load. A gateway told to stop (SIGTERM) drains: /readyz answers 503 at once, it
takes no new call, its calls move to a peer while its own sidebands stay open, and it exits once
they are moved. A rolling deploy restarts every gateway and worker process one by one, twice,
while calls talk: no event lost, no control sent twice, no call dropped."""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Process, Stack
from tests.e2e.conftest import set_script
from tests.faults.calls import Call, script, verify

DRAIN = {"SWITCHBOARD_DRAIN_SECONDS": "60"}


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _base(process: Process) -> str:
    return f"http://127.0.0.1:{process.ready['http']}"


def _place(client: Client, calls: int) -> list[Call]:
    placed: list[Call] = []
    lock = threading.Lock()

    def one() -> None:
        session = client.create_session("Answer briefly.")
        call = client.connect(session["id"])
        with lock:
            placed.append(Call(session["id"], call["call_id"]))

    threads = [threading.Thread(target=one) for _ in range(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(placed) == calls
    return placed


def _stop(process: Process) -> float:
    """SIGTERM, and the seconds until the process exited."""
    started = time.monotonic()
    process.popen.terminate()
    process.popen.wait(90)
    return time.monotonic() - started


def _drain(process: Process, client: Client, session_id: str) -> tuple[float, dict[str, Any]]:
    """SIGTERM a gateway, and what it answers at once: /readyz, a new call, a read. Answers the
    seconds until it exited, and those answers."""
    started = time.monotonic()
    process.popen.terminate()
    ready = _get(f"{_base(process)}/readyz")
    created = client.request("POST", "/v1/sessions", {"instructions": "Hi."})
    read = client.request("GET", f"/v1/sessions/{session_id}")
    process.popen.wait(90)
    return time.monotonic() - started, {"ready": ready, "created": created, "read": read}


def test_a_rolling_deploy_under_load_loses_nothing(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    """Two gateways and two workers; 30 calls talk (half placed through each gateway) while every
    process is restarted in turn — SIGTERM, wait for it to exit, start its successor (a gateway
    under the same id), wait until it is ready — and then all of them again. A gateway told to
    stop answers /readyz 503 and refuses a new call at once, still answers reads, hands its calls
    to the other while each is idle, and exits once they moved. (50 calls of 12 turns: the same,
    measured by hand; docs/reliability.md.)"""
    calls_n, turns, rounds = 30, 8, 2
    with Stack(
        services.database_url, services.redis_url, namespace=f"{namespace}-rolling", extra_env=DRAIN
    ) as stack:
        stack.start(workers=2)
        assert stack.gateway is not None
        gateways = {stack.gateway_id: stack.gateway}
        other = stack.add_gateway()
        gateways[other.ready["id"]] = other
        set_script(stack, script(turns, pause_ms=2000))
        placed: list[Call] = []
        for process in gateways.values():
            placed += _place(Client(_base(process), stack.api_token), calls_n // 2)
        workers = list(stack.workers)
        took: dict[str, list[float]] = {"gateway": [], "worker": []}
        first_drain: dict[str, Any] = {}
        for _ in range(rounds):
            for index, worker in enumerate(list(workers)):
                started = time.monotonic()
                _stop(worker)
                workers[index] = stack.add_worker()
                took["worker"].append(time.monotonic() - started)
            for gateway_id, process in list(gateways.items()):
                started = time.monotonic()
                if first_drain:
                    _stop(process)
                else:
                    exited_s, first_drain = _drain(
                        process, Client(_base(process), stack.api_token), placed[0].session_id
                    )
                    first_drain["exited_s"] = exited_s
                successor = stack.add_gateway(gateway_id)
                assert _get(f"{_base(successor)}/readyz") == (200, {"status": "ready", "gateway": gateway_id})
                gateways[gateway_id] = successor
                took["gateway"].append(time.monotonic() - started)
        client = Client(_base(gateways[stack.gateway_id]), stack.api_token)
        outcome = verify(stack, client, placed, turns)

    status, refused = first_drain["ready"]
    assert (status, refused["error"]["code"]) == (503, "draining")
    status, refused = first_drain["created"]
    assert (status, refused["error"]["code"]) == (503, "draining")
    assert first_drain["read"][0] == 200
    restarts = len(took["gateway"]) + len(took["worker"])
    figure(
        f"rolling deploy, {rounds} rounds of 2 gateways and 2 workers ({restarts} restarts: SIGTERM, exit, "
        f"successor ready) while {calls_n} calls of {turns} turns talk: 0 events lost, 0 controls twice, "
        f"every call complete with every caller line heard and answered once; a draining gateway "
        f"answered /readyz 503 and refused a new call at once and exited {first_drain['exited_s']:.1f} s "
        f"after SIGTERM; a gateway's restart took {statistics.median(took['gateway']):.1f} s (median), "
        f"a worker's {statistics.median(took['worker']):.1f} s; "
        f"turn stall p50 {outcome.median_ms:.0f} ms, longest {outcome.longest_ms:.0f} ms"
    )
