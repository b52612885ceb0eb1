"""The dead letters, as `switchboard dlq` shows and acts on them, and their counts for the
gateway's gauge."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import dramatiq

from pipeline.api.pages import in_memory, requested
from pipeline.call.errors import DeadLetterNotFound
from pipeline.platform.names import ADMISSION_QUEUE
from workers import dead_letters as dead_letters_
from workers import runtime
from workers.actors.shared import REQUEST_POLICY, answer_request, sweeps
from workers.dead_letters import DeadLetters

_runtime = runtime.current()


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="dead_letters", **REQUEST_POLICY)
def dead_letters(
    request_id: str, gateway_id: str, verb: str, letter_id: str = "", page: dict[str, Any] | None = None
) -> None:
    """The dead letters, as `switchboard dlq` shows and acts on them: list (a page, oldest first),
    show (with what a replay would do), replay, purge."""

    def act() -> tuple[int, dict[str, Any]]:
        letters = DeadLetters(_runtime.broker)
        now_ms = int(time.time() * 1000)
        if verb == "list":
            # Read whole (they are few: each is a fault someone must look at), then paged on when
            # each was dead-lettered (their creation time here) and its id.
            shown, following = in_memory(
                requested("dead_letters", page),
                letters.list(),
                key=lambda letter: (letter.dead_since_ms, letter.id),
                created=lambda letter: datetime.fromtimestamp(letter.dead_since_ms / 1000, UTC),
            )
            return 200, {"dead_letters": [letter.summary(now_ms) for letter in shown], "next": following}
        letter = letters.find(letter_id)
        if letter is None:
            raise DeadLetterNotFound(f"no dead letter {letter_id!r} (replayed or purged already?)")
        if verb == "show":
            return 200, {**letter.detail(now_ms), "replay_would": letters.outlook(letter, now_ms)}
        outlook = letters.outlook(letter, now_ms)
        done = letters.replay(letter) if verb == "replay" else letters.purge(letter)
        return 200, {"id": letter.id, "done": done, "outlook": outlook if verb == "replay" else None}

    answer_request(request_id, gateway_id, act)


def sweep_dead_letter_counts() -> int:
    """Publish the dead letters' counts for the gateway's gauge (routine: reports nothing)."""
    dead_letters_.publish_counts(_runtime.broker.client, _runtime.settings.broker_namespace)
    return 0


sweeps.add(sweep_dead_letter_counts, 10.0, name="dead-letter-counter", report=None)
