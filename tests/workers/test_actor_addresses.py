"""The rooms reach each other's actors by name: every name the commit path sends by is an actor
its room declares, on the queue the message goes to, with the message its actor would make."""

from __future__ import annotations

from typing import Any


def test_each_actor_reached_by_name_is_declared_on_that_queue(worker_runtime: Any) -> None:
    """An address names a declared actor and its queue: a message sent by name is taken up by
    that actor, as one its own `send` would have made."""
    from workers.actors.shared import ADDRESSES

    broker = worker_runtime.broker
    for address in ADDRESSES:
        actor = broker.get_actor(address.actor_name)
        assert actor.queue_name == address.queue_name
        by_name = address.message({"session_id": "sess_1"}, max_retries=3)
        own = actor.message_with_options(kwargs={"session_id": "sess_1"}, max_retries=3)
        assert (by_name.queue_name, by_name.actor_name, by_name.args, by_name.kwargs, by_name.options) == (
            own.queue_name,
            own.actor_name,
            own.args,
            own.kwargs,
            own.options,
        )


def test_quick_tools_run_inline_through_the_tools_room(worker_runtime: Any) -> None:
    """The tools room gives the commit path its inline run as it is imported: without it a quick
    tool's body would wait for its backup message on tool_runs."""
    from workers.actors import shared, tools

    assert shared._inline_runs == [tools._run_inline]
