"""A call's message that finds PostgreSQL away waits for it (pipeline.platform.outages), instead of
spending Dramatiq's retries and becoming a dead letter a few seconds into a failover.

The wait is not a thread asleep: the attempt ends cleanly and the message goes back on its
queue's delay queue with a count of its waits, so a worker stopping meanwhile holds nothing, and
Dramatiq's time limits never see a long wait. A copy enqueued twice (the worker killed between
the enqueue and the acknowledgement) is applied once: every call message is idempotent (a seq is
applied once, a timer fires once, a takeover checks its owner)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import dramatiq
from dramatiq.middleware import CurrentMessage

from models.db import database_answers, is_connection_lost, reopen
from pipeline.platform.outages import SETTLE_AFTER_OUTAGE_MS, retry_after_outage_ms

logger = logging.getLogger(__name__)

_Body = TypeVar("_Body", bound=Callable[..., None])

# Message options: how many times the message found the database away, and whether a timer has
# waited its settling time once the database answered.
WAITS = "database_waits"
SETTLED = "settled_after_outage"


def waits_out_outages(*, settles: bool = False) -> Callable[[_Body], _Body]:
    """Wrap an actor of a call's messages. `settles`: a deadline timer, which after an outage
    lets the events held up by it go first (pipeline.platform.outages)."""

    def wrap(body: _Body) -> _Body:
        @functools.wraps(body)
        def attempt(*args: Any, **kwargs: Any) -> None:
            if settles:
                message = CurrentMessage.get_current_message()
                if message is not None and _waited_before(message):
                    if database_answers():
                        _send_again(message, SETTLE_AFTER_OUTAGE_MS, {SETTLED: True})
                        return
                    if _waited(message):
                        return
                    raise DatabaseAway("the database is away, and this call's message waited its last")
            try:
                body(*args, **kwargs)
            except Exception as error:
                # Looked up only on a failure: an event's attempt that succeeds (the hot path) pays
                # nothing here.
                message = CurrentMessage.get_current_message()
                if message is None or not is_connection_lost(error):
                    raise
                reopen()
                if not _waited(message):
                    raise

        return attempt  # type: ignore[return-value]

    return wrap


def _waited_before(message: dramatiq.Message[Any]) -> bool:
    return bool(message.options.get(WAITS)) and not message.options.get(SETTLED)


class DatabaseAway(Exception):
    """The database stayed away past the last moment this call's message could matter."""


def _waited(message: dramatiq.Message[Any]) -> bool:
    """Put the message back to wait for the database; False when its call is past its ceiling."""
    waits = int(message.options.get(WAITS, 0))
    delay_ms = retry_after_outage_ms(
        sent_at_ms=message.message_timestamp, attempts=waits, now_ms=int(time.time() * 1000)
    )
    if delay_ms is None:
        logger.error(
            "%s %s: the database is still away and its call is over; it takes its retries",
            message.actor_name,
            message.message_id,
        )
        return False
    if waits == 0:
        logger.warning(
            "%s %s: the database is away; the message waits for it", message.actor_name, message.message_id
        )
    _send_again(message, delay_ms, {WAITS: waits + 1})
    return True


def _send_again(message: dramatiq.Message[Any], delay_ms: int, options: dict[str, Any]) -> None:
    # The broker gives the copy a storage id and an eta of its own, as Dramatiq's retries do.
    dramatiq.get_broker().enqueue(message.copy(options=options), delay=delay_ms)
