"""kill -9 of workers at random moments during 20 concurrent calls."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.faults.calls import place, verify

CALLS = 20
TURNS = 14


def test_workers_killed_at_random_during_20_calls(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    """Two workers; every 0.3 to 0.9 s one of them, at random, is killed -9 and replaced. Nothing is
    lost, nothing sent twice, every call completes; the longest stall is the dead worker's
    messages coming back (its heartbeat timeout plus a maintenance sweep)."""
    chance = random.Random(20)
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-faultkill") as stack:
        stack.start(workers=2)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        done = threading.Event()
        kills: list[str] = []

        def killer() -> None:
            while not done.wait(chance.uniform(0.3, 0.9)) and len(kills) < 12:
                victim = chance.choice(stack.workers[-2:])
                victim.kill()
                kills.append(victim.name)
                stack.add_worker()

        calls = place(stack, client, CALLS, TURNS)
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            outcome = verify(stack, client, calls, TURNS)
        finally:
            done.set()
            thread.join(30)

    assert len(kills) >= 3, f"only {len(kills)} kills happened while the calls ran"
    figure(
        f"worker kill -9: {len(kills)} kills during {CALLS} calls × {TURNS} turns: 0 events lost, "
        f"0 controls twice, all complete; turn stall p50 {outcome.median_ms:.0f} ms, "
        f"longest {outcome.longest_ms:.0f} ms"
    )
