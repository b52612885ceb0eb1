"""Durable timers on real PostgreSQL: written with the transition that schedules them, gone
when they fire, and fired by the sweeper when their delayed message was lost."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from models.db import database
from models.sessions import locked_session, new_session
from models.timers import claim_overdue
from pipeline.dialects import parse_inbound
from tests.pipeline import events as ev
from tests.support.calls import GATEWAY, new_session_id


def _timers(session_id: str) -> list[tuple[str, float]]:
    cursor = database.execute_sql(
        "SELECT name, extract(epoch FROM due_at - now()) FROM session_timers WHERE session_id = %s",
        (session_id,),
    )
    return [(name, float(seconds)) for name, seconds in cursor.fetchall()]


def test_a_lost_timer_is_fired_by_the_sweeper_once(worker_runtime: Any, control_inbox: Any) -> None:
    """An overdue timer is claimed once, by a sweeper of its own deployment only, and fires."""
    from workers.actors import TIMER_GRACE_MS, TIMER_LEASE_MS, session_timer

    namespace = worker_runtime.settings.broker_namespace
    session_id = new_session_id()
    with new_session(session_id, GATEWAY, namespace) as session:
        session.apply_host(parse_inbound(ev.session_created()), time.time())
    [(name, due_in)] = _timers(session_id)
    assert name == "admission_timeout" and 29 < due_in <= 30

    # Its delayed message is lost (a Redis restart) and its time has come.
    database.execute_sql(
        "UPDATE session_timers SET due_at = now() - interval '10 seconds' WHERE session_id = %s",
        (session_id,),
    )
    elsewhere = claim_overdue("another-deployment", TIMER_GRACE_MS, TIMER_LEASE_MS)
    assert [pair for pair in elsewhere if pair[0] == session_id] == []
    claimed = [
        pair for pair in claim_overdue(namespace, TIMER_GRACE_MS, TIMER_LEASE_MS) if pair[0] == session_id
    ]
    assert claimed == [(session_id, "admission_timeout")]
    assert [
        pair for pair in claim_overdue(namespace, TIMER_GRACE_MS, TIMER_LEASE_MS) if pair[0] == session_id
    ] == []

    session_timer(session_id=session_id, name="admission_timeout")  # what the sweeper enqueued

    cursor = database.execute_sql("SELECT status, end_reason FROM sessions WHERE id = %s", (session_id,))
    assert cursor.fetchone() == ("failed", "admission_timeout")
    assert _timers(session_id) == []


def test_a_timer_that_fires_on_time_leaves_nothing_to_sweep(worker_runtime: Any, control_inbox: Any) -> None:
    from workers.actors import session_timer

    session_id = new_session_id()
    with new_session(session_id, GATEWAY, worker_runtime.settings.broker_namespace) as session:
        session.apply_host(parse_inbound(ev.session_created()), time.time())
    session_timer(session_id=session_id, name="admission_timeout")
    assert _timers(session_id) == []


def test_a_session_that_ends_takes_its_timers_with_it(worker_runtime: Any, control_inbox: Any) -> None:
    """Ending a session deletes its pending timers (they would only check a finished session and
    do nothing), so none is left to be swept and fired again and again."""
    session_id = new_session_id()
    with new_session(session_id, GATEWAY, worker_runtime.settings.broker_namespace) as session:
        session.apply_host(parse_inbound(ev.session_created()), time.time())
    assert [name for name, _ in _timers(session_id)] == ["admission_timeout"]
    with locked_session(session_id) as session:
        session.apply_host(parse_inbound(ev.end_requested()), time.time())
    assert _timers(session_id) == []


def test_the_worker_s_sweeps_share_one_middleware(worker_runtime: Any) -> None:
    """Dramatiq warns at every worker start about a middleware type added twice: a middleware
    per sweep greeted each clean start with three warnings."""
    kinds = [type(middleware).__name__ for middleware in worker_runtime.broker.middleware]
    assert "Sweeps" in kinds and len(kinds) == len(set(kinds))


def test_every_sweep_runs_on_its_own_thread_from_boot_to_shutdown() -> None:
    """Each added sweep runs (two at once, neither waits on the other) once the worker boots."""
    from workers.middleware import Sweeps

    sweeps = Sweeps()
    ran = {name: threading.Event() for name in ("first", "second")}
    both = threading.Barrier(2, timeout=30)

    def sweep(name: str) -> int:
        if not ran[name].is_set():
            # Both sweeps are inside at once, or the barrier breaks: one thread each.
            both.wait()
            ran[name].set()
        return 0

    for name in ran:
        sweeps.add(functools.partial(sweep, name), 0.01, name=f"sweep-{name}", report=None)
    sweeps.after_worker_boot(None, None)  # type: ignore[arg-type]
    try:
        assert all(event.wait(30) for event in ran.values())
    finally:
        sweeps.before_worker_shutdown(None, None)  # type: ignore[arg-type]
