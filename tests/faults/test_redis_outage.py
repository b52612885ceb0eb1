"""Redis down for 12 s under 10 concurrent calls — longer than any retry (the gateway used to
give up after 10 s): the gateway keeps what it cannot number or enqueue and sends it, in order,
once Redis is back, so every caller line is still answered.

The private Redis keeps nothing on disk, as production Redis here does: it is killed, stays down
12 s, and comes back empty (queued messages, delayed timers and seq counters lost with it)."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections.abc import Callable

from switchboard.client import Client
from switchboard.stack import Stack
from tests.faults.calls import place, verify
from tests.faults.servers import PrivatePostgres, PrivateRedis

CALLS = 10
TURNS = 6
DOWN_S = 12.0
_KEPT = re.compile(
    r"Redis answered again after ([\d.]+) s: sent (\d+) messages kept meanwhile "
    r"\(at most (\d+) events of one session\), (\d+) events dropped"
)
_RETRANSMITTED = re.compile(r"retransmitted (\d+) held events")


def _healthy(stack: Stack) -> bool:
    """The gateway's event loop answers (its health route needs no Redis)."""
    try:
        with urllib.request.urlopen(f"{stack.api_url}/healthz", timeout=10) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_redis_down_longer_than_any_retry_leaves_no_turn_unanswered(
    private: tuple[PrivatePostgres, PrivateRedis], figure: Callable[[str], None]
) -> None:
    """Two seconds into 10 calls of 6 turns, Redis is killed and stays down 12 s. The gateway's
    event loop keeps serving meanwhile; afterwards every call completes with every line heard
    and answered once, no durable event lost and no control sent twice."""
    postgres, redis_server = private
    with Stack(postgres.url, redis_server.url, namespace="faults-outage") as stack:
        stack.start(workers=2)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        calls = place(stack, client, CALLS, TURNS)
        took: list[float] = []

        def outage() -> None:
            time.sleep(2.0)
            took.append(redis_server.restart(DOWN_S))

        injector = threading.Thread(target=outage, daemon=True)
        injector.start()
        time.sleep(2.0 + DOWN_S / 2)
        assert injector.is_alive(), "Redis came back before the check"
        assert _healthy(stack), "the gateway did not answer while Redis was down"

        for call in calls:
            client.wait_for_status(call.session_id, timeout_s=240)
        unanswered = {}
        for call in calls:
            transcript = client.session(call.session_id)["transcript"]
            said = sum(1 for line in transcript if line["role"] == "user")
            answered = sum(1 for line in transcript if line["role"] == "assistant")
            if (said, answered) != (TURNS, TURNS):
                unanswered[call.session_id] = (said, answered)
        assert unanswered == {}, f"(lines heard, answered) of the calls left short: {unanswered}"
        outcome = verify(stack, client, calls, TURNS)
        injector.join(60)
        assert stack.gateway is not None
        lines = list(stack.gateway.lines)

    assert took, "the outage never happened"
    kept = [m for line in lines if (m := _KEPT.search(line))]
    assert kept, "the gateway never reported keeping anything: the outage proved nothing"
    messages = sum(int(m.group(2)) for m in kept)
    most = max(int(m.group(3)) for m in kept)
    dropped = int(kept[-1].group(4))
    resent = sum(int(m.group(1)) for line in lines if (m := _RETRANSMITTED.search(line)))
    assert dropped == 0
    figure(
        f"Redis down {took[0]:.0f} s (killed, back empty) during {CALLS} calls × {TURNS} turns: "
        f"the gateway kept {messages} messages and sent them after (at most {most} events of one "
        f"session), {dropped} dropped, {resent} held events re-sent; 0 turns unanswered, 0 events "
        f"lost, 0 controls twice; turn stall p50 {outcome.median_ms:.0f} ms, "
        f"longest {outcome.longest_ms:.0f} ms"
    )
