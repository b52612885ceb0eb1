"""Erasure on request and by retention, after the database's part (`models.erasure`): the
session's Redis keys and the messages of it that wait in Redis are scrubbed.

What Redis may hold of a session, by key of the deployment's namespace `<ns>`:

- `<ns>:seq:<id>`, `<ns>:rate:<kind>:<id>:<minute>`, `<ns>:directive:<id>:<directive>`,
  `<ns>:tool-cancel:<id>:<call>`, `<ns>:stream-wanted:<id>`, `<ns>:stream-waiting:<id>`: its
  counters and flags (deleted);
- its dead letters, `<ns>:<queue>.XQ` and `.XQ.msgs` (dropped: a replay would bring its content
  back), and its messages waiting on a queue, `<ns>:<queue>` and `<ns>:<queue>.DQ` with their
  `.msgs` (an end-of-call webhook waiting for its retry carries the transcript; a late event of
  the erased session would be dropped by its worker anyway; a timer of an ended session fires
  nothing);
- its control batches not yet taken by a gateway, on `<ns>:gateway.<gateway>` (a dead gateway's
  list keeps them).

The scrub is idempotent and runs after the transaction commits, so a worker killed between the
two leaves the database erased and Redis not yet: the erasure's message comes back (or is asked
again), finds the session erased (`already_erased`) and scrubs Redis. A message a live worker
has already taken is in that worker's memory, out of reach: it is carried out moments later (see
`_drop_messages`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import dramatiq
import redis
from dramatiq.common import dq_name, xq_name
from dramatiq.errors import DecodeError

from models import dead_letters
from models.db import database, is_connection_lost
from models.erasure import CallerErased, Erased, erase_caller, erase_session, retention_due
from pipeline.platform.names import APP_WEBHOOKS_QUEUE, QUEUES

logger = logging.getLogger(__name__)

# The retention sweep runs this often in every worker process; one at a time takes it for a
# deployment (an advisory lock on the class and the namespace: deployments sharing a database
# sweep side by side), and each erasure takes the session's row lock besides.
RETENTION_SWEEP_INTERVAL_S = 60.0
RETENTION_SWEEP_BATCH = 100
_RETENTION_LOCK_CLASS = 0x5B_0E_7A
TAKE_SWEEP_LOCK = "SELECT pg_try_advisory_lock(%s, hashtext(%s))"
LET_GO_OF_SWEEP_LOCK = "SELECT pg_advisory_unlock(%s, hashtext(%s))"


def sweep_lock(namespace: str) -> tuple[int, str]:
    """The parameters of a deployment's sweep lock, for TAKE_SWEEP_LOCK and LET_GO_OF_SWEEP_LOCK."""
    return (_RETENTION_LOCK_CLASS, namespace)


_SESSION_KEYS = ("seq:{id}", "rate:*:{id}:*", "directive:{id}:*", "tool-cancel:{id}:*", "stream-*:{id}")


def erase(
    client: redis.Redis,
    namespace: str,
    session_id: str,
    *,
    by: str,
    deployment_retention_days: int | None = None,
) -> dict[str, Any]:
    """Erase one session on request: the database in one transaction, then Redis."""
    erased = erase_session(
        session_id,
        by=by,
        because="request",
        deployment_retention_days=deployment_retention_days,
        namespace=namespace,
    )
    assert erased is not None  # only a retention erasure declines
    return _with_redis(client, namespace, erased)


def erase_number(client: redis.Redis, namespace: str, number: str, *, by: str) -> dict[str, Any]:
    """Erase every ended session of a caller's (or callee's) number, then each one's Redis."""
    done: CallerErased = erase_caller(namespace, number, by=by)
    scrubbed: dict[str, int] = {}
    for erased in done.erased:
        for name, count in scrub(client, namespace, erased.session_id).items():
            scrubbed[name] = scrubbed.get(name, 0) + count
    return {**done.as_json(), "redis": scrubbed}


def sweep_retention(client: redis.Redis, namespace: str, deployment_retention_days: int | None) -> int:
    """Erase the ended sessions whose retention is over (`erased_because: "retention"`);
    answers how many. One sweeper at a time per deployment (an advisory lock a second one finds
    taken); each erasure is under the session's row lock as well, so it is never done twice."""
    got = database.execute_sql(TAKE_SWEEP_LOCK, sweep_lock(namespace)).fetchone()
    if not got or not got[0]:
        return 0
    try:
        count = 0
        for session_id in retention_due(namespace, deployment_retention_days, RETENTION_SWEEP_BATCH):
            try:
                erased = erase_session(
                    session_id,
                    by="retention",
                    because="retention",
                    deployment_retention_days=deployment_retention_days,
                    namespace=namespace,
                )
            except Exception as error:
                if is_connection_lost(error):
                    raise
                # One session that cannot be erased now (its row held past the lock timeout)
                # holds up none of the others; the next sweep tries it again.
                logger.exception("retention: could not erase %s now; the next sweep retries", session_id)
                continue
            if erased is not None:
                # A call kept as metadata still owes the app its end-of-call webhook, whose
                # message carries what the app is owed (masked): it is left to be delivered.
                scrub(client, namespace, session_id, keep_app_webhooks=erased.because == "storage")
                count += 0 if erased.already_erased else 1
        return count
    finally:
        database.execute_sql(LET_GO_OF_SWEEP_LOCK, sweep_lock(namespace))


