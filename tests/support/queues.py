"""A stack's queues as the tests use them: waiting for them to let go of a call (what the erasure
tests need before they erase, so that every message of the session is in Redis where the scrub
reaches it), and a message that can never succeed, to be dead-lettered."""

from __future__ import annotations

from typing import Any

import dramatiq
import redis

from switchboard.stack import Stack
from tests.support.waiting import wait_for
from workers.broker import make_broker


def settled(stack: Stack, words: str) -> None:
    """Wait until no message carrying the call's words is on a queue any more (the inline tool's
    delayed backup runs seconds after the call, and a worker holds it until then): an erasure
    later than that finds everything of the session in Redis where the scrub reaches it, so the
    stores can be read at once after it. (Its timers wait on for the session's ceiling, holding
    no words: the scrub drops them.)"""
    client = redis.Redis.from_url(stack.env["SWITCHBOARD_REDIS_URL"])

    def quiet() -> bool:
        for key in client.scan_iter(match=f"{stack.namespace}:*.msgs", count=1_000):
            if any(words.encode() in body for body in client.hvals(key)):
                return False
        return True

    try:
        wait_for(quiet, f"the messages carrying {words!r} to be processed", timeout_s=60)
    finally:
        client.close()


def doomed_message(stack: Stack, redis_url: str) -> str:
    """Enqueue, on the stack's transcript queue, an event message that is no envelope: the worker
    dead-letters it at once (no retry can help). Answers its message id."""
    broker = make_broker(redis_url, namespace=stack.namespace)
    broker.declare_queue("transcript")
    message: dramatiq.Message[Any] = dramatiq.Message(
        queue_name="transcript",
        actor_name="transcript_event",
        args=(),
        kwargs={"envelope": {"session_id": "sess_not_an_envelope"}},
        options={},
    )
    broker.enqueue(message)
    broker.close()
    return message.message_id
