"""A call's lines in the conversation's order, whatever order their final transcripts came in.

A Realtime conversation is a chain of items: each `conversation.item.added` names the item it
was put after (`previous_item_id`). The finals do not keep that order. With server VAD a short
line is transcribed before the longer one said just before it ("Please look it up." before the
question it follows), and an answer cut short by a barge-in is done before the caller's line it
answered has been transcribed. So the gateway, which sees every item added, notes each final's
**place**: the line-bearing item (a user or assistant message) it comes after in the
conversation, passing over the items that bear no line (a function call and its output), or none
when it opens the conversation. The place rides on the final's durable event (the gateway's own
field, like `playback`), so keeping it costs no statement, and the record is put in order when
it is read:

- A line with a place follows the line of the item it names (its latest line, when an item has
  several): lines that follow the same one keep their arrival order.
- A line without one — the gateway did not see its item added (it attached later, it took the
  call over, the provider is Live), or its place names an item with no line (a transcription
  that failed), or a place would make a circle — follows the line that arrived just before it,
  as every line did before places were noted. A line that opens the conversation follows none,
  and so does the earliest line of places that lead in a circle.

Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

# The field the gateway adds to a final's event: its `ConversationPlace`.
PLACE_FIELD = "place"


class ConversationPlace(BaseModel):
    """Where a line's item is in the conversation: after the item `after` (the nearest one
    that bears a line), or first (`after` None)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    after: str | None = None


@dataclass(frozen=True)
class PlacedLine:
    """A stored line as the order needs it: its item, and its place when one was noted."""

    item_id: str
    place: ConversationPlace | None


def place_of(event: dict[str, Any] | None) -> ConversationPlace | None:
    """The place the gateway noted on a logged event (None when it noted none, or a malformed
    one: the line then keeps its arrival order)."""
    raw = (event or {}).get(PLACE_FIELD)
    if not isinstance(raw, dict):
        return None
    try:
        return ConversationPlace.model_validate(raw)
    except ValidationError:
        return None


def in_conversation_order(lines: Sequence[PlacedLine]) -> list[int]:
    """The indexes of `lines` (given in arrival order) in the conversation's order."""
    latest_line_of = {line.item_id: index for index, line in enumerate(lines)}
    # Each line's parent: the line it follows (-1: it follows none).
    parents = [_followed(index, line, latest_line_of) for index, line in enumerate(lines)]
    _break_circles(parents)
    children: dict[int, list[int]] = {}
    for index, parent in enumerate(parents):
        children.setdefault(parent, []).append(index)
    ordered: list[int] = []
    waiting = list(reversed(children.get(-1, [])))
    while waiting:
        index = waiting.pop()
        ordered.append(index)
        waiting.extend(reversed(children.get(index, [])))
    return ordered


def _followed(index: int, line: PlacedLine, latest_line_of: dict[str, int]) -> int:
    """The line `line` follows: its place's, else the one that arrived just before it."""
    if line.place is not None and line.place.after is None:
        return -1
    if line.place is not None and line.place.after is not None:
        followed = latest_line_of.get(line.place.after)
        if followed is not None and followed != index:
            return followed
    return index - 1


def _break_circles(parents: list[int]) -> None:
    """Places that lead in a circle (no provider should send them) cannot all be kept: the
    earliest line of each circle follows none. One walk over the lines."""
    unseen, walking, settled = 0, 1, 2
    states = [unseen] * len(parents)
    for start in range(len(parents)):
        path: list[int] = []
        index = start
        while index != -1 and states[index] == unseen:
            states[index] = walking
            path.append(index)
            index = parents[index]
        if index != -1 and states[index] == walking:
            parents[min(path[path.index(index) :])] = -1
        for walked in path:
            states[walked] = settled
