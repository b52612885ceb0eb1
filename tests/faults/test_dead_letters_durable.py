"""Dead letters outlive Redis: each is a row in PostgreSQL, written before its message leaves
the queue. Redis restarted empty (it keeps nothing on disk) with dead letters present loses
none of them; PostgreSQL down at the moment a message fails for good loses nothing either (the
message waits in Redis until the row can be written)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import dramatiq
import psycopg2
import redis

from switchboard.stack import Stack
from tests.faults.servers import PrivatePostgres, PrivateRedis
from workers.broker import make_broker

# Not UTF-8, not JSON: a body no worker can decode, kept as it came.
GARBAGE = b"\xff\xfe{not a message"


def _dlq(stack: Stack, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", "dlq", *arguments],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _letters(stack: Stack) -> dict[str, dict[str, Any]]:
    listed = _dlq(stack, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return {letter["id"]: letter for letter in json.loads(listed.stdout)}


def _doomed(redis_url: str, namespace: str, count: int) -> list[str]:
    """Messages that can never succeed (an envelope without its fields: refused, not retried),
    and a body that is not a message: their ids (the body's last)."""
    broker = make_broker(redis_url, namespace=namespace)
    broker.declare_queue("transcript")
    ids = []
    for _ in range(count):
        message: dramatiq.Message[Any] = dramatiq.Message(
            queue_name="transcript",
            actor_name="transcript_event",
            args=(),
            kwargs={"envelope": {"session_id": f"sess_doomed_{uuid.uuid4().hex[:8]}"}},
            options={},
        )
        broker.enqueue(message)
        ids.append(message.message_id)
    corrupt = "corrupt-" + uuid.uuid4().hex[:8]
    broker.do_enqueue("transcript", corrupt, GARBAGE)
    broker.close()
    return [*ids, corrupt]


def _rows(database_url: str, namespace: str) -> set[str]:
    """The ids of the dead letters kept in PostgreSQL, read without `switchboard dlq` (which
    would also move any it found in Redis)."""
    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT id FROM dead_letters WHERE namespace = %s", (namespace,))
        ids = {str(row[0]) for row in cursor.fetchall()}
    connection.close()
    return ids


def _until(predicate: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_dead_letters_outlive_redis_and_wait_out_postgresql(
    private: tuple[PrivatePostgres, PrivateRedis], figure: Callable[[str], None]
) -> None:
    postgres, redis_server = private
    with Stack(postgres.url, redis_server.url, namespace="faults-dlq") as stack:
        stack.start(workers=1)
        made = _doomed(redis_server.url, stack.namespace, 3)
        doomed, corrupt = made[:-1], made[-1]
        _until(lambda: set(made) <= _rows(postgres.url, stack.namespace), "the dead letters kept")
        # Kept in PostgreSQL as they failed, not in Redis's dead-letter set.
        assert redis.Redis.from_url(redis_server.url).zcard(f"{stack.namespace}:transcript.XQ") == 0
        before = _letters(stack)
        assert before[corrupt]["corrupt"] is True

        redis_down_s = redis_server.restart()
        after = _letters(stack)
        # Each as it was (a request cut by the restart may be a dead letter more beside them).
        assert {i: (after[i]["actor"], after[i]["session_id"], after[i]["error"]) for i in made} == {
            i: (before[i]["actor"], before[i]["session_id"], before[i]["error"]) for i in made
        }
        shown = _dlq(stack, "show", corrupt)
        assert shown.returncode == 0 and json.loads(shown.stdout)["corrupt"] is True
        replayed = _dlq(stack, "replay", doomed[0])
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        # Replayed, it fails again (it can never succeed) and is a dead letter again: one row.
        _until(lambda: doomed[0] in _letters(stack), "the replayed message to fail again")
        assert _dlq(stack, "purge", "--all").returncode == 0
        assert _letters(stack) == {}

        # PostgreSQL down while messages fail for good: they wait in Redis, then are kept.
        outage = threading.Thread(target=postgres.down_for, args=(6.0,))
        outage.start()
        time.sleep(1.0)
        during = _doomed(redis_server.url, stack.namespace, 2)
        outage.join(60)
        # A message waits in Redis until its row is written; a body that is not a message goes
        # to Redis's dead-letter set instead (the consumer must not stall on it), from where the
        # next reading of the letters moves it.
        _until(lambda: set(during[:-1]) <= _rows(postgres.url, stack.namespace), "the letters kept")
        kept_after_outage = set(during) & set(_letters(stack))

    assert kept_after_outage == set(during)  # the two, and the body that is not a message
    figure(
        f"Redis restarted empty ({redis_down_s * 1000:.0f} ms down) with 4 dead letters (one corrupt): all 4 "
        f"still listed, shown, replayed and purged from PostgreSQL; PostgreSQL stopped 6 s while 3 messages "
        f"failed for good: all 3 kept once it was back, none lost"
    )
