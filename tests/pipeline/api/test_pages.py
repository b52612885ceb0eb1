"""How every list is paged, decided without a database: the cursor comes back as the key it was
made from and nothing else passes for one; a page request's bounds; and a list held whole, paged
while items are added, yields each item once, in order."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from pipeline.api.pages import (
    KEYS,
    PageRequest,
    cursor_position,
    in_memory,
    instant,
    page_cursor,
    requested,
)
from pipeline.call.errors import MalformedRequest

AT = datetime(2026, 12, 4, 20, 31, 49, 123456, tzinfo=UTC)


def _forged(*parts: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


def test_a_cursor_comes_back_as_the_key_it_was_made_from_and_a_forged_one_is_refused() -> None:
    """Opaque but exact, for every list's key; anything else is a malformed request, a cursor
    of another list included (its key would be read as this list's)."""
    examples = {
        "sessions": (AT, "sess_abc"),
        "campaigns": (AT, "camp_1"),
        "routes": ("+15550100",),
        "trunks": ("main",),
        "agents": ("support",),
        "suppressions": ("+15550100",),
        "contacts": (41,),
        "dead_letters": (1_700_000_000_000, "msg-1"),
    }
    assert set(examples) == set(KEYS)
    for listing, key in examples.items():
        assert cursor_position(listing, page_cursor(listing, *key)) == key
    for listing, cursor in (
        ("sessions", "not-a-cursor"),
        ("sessions", page_cursor("campaigns", AT, "camp_1")),
        ("routes", _forged("routes", 5)),
        ("routes", _forged("routes", "+1", "extra")),
        ("routes", _forged("routes", "nul\x00inside")),
        ("contacts", _forged("contacts", "7")),
        ("contacts", _forged("contacts", True)),
        ("sessions", _forged("sessions", "yesterday", "sess_abc")),
        ("trunks", _forged({"trunks": 1})),
    ):
        with pytest.raises(MalformedRequest):
            cursor_position(listing, cursor)


def test_a_page_request_is_bounded_and_a_list_without_creation_times_takes_no_range() -> None:
    assert requested("routes", {}) == PageRequest("routes", 100)
    assert requested("routes", {"limit": "500"}).limit == 500
    assert requested("suppressions", {"limit": "1000"}).limit == 1_000
    for listing, limit in (("routes", "501"), ("routes", "0"), ("routes", "-1"), ("contacts", "1001")):
        with pytest.raises(MalformedRequest):
            requested(listing, {"limit": limit})
    asked = requested(
        "trunks", {"created_after": "2026-12-04T20:00:00", "created_before": "2026-12-05T00:00Z"}
    )
    assert asked.created_after == datetime(2026, 12, 4, 20, tzinfo=UTC)
    assert asked.created_before == datetime(2026, 12, 5, tzinfo=UTC)
    with pytest.raises(MalformedRequest):
        requested("contacts", {"created_after": "2026-12-04T20:00:00"})
    with pytest.raises(MalformedRequest):
        instant("yesterday", "created_after")
    # What the gateway sends a worker reads back as the same request.
    cursor = page_cursor("campaigns", AT, "camp_1")
    asked = requested("campaigns", {"limit": "3", "cursor": cursor, "created_after": AT.isoformat()})
    assert requested("campaigns", asked.as_query()) == asked


@dataclass(frozen=True)
class _Letter:
    at_ms: int
    id: str

    @property
    def created(self) -> datetime:
        return datetime.fromtimestamp(self.at_ms / 1000, UTC)


def _page(page: PageRequest, items: list[_Letter]) -> tuple[list[_Letter], str | None]:
    return in_memory(page, items, key=lambda item: (item.at_ms, item.id), created=lambda item: item.created)


def test_a_list_paged_while_items_are_added_yields_each_item_once_in_order() -> None:
    """Dead letters (held whole, not in PostgreSQL): two share a time; more arrive, one of them
    older than the page already read, between pages; a time range filters on their time."""
    items = [_Letter(1_000 + 10 * (index // 2), f"m{index:02d}") for index in range(9)]
    seen: list[_Letter] = []
    page = requested("dead_letters", {"limit": "2"})
    while True:
        shown, following = _page(page, items)
        seen += shown
        if following is None:
            break
        items = [*items, _Letter(999, f"old{len(seen)}"), _Letter(5_000 + len(seen), f"new{len(seen)}")]
        page = requested("dead_letters", {"limit": "2", "cursor": following})
    keys = [(letter.at_ms, letter.id) for letter in seen]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert {f"m{index:02d}" for index in range(9)} <= {letter.id for letter in seen}
    assert not any(letter.id.startswith("old") for letter in seen)
    # created_after is inclusive, created_before exclusive.
    ranged = requested(
        "dead_letters",
        {"created_after": "1970-01-01T00:00:01.010Z", "created_before": "1970-01-01T00:00:01.030Z"},
    )
    shown, following = _page(ranged, items)
    assert [letter.id for letter in shown] == ["m02", "m03", "m04", "m05"] and following is None
