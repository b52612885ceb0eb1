"""kill -9 of the gateway dialling a call going out, after the provider placed the call and before
its answer came back, while a second gateway runs: the second takes the session over and dials
again under the same idempotency key, so the provider answers with the call it placed (never a
second one), and the call is steered to its end — not left to the admission timeout."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.support.live import _sim, set_live_script
from tests.support.waiting import wait_for

TO = "+14155550177"


def test_a_call_being_dialled_by_a_killed_gateway_is_dialled_again_once_and_goes_on(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-middial") as stack:
        stack.start(workers=2)
        survivor = stack.add_gateway()
        first = Client(stack.api_url, stack.api_token)
        second = Client(f"http://127.0.0.1:{survivor.ready['http']}", stack.api_token)
        first.add_trunk(
            {
                "name": "main",
                "url": "sips:sip.example.com",
                "username": "acme",
                "password": f"pw-{uuid.uuid4().hex}",
                "caller_number": "+12125550100",
            }
        )
        set_live_script(
            stack,
            {"caller": [{"say": "Hello?", "after_ms": 100}, {"hangup": True, "after_ms": 3000}], "model": []},
        )
        # The provider places the call at once, but its answer to the dial takes 20 s: the
        # gateway that asked is killed before it hears it. The callee answers after 9 s.
        plan = {
            TO: {"outcome": "human", "script": "live_callee", "ring_ms": 9_000, "answer_after_ms": 20_000}
        }
        _sim(stack, "PUT", "/_sim/live/dial-plan", plan)
        placed = first.place_call(TO, {"instructions": "You remind Sam.", "provider": "live"})
        session_id, call_id = placed["session"]["id"], placed["call"]["id"]
        wait_for(
            lambda: [d for d in _sim(stack, "GET", "/_sim/live/dials")["dials"] if d["destination"] == TO],
            "the provider to place the call",
        )
        assert stack.gateway is not None
        killed_at = time.monotonic()
        stack.gateway.kill()

        record = second.wait_for_status(session_id, timeout_s=90)
        taken_s = time.monotonic() - killed_at
        assert record["status"] == "ended", record
        assert record["owning_gateway"] == survivor.ready["id"]
        assert "gateway_lost" in [incident["code"] for incident in record["incidents"]]
        shown = second.outbound_call(call_id)
        assert (shown["status"], shown["outcome"], shown["answered_by"]) == ("ended", "completed", "human")
        # Dialled once at the provider: the second dial was its first dial's repeat.
        [dial] = [d for d in _sim(stack, "GET", "/_sim/live/dials")["dials"] if d["destination"] == TO]
        assert (dial["idempotency_key"], dial["repeats"]) == (call_id, 1)
        figure(f"a call being dialled by a killed gateway: ended normally {taken_s:.1f} s after the kill")
