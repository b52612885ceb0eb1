"""How every list of the API is paged: `limit`, an opaque `cursor` (the `next` of the page before),
`created_after` / `created_before`; and the cursor itself, one encoding for every list.

A page is a keyset read: it starts after the last item of the page before, in the list's own
order, so an item added or removed while a client pages through moves no other item between
pages (an offset would skip or repeat one). The cursor holds that last item's sort key and the
list's name, so a cursor of one list given to another is refused, not read as something else.

Each list keeps the order it has always had (its sort key below); a list whose items have no
creation time (a campaign's contacts) takes no `created_after` / `created_before`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from pipeline.call.errors import MalformedRequest

DEFAULT_LIMIT = 100
MAXIMUM_LIMIT = 500
# The lists that took up to 1,000 before cursors keep that bound (their clients ask for it).
MAXIMUM_LIMIT_OF = {"contacts": 1_000, "suppressions": 1_000}

# Each list's sort key, as the cursor holds it (a time is ISO 8601 text in the cursor).
KEYS: dict[str, tuple[type, ...]] = {
    "sessions": (datetime, str),  # created_at, id: newest first
    "campaigns": (datetime, str),  # created_at, id: newest first
    "routes": (str,),  # number
    "trunks": (str,),  # name
    "agents": (str,),  # name
    "suppressions": (str,),  # number
    "contacts": (int,),  # position in the campaign
    "dead_letters": (int, str),  # when it was dead-lettered (ms), id: oldest first
}
# Lists whose items have no creation time to filter on.
UNDATED = frozenset({"contacts"})

Key = datetime | str | int
Item = TypeVar("Item")


@dataclass(frozen=True)
class PageRequest:
    """What a client asked of a list: at most `limit` items, those after `after` (the sort key
    of the last item of the page before; None: from the start), created in [after, before)."""

    listing: str
    limit: int = DEFAULT_LIMIT
    after: tuple[Key, ...] | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None

    def as_query(self) -> dict[str, Any]:
        """The request as plain values for a worker's message (`requested` reads them back)."""
        return {
            "limit": self.limit,
            "cursor": page_cursor(self.listing, *self.after) if self.after is not None else "",
            "created_after": self.created_after.isoformat() if self.created_after else "",
            "created_before": self.created_before.isoformat() if self.created_before else "",
        }


def requested(listing: str, query: Mapping[str, Any] | None) -> PageRequest:
    """A list's page request from a query string's (or a worker message's) values: `limit`,
    `cursor`, `created_after`, `created_before`, each optional. MalformedRequest for a limit out
    of bounds, a cursor this API never gave for this list, or a time that is not ISO 8601."""
    query = query or {}
    maximum = MAXIMUM_LIMIT_OF.get(listing, MAXIMUM_LIMIT)
    limit = str(query.get("limit") or DEFAULT_LIMIT)
    if not limit.isdigit() or not 1 <= int(limit) <= maximum:
        raise MalformedRequest(f"limit must be 1 to {maximum}")
    bounds = {name: str(query.get(name) or "") for name in ("created_after", "created_before")}
    if listing in UNDATED and any(bounds.values()):
        raise MalformedRequest(
            f"{listing} have no creation time, so created_after and created_before do not apply"
        )
    cursor = str(query.get("cursor") or "")
    return PageRequest(
        listing,
        int(limit),
        cursor_position(listing, cursor) if cursor else None,
        instant(bounds["created_after"], "created_after") if bounds["created_after"] else None,
        instant(bounds["created_before"], "created_before") if bounds["created_before"] else None,
    )


def page_cursor(listing: str, *key: Key) -> str:
    """The opaque cursor of the page after the item whose sort key is `key`."""
    shown = [part.isoformat() if isinstance(part, datetime) else part for part in key]
    raw = json.dumps([listing, *shown], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_position(listing: str, cursor: str) -> tuple[Key, ...]:
    """The sort key a cursor of this list says the next page starts after (MalformedRequest for
    one this API never gave for it)."""
    shape = KEYS[listing]
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        decoded = json.loads(raw)
        if not isinstance(decoded, list) or decoded[:1] != [listing] or len(decoded) != len(shape) + 1:
            raise ValueError("another list's cursor, or none")
        return tuple(_key_part(kind, part) for kind, part in zip(shape, decoded[1:], strict=True))
    except (ValueError, TypeError, binascii.Error, RecursionError) as error:
        raise MalformedRequest(f"cursor {cursor[:40]!r} is not one this API gave for {listing}") from error


def _key_part(kind: type, part: Any) -> Key:
    if kind is datetime and isinstance(part, str):
        return datetime.fromisoformat(part)
    if kind is int and isinstance(part, int) and not isinstance(part, bool):
        return part
    if kind is str and isinstance(part, str) and "\x00" not in part:
        return part
    raise ValueError(f"not a {kind.__name__}: {part!r}")


def next_cursor(
    page: PageRequest, rows: Sequence[Item], key: Callable[[Item], tuple[Key, ...]]
) -> str | None:
    """The `next` of a page read with one row more than its limit: the cursor after its last
    item, or None when that extra row is missing (the list ends here)."""
    if len(rows) <= page.limit:
        return None
    return page_cursor(page.listing, *key(rows[page.limit - 1]))


def in_memory(
    page: PageRequest,
    items: Sequence[Item],
    key: Callable[[Item], tuple[Key, ...]],
    created: Callable[[Item], datetime],
) -> tuple[list[Item], str | None]:
    """A page of a list held whole (not in PostgreSQL): `items` in ascending `key` order, those
    after the cursor and created in the asked range, and the next page's cursor."""
    chosen = [
        item
        for item in sorted(items, key=lambda item: _ascending(key(item)))
        if (page.after is None or _ascending(key(item)) > _ascending(page.after))
        and (page.created_after is None or created(item) >= page.created_after)
        and (page.created_before is None or created(item) < page.created_before)
    ]
    chosen = chosen[: page.limit + 1]
    return chosen[: page.limit], next_cursor(page, chosen, key)


def _ascending(key: tuple[Key, ...]) -> tuple[str | int | float, ...]:
    return tuple(part.timestamp() if isinstance(part, datetime) else part for part in key)


def instant(text: str, name: str) -> datetime:
    """An ISO 8601 time from a query (UTC when it names no zone)."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as error:
        raise MalformedRequest(f"{name} must be an ISO 8601 time, not {text[:40]!r}") from error
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
