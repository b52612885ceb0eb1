"""A keyed create whose claim was taken while its answer was lost: the claim's write held behind
a lock past the gateway's reply timeout, then made. The retry is served once the claim could be
let go, not answered 409 `request_in_progress` until the claim goes stale (about 90 s), and the
session is made once."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import psycopg2

from models.db import connect
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.support.waiting import wait_for


def test_a_claim_whose_answer_was_lost_does_not_hold_its_key(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    instructions = f"You are the lost-claim desk {uuid.uuid4().hex[:8]}."
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-lostclaim") as stack:
        stack.start(workers=1)
        client = Client(stack.api_url, stack.api_token)
        key = {"Idempotency-Key": f"create-{uuid.uuid4().hex}"}
        # The claim's write waits behind a lock past the gateway's reply timeout, then is made:
        # taken, with nobody left to hear its answer (as a Redis restart loses one).
        blocker = psycopg2.connect(services.database_url)
        try:
            with blocker.cursor() as cursor:
                cursor.execute("LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
                status, answer = client.request("POST", "/v1/sessions", {"instructions": instructions}, key)
                # The fault happened: the gateway gave up on the claim.
                assert status == 503, answer
        finally:
            blocker.commit()
            blocker.close()
        back = time.monotonic()
        database = connect(services.database_url)
        wait_for(
            lambda: (
                database.execute_sql(
                    "SELECT 1 FROM idempotency_keys WHERE key = %s", (key["Idempotency-Key"],)
                ).fetchone()
                or time.monotonic() - back > 5
            ),
            "the late claim to be written (or not, once released first)",
        )

        def retried() -> tuple[int, object] | None:
            status, answer = client.request("POST", "/v1/sessions", {"instructions": instructions}, key)
            return (status, answer) if status != 409 else None

        status, answer = wait_for(retried, "the retry to be served", timeout_s=30, every_s=0.25)
        waited = time.monotonic() - back
        assert status == 201, answer
        assert isinstance(answer, dict) and answer["instructions"] == instructions
        made = database.execute_sql(
            "SELECT count(*) FROM sessions WHERE state->>'instructions' = %s", (instructions,)
        )
        assert made.fetchone()[0] == 1
        figure(f"a keyed create whose claim's answer was lost: served {waited:.1f} s after the lock went")
