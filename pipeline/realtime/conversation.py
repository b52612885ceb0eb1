"""The conversation as one Realtime sideband has seen it grow: where each item was put
(`previous_item_id`) and whether it bears a line, so that each final transcript can be given its
place in the conversation (`pipeline.call.conversation_order`).

An item is placed when it is first announced — `conversation.item.added`, or for the caller's
audio `input_audio_buffer.committed`, which comes just before it — since `conversation.item.done`
may name no previous item. Sans I/O; on the hot path a dictionary write per item added and a
short walk per final.
"""

from __future__ import annotations

from typing import Any

from pipeline.call.conversation_order import ConversationPlace

# Items remembered per sideband: a long call's whole conversation (compaction keeps the provider's
# far shorter); the oldest is forgotten first, and a final whose item was forgotten keeps its
# arrival order in the record.
REMEMBERED_ITEMS = 4_096

# The roles of the messages that bear a line of the record.
_LINE_ROLES = frozenset({"user", "assistant"})
# The events that announce an item and where it was put: the only ones `see` looks at.
ANNOUNCING_TYPES = frozenset({"conversation.item.added", "input_audio_buffer.committed"})


class ConversationChain:
    """The items one sideband has seen added, each with the item it was put after."""

    def __init__(self) -> None:
        # item id → (the item it was put after, whether it bears a line); oldest first.
        self._items: dict[str, tuple[str | None, bool]] = {}

    def see(self, event_type: str, event: dict[str, Any]) -> None:
        """Note the item an event announces, if it announces one not seen before."""
        if event_type == "conversation.item.added":
            item = event.get("item")
            if not isinstance(item, dict):
                return
            item_id = item.get("id")
            bears_line = item.get("type") == "message" and item.get("role") in _LINE_ROLES
        elif event_type == "input_audio_buffer.committed":
            # The caller's words, committed as a user audio message.
            item_id, bears_line = event.get("item_id"), True
        else:
            return
        previous = event.get("previous_item_id")
        if not isinstance(item_id, str) or item_id in self._items:
            return
        self._items[item_id] = (previous if isinstance(previous, str) else None, bears_line)
        if len(self._items) > REMEMBERED_ITEMS:
            del self._items[next(iter(self._items))]

    def place_of(self, item_id: str) -> ConversationPlace | None:
        """Where an item's line goes: after the nearest item before it that bears a line (past
        function calls and their outputs), first when none does; None when the item was never
        seen added. An item before it that was never seen is named as it is: the record finds
        its line, or keeps the arrival order."""
        known = self._items.get(item_id)
        if known is None:
            return None
        after = known[0]
        for _step in range(len(self._items)):
            before = self._items.get(after) if after is not None else None
            if before is None or before[1]:
                break
            after = before[0]
        # Built without validation: `after` is a string or None by construction.
        return ConversationPlace.model_construct(after=after)
