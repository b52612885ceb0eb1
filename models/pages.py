"""A page of a list read from PostgreSQL: the keyset conditions every list's query shares (the
cursor and the paging rules are `pipeline.api.pages`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.api.pages import PageRequest


@dataclass(frozen=True)
class PageSql:
    """What a list's query adds for a page: `where` (conditions, each led by AND, to follow
    the list's own), `order` (ORDER BY … LIMIT …, one row more than the page, so the page
    knows whether another follows) and their named parameters (all `page_…`)."""

    where: str
    order: str
    parameters: dict[str, Any]


def keyset(
    page: PageRequest, keys: Sequence[str], *, created: str | None = None, descending: bool = False
) -> PageSql:
    """A page of a query ordered by the columns `keys` (together unique in the list): the rows
    after the cursor's key in that order, created (the column `created`) in the asked range."""
    where: list[str] = []
    parameters: dict[str, Any] = {"page_limit": page.limit + 1}
    if page.after is not None:
        names = [f"page_key_{index}" for index in range(len(keys))]
        parameters.update(zip(names, page.after, strict=True))
        sign = "<" if descending else ">"
        theirs = ", ".join(f"%({name})s" for name in names)
        where.append(f"AND ({', '.join(keys)}) {sign} ({theirs})")
    if created is not None and page.created_after is not None:
        where.append(f"AND {created} >= %(page_created_after)s")
        parameters["page_created_after"] = page.created_after
    if created is not None and page.created_before is not None:
        where.append(f"AND {created} < %(page_created_before)s")
        parameters["page_created_before"] = page.created_before
    direction = " DESC" if descending else ""
    order = f"ORDER BY {', '.join(key + direction for key in keys)} LIMIT %(page_limit)s"
    return PageSql(" ".join(where), order, parameters)
