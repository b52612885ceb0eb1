"""Redis behind Sentinel (deploy/'s topology on private ports): the master killed under 10 calls
of 6 turns, a replica promoted, and every process follows it without a restart.

So that the failover really loses writes (replication is asynchronous), the replica and the
workers are frozen for a second before the master dies: what the master took meanwhile — the
callers' events queued, counters, acknowledgements — is gone with it. The gateway notices
another server answering (its run id) and sends again every event it holds that was not
applied; the workers apply each seq once."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.faults.calls import place, verify
from tests.faults.servers import SentinelRedis

CALLS = 10
TURNS = 6
_FAILED_OVER = re.compile(
    r"Redis answers from another server \(a failover\): retransmitted (\d+) held events"
)


@pytest.fixture
def sentinel_redis(tmp_path: Path) -> Iterator[SentinelRedis]:
    topology = SentinelRedis(tmp_path / "redis")
    try:
        yield topology
    finally:
        topology.stop()


def test_the_redis_master_killed_and_a_replica_promoted_loses_nothing(
    services: Services, sentinel_redis: SentinelRedis, figure: Callable[[str], None]
) -> None:
    with Stack(services.database_url, sentinel_redis.url, namespace="faults-sentinel") as stack:
        stack.start(workers=2)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        calls = place(stack, client, CALLS, TURNS)
        took: list[float] = []

        def failover() -> None:
            time.sleep(2.0)
            # What the master takes now is never copied; and with the workers paused (as a
            # stalled worker would be), the callers' events of that moment sit in its queues.
            paused = [sentinel_redis.replica_process.pid, *(worker.popen.pid for worker in stack.workers)]
            for pid in paused:
                os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(1.0)
            finally:
                for pid in paused:
                    os.kill(pid, signal.SIGCONT)
                took.append(sentinel_redis.kill_master())

        injector = threading.Thread(target=failover, daemon=True)
        injector.start()
        outcome = verify(stack, client, calls, TURNS)
        injector.join(90)
        assert stack.gateway is not None
        resent = [int(m.group(1)) for line in stack.gateway.lines if (m := _FAILED_OVER.search(line))]

    assert took, "the failover never happened"
    assert resent, "the gateway never noticed the failover: the test proved nothing"
    figure(
        f"Redis master killed, replica promoted by Sentinel ({took[0]:.1f} s to promotion) during "
        f"{CALLS} calls × {TURNS} turns: {sum(resent)} held events re-sent, 0 events lost, "
        f"0 controls twice, all complete; turn stall p50 {outcome.median_ms:.0f} ms, "
        f"longest {outcome.longest_ms:.0f} ms"
    )
