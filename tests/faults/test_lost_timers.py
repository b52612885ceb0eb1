"""A timer whose delayed message was lost with Redis still fires: the worker's sweeper finds
its durable row overdue and fires it."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from models.db import connect
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack


def test_a_timer_lost_with_redis_is_fired_by_the_sweeper(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-timers") as stack:
        stack.start(workers=1)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        session = client.create_session("Be brief.")
        # The admission timeout's delayed message is gone, as after a Redis restart…
        broker_redis = redis.Redis.from_url(services.redis_url)
        lost = broker_redis.delete(f"{stack.namespace}:admission.DQ", f"{stack.namespace}:admission.DQ.msgs")
        broker_redis.close()
        assert lost >= 1, "there was no delayed message to lose"
        # …and its time has come (it was due 30 s after creation).
        database = connect(services.database_url)
        database.execute_sql(
            "UPDATE session_timers SET due_at = now() - interval '5 seconds' WHERE session_id = %s",
            (session["id"],),
        )
        overdue_since = time.time() - 5
        record = client.wait_for_status(session["id"], timeout_s=30)
        fired_after = time.time() - overdue_since

    assert (record["status"], record["end_reason"]) == ("failed", "admission_timeout")
    assert [incident["code"] for incident in record["incidents"]] == ["admission_timeout"]
    figure(f"timer lost with Redis: fired by the sweeper {fired_after:.1f} s after it was due (grace 5 s)")