def _with_redis(client: redis.Redis, namespace: str, erased: Erased) -> dict[str, Any]:
    return {**erased.as_json(), "redis": scrub(client, namespace, erased.session_id)}


def scrub(
    client: redis.Redis, namespace: str, session_id: str, *, keep_app_webhooks: bool = False
) -> dict[str, int]:
    """Remove what Redis holds of the session, and its dead letters (rows in PostgreSQL); how
    many of each. Safe to run again."""
    keys = 0
    for pattern in _SESSION_KEYS:
        found = list(client.scan_iter(match=f"{namespace}:{pattern.format(id=session_id)}", count=1_000))
        if found:
            keys += int(client.delete(*found))
    dead = dead_letters.erase_session(
        namespace, session_id, keep_queue=APP_WEBHOOKS_QUEUE if keep_app_webhooks else None
    )
    waiting = 0
    for queue in QUEUES:
        if keep_app_webhooks and queue == APP_WEBHOOKS_QUEUE:
            continue
        dead += _drop_messages(client, f"{namespace}:{xq_name(queue)}", session_id, sorted_set=True)
        for listed in (dq_name(queue), queue):
            waiting += _drop_messages(client, f"{namespace}:{listed}", session_id, sorted_set=False)
    return {
        "keys": keys,
        "dead_letters": dead,
        "queued": waiting,
        "controls": _drop_controls(client, namespace, session_id),
    }


def _drop_messages(client: redis.Redis, queue_key: str, session_id: str, *, sorted_set: bool) -> int:
    """Drop the messages of the session from a dead-letter queue (a sorted set of ids) or a
    ready or delayed queue (a list of ids), with their bodies (`<queue>.msgs`). The id goes off
    its list before its body goes, so no fetch finds an id without a body. A message a worker has
    taken already (its id in the worker's acks) loses its body too: a killed worker's taken
    messages are given back only if their body is there, and a live worker has it in memory —
    it carries out what it took (a delayed one is put on its queue when due, and taken from
    there), moments later; an event of the erased session is kept nowhere (`LockedSession`)."""
    bodies = f"{queue_key}.msgs"
    dropped = 0
    for raw_id, body in list(client.hscan_iter(bodies, count=500)):
        if session_id.encode() not in body or _session_of(body) != session_id:
            continue
        if sorted_set:
            client.zrem(queue_key, raw_id)
        else:
            client.lrem(queue_key, 0, raw_id)
        dropped += int(client.hdel(bodies, raw_id))
    return dropped


def _drop_controls(client: redis.Redis, namespace: str, session_id: str) -> int:
    """Drop the session's control batches waiting on any gateway's control list."""
    dropped = 0
    for key in client.scan_iter(match=f"{namespace}:gateway.*", count=1_000):
        if client.type(key) != b"list":
            continue
        entries: list[bytes] = client.lrange(key, 0, -1)  # type: ignore[assignment]
        for entry in entries:
            if session_id.encode() in entry and _batch_session(entry) == session_id:
                dropped += int(client.lrem(key, 0, entry))  # type: ignore[arg-type]
    return dropped


def _session_of(body: bytes) -> str | None:
    """The session a stored Dramatiq message is about (as the dead letters read it)."""
    try:
        message = dramatiq.Message.decode(body)
    except DecodeError:
        return None
    kwargs = message.kwargs if isinstance(message.kwargs, dict) else {}
    if isinstance(kwargs.get("session_id"), str):
        return str(kwargs["session_id"])
    envelopes = kwargs.get("envelopes") or ([kwargs["envelope"]] if "envelope" in kwargs else [])
    if isinstance(envelopes, list) and envelopes and isinstance(envelopes[0], dict):
        found = envelopes[0].get("session_id")
        return str(found) if isinstance(found, str) else None
    return None


def _batch_session(entry: bytes) -> str | None:
    try:
        batch = json.loads(entry)
    except ValueError:
        return None
    found = batch.get("session_id") if isinstance(batch, dict) else None
    return str(found) if isinstance(found, str) else None
