"""Deployments may share a database: every read or lock of a session by id that a worker makes
names its deployment (`namespace=`), so no request of one deployment reaches another's call.
The walk of every route with another deployment's ids (tests/e2e/test_deployments_apart.py)
proves today's routes; this holds tomorrow's code to the same rule. (The CLI's `sessions show`,
`log` and `export` read the database as its administrator, whoever has its URL: any
deployment's session, such as one a replay made in a namespace of its own.)"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The readers and locks of a session by its id, and the deliveries that read one.
SCOPED = frozenset({"locked_session", "locked_for", "session_record", "call_log", "deliver", "sweep"})
# `deliver` and `sweep` are also names of other things: only these modules' are the readers.
OWNERS = {"deliver": ("app_webhooks",), "sweep": ("event_streams",)}


def _calls(tree: ast.AST) -> list[tuple[str, str, ast.Call]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name):
            found.append(("", function.id, node))
        elif isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
            found.append((function.value.id, function.attr, node))
    return found


def test_every_read_of_a_session_by_id_in_the_workers_names_the_deployment() -> None:
    unscoped = []
    for path in sorted((ROOT / "workers").rglob("*.py")):
        for owner, name, call in _calls(ast.parse(path.read_text())):
            if name not in SCOPED or (name in OWNERS and owner not in OWNERS[name]):
                continue
            if not any(keyword.arg == "namespace" for keyword in call.keywords):
                unscoped.append(f"{path.relative_to(ROOT)}:{call.lineno} {name}(…)")
    assert unscoped == [], "a session read by id with no namespace=: " + ", ".join(unscoped)


def test_the_rule_sees_a_read_that_names_no_deployment() -> None:
    """The positive control: an unscoped read is found."""
    calls = _calls(ast.parse("with locked_session(session_id) as s:\n    session_record(s.id)\n"))
    names = [name for _, name, call in calls if not call.keywords]
    assert names == ["locked_session", "session_record"]
