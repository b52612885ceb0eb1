"""PostgreSQL and Redis restarted under 20 concurrent calls, each a private server so the rest
of the suite is undisturbed."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable

from switchboard.client import Client
from switchboard.stack import Stack
from tests.faults.calls import place, verify
from tests.faults.servers import PrivatePostgres, PrivateRedis

CALLS = 20
TURNS = 6
_RETRANSMITTED = re.compile(r"retransmitted (\d+) held events")


def _under_load(
    postgres: PrivatePostgres,
    redis_server: PrivateRedis,
    namespace: str,
    fault: Callable[[Stack], float],
) -> tuple[float, float, float, Stack]:
    """Run the calls, inject the fault two seconds in; answers (fault seconds, median stall ms,
    longest stall ms, the stopped stack)."""
    with Stack(postgres.url, redis_server.url, namespace=namespace) as stack:
        stack.start(workers=2)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        took: list[float] = []
        calls = place(stack, client, CALLS, TURNS)
        injector = threading.Thread(target=lambda: (time.sleep(2.0), took.append(fault(stack))), daemon=True)
        injector.start()
        outcome = verify(stack, client, calls, TURNS)
        injector.join(60)
    assert took, "the fault was never injected"
    return took[0], outcome.median_ms, outcome.longest_ms, stack


def test_postgresql_restarted_mid_load_loses_nothing(
    private: tuple[PrivatePostgres, PrivateRedis], figure: Callable[[str], None]
) -> None:
    postgres, redis_server = private
    took, median, longest, _ = _under_load(
        postgres, redis_server, "faults-pg", lambda _stack: postgres.restart()
    )
    figure(
        f"PostgreSQL restart (fast, {took * 1000:.0f} ms down) during {CALLS} calls × {TURNS} turns: "
        f"0 events lost, 0 controls twice, all complete; "
        f"turn stall p50 {median:.0f} ms, longest {longest:.0f} ms"
    )


def test_redis_restarted_empty_mid_load_loses_nothing(
    private: tuple[PrivatePostgres, PrivateRedis], figure: Callable[[str], None]
) -> None:
    """Redis keeps nothing on disk: a restart loses every queued message. So that some are
    queued when it dies, the workers are paused for a second first (as a CPU-starved or stalled
    worker would be) while the callers go on talking. The gateway notices the restart (its
    marker key is gone), enqueues again every event it holds that was not applied, and the
    workers apply each seq once."""
    postgres, redis_server = private

    def restart_with_a_backlog(stack: Stack) -> float:
        for worker in stack.workers:
            os.kill(worker.popen.pid, signal.SIGSTOP)
        try:
            time.sleep(1.0)
            return redis_server.restart()
        finally:
            for worker in stack.workers:
                os.kill(worker.popen.pid, signal.SIGCONT)

    took, median, longest, stack = _under_load(postgres, redis_server, "faults-redis", restart_with_a_backlog)
    assert stack.gateway is not None
    resent = [int(m.group(1)) for line in stack.gateway.lines if (m := _RETRANSMITTED.search(line))]
    assert resent and sum(resent) > 0, (
        "the gateway never retransmitted: nothing was lost, the test proved nothing"
    )
    figure(
        f"Redis restart (killed, empty, {took * 1000:.0f} ms down, workers paused 1 s before it) during "
        f"{CALLS} calls × {TURNS} turns: {sum(resent)} queued events lost with Redis and retransmitted; "
        f"0 events lost, 0 controls twice, all complete; "
        f"turn stall p50 {median:.0f} ms, longest {longest:.0f} ms"
    )
