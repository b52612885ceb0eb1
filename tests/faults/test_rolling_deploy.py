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


def test_a_draining_gateway_hands_its_calls_to_a_peer_and_exits_losing_no_line(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    calls_n, turns = 10, 8
    with Stack(
        services.database_url, services.redis_url, namespace=f"{namespace}-drain", extra_env=DRAIN
    ) as stack:
        stack.start(workers=2)
        peer = stack.add_gateway()
        assert stack.gateway is not None
        draining = stack.gateway
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        set_script(stack, script(turns, pause_ms=500))
        calls = _place(client, calls_n)
        time.sleep(2.0)
        draining.popen.terminate()
        # Ready no more at once, and no new call taken, while it still answers reads.
        ready = _get(f"{_base(draining)}/readyz")
        status, created = client.request("POST", "/v1/sessions", {"instructions": "Hi."})
        read, _ = client.request("GET", f"/v1/sessions/{calls[0].session_id}")
        started = time.monotonic()
        draining.popen.wait(90)
        took = time.monotonic() - started
        assert ready[0] == 503 and ready[1]["error"]["code"] == "draining"
        assert (status, created["error"]["code"]) == (503, "draining")
        assert read == 200
        second = Client(_base(peer), stack.api_token)
        assert _get(f"{_base(peer)}/readyz") == (200, {"status": "ready", "gateway": peer.ready["id"]})
        outcome = verify(stack, second, calls, turns)
        owners = {second.session(call.session_id)["owning_gateway"] for call in calls}
        moved_lines = [line for line in draining.lines if "draining: handing" in line]

    assert owners == {peer.ready["id"]}
    assert moved_lines, "the gateway never drained"
    figure(
        f"gateway drained (SIGTERM) with {calls_n} calls of {turns} turns in flight, a peer running: "
        f"/readyz 503 and new calls refused at once; all {calls_n} moved and completed with every "
        f"caller line heard and answered; exited {took:.1f} s after the signal; "
        f"turn stall p50 {outcome.median_ms:.0f} ms, longest {outcome.longest_ms:.0f} ms"
    )


def test_a_rolling_deploy_under_fifty_calls_loses_nothing(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    """Two gateways and two workers; 50 calls talk (half placed through each gateway) while every
    process is restarted in turn — SIGTERM, wait for it to exit, start its successor (a gateway
    under the same id), wait until it is ready — and then all of them again."""
    calls_n, turns, rounds = 50, 12, 2
    with Stack(
        services.database_url, services.redis_url, namespace=f"{namespace}-rolling", extra_env=DRAIN
    ) as stack:
        stack.start(workers=2)
        assert stack.gateway is not None
        gateways = {stack.gateway_id: stack.gateway}
        other = stack.add_gateway()
        gateways[other.ready["id"]] = other
        set_script(stack, script(turns, pause_ms=2500))
        placed: list[Call] = []
        for process in gateways.values():
            placed += _place(Client(_base(process), stack.api_token), calls_n // 2)
        workers = list(stack.workers)
        took: dict[str, list[float]] = {"gateway": [], "worker": []}
        for _ in range(rounds):
            for index, worker in enumerate(list(workers)):
                started = time.monotonic()
                _stop(worker)
                workers[index] = stack.add_worker()
                took["worker"].append(time.monotonic() - started)
            for gateway_id, process in list(gateways.items()):
                started = time.monotonic()
                _stop(process)
                successor = stack.add_gateway(gateway_id)
                assert _get(f"{_base(successor)}/readyz")[0] == 200
                gateways[gateway_id] = successor
                took["gateway"].append(time.monotonic() - started)
        client = Client(_base(gateways[stack.gateway_id]), stack.api_token)
        outcome = verify(stack, client, placed, turns)
        still_running = [call for call in placed if client.session(call.session_id)["status"] != "ended"]

    assert still_running == []
    restarts = len(took["gateway"]) + len(took["worker"])
    figure(
        f"rolling deploy, {rounds} rounds of 2 gateways and 2 workers ({restarts} restarts: SIGTERM, exit, "
        f"successor ready) while {calls_n} calls of {turns} turns talk: 0 events lost, 0 controls twice, "
        f"every call complete with every caller line heard and answered once; a gateway's restart took "
        f"{statistics.median(took['gateway']):.1f} s (median), "
        f"a worker's {statistics.median(took['worker']):.1f} s; "
        f"turn stall p50 {outcome.median_ms:.0f} ms, longest {outcome.longest_ms:.0f} ms"
    )
