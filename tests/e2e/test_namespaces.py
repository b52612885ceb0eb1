"""Two deployments on one Redis and one PostgreSQL, each with a gateway called gw1, keep to
themselves: every API call is answered by its own deployment (the control queues were not
scoped by namespace, and 7 of 10 creates got 503)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack


def test_two_deployments_with_the_same_gateway_id_answer_only_their_own_calls(
    services: Services, namespace: str
) -> None:
    """Ten creates and reads against each of two deployments sharing Redis and a gateway id
    all succeed, and each deployment sees only its own sessions."""
    run = uuid.uuid4().hex[:6]
    with (
        Stack(
            services.database_url, services.redis_url, namespace=f"{namespace}-a{run}", gateway_id="gw1"
        ) as a,
        Stack(
            services.database_url, services.redis_url, namespace=f"{namespace}-b{run}", gateway_id="gw1"
        ) as b,
    ):
        a.start(workers=1)
        b.start(workers=1)
        clients = {"a": Client(a.api_url, a.api_token), "b": Client(b.api_url, b.api_token)}

        def create(which: str) -> tuple[str, int, str]:
            status, body = clients[which].request("POST", "/v1/sessions", {"instructions": f"for {which}"})
            return which, status, body.get("id", "") if isinstance(body, dict) else ""

        with ThreadPoolExecutor(8) as pool:
            created = list(pool.map(create, ["a", "b"] * 10))
        assert [status for _, status, _ in created] == [201] * 20
        for which, _, session_id in created:
            record = clients[which].session(session_id)
            assert record["instructions"] == f"for {which}"
