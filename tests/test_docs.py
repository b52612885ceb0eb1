"""The docs speak of Switchboard and of the repository only: no link leaves it, every file they
link to exists, and every API route they name is a route of the API's description."""

from __future__ import annotations

import re
from pathlib import Path

from gateway import openapi

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")])
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
# A route named with its method: `POST /v1/sessions/{id}/caller/text`.
NAMED_ROUTE = re.compile(r"\b(GET|POST|PUT|DELETE) (/v1/[A-Za-z0-9_\-{}/.:|\[\]]*[A-Za-z0-9_}\]])")


def test_no_doc_links_outside_the_repository() -> None:
    """No web link, no path out of the checkout (a sibling folder is nobody else's)."""
    leaving = []
    for doc in DOCS:
        text = doc.read_text()
        leaving += [f"{doc.name}: {target}" for target in MARKDOWN_LINK.findall(text) if "://" in target]
        leaving += [f"{doc.name}: ../{rest}" for rest in re.findall(r"\.\./(shared\S*)", text)]
    assert leaving == []


def test_every_file_a_doc_links_to_exists() -> None:
    missing = []
    for doc in DOCS:
        for target in MARKDOWN_LINK.findall(doc.read_text()):
            path = target.split("#", 1)[0]
            if path and not (doc.parent / path).exists():
                missing.append(f"{doc.name}: {target}")
    assert missing == []


def test_every_route_a_doc_names_is_a_route_of_the_api() -> None:
    """A route named in the docs (`POST /v1/sessions/{id}/say` once was, which never existed) is
    one the API's description has, with that method. The provider's own REST (`/v1/realtime/…`,
    `/v1/live/…`), which the docs describe too, is not Switchboard's."""
    described = [
        (method.upper(), re.compile(re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(path)) + "$"))
        for path, operations in openapi.document()["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "delete")
    ]
    unknown = []
    for doc in DOCS:
        for method, path in NAMED_ROUTE.findall(doc.read_text()):
            if path.startswith(("/v1/realtime/", "/v1/live/")):
                continue
            for named in _routes_in(path):
                if not any(m == method and pattern.match(named) for m, pattern in described):
                    unknown.append(f"{doc.name}: {method} {named}")
    assert unknown == []


def _routes_in(path: str) -> list[str]:
    """The routes a path as written names: `/v1/campaigns[/{id}]` two, `…/pause|resume` two."""
    path = path.split("?", 1)[0]
    while path.count("}") > path.count("{"):
        path = path[:-1]  # a brace of the JSON around it: `{…as POST /v1/sessions}`
    forms = {path.replace("[", "").replace("]", ""), re.sub(r"\[[^]]*\]", "", path)}
    named = []
    for form in forms:
        head, _, last = form.rpartition("/")
        named += [f"{head}/{choice}" for choice in last.split("|")]
    return named
