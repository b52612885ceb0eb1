"""An agent's versions: how a call names one (`support`, `support@3`), the session spec a call
runs (its version's, with what the call itself sets on top, its vars filled in as data), and
what changed between two versions."""

from __future__ import annotations

import re
from typing import Any, Literal

from pipeline.api.requests import AGENT_NAME, SessionSpec
from pipeline.call.errors import MalformedRequest
from pipeline.outbound.vars import checked_vars, filled

_REF = re.compile(rf"^({AGENT_NAME})(?:@([1-9][0-9]{{0,8}}))?$")
# What a call sets besides the spec: never taken from (or stored in) a version.
CALL_ONLY = frozenset({"agent", "vars"})

VersionStatus = Literal["draft", "published", "superseded"]


def parsed_ref(ref: str) -> tuple[str, int | None]:
    """`support` → ("support", None): the published version; `support@3` → ("support", 3)."""
    matched = _REF.fullmatch(ref)
    if matched is None:
        raise MalformedRequest(f"agent: {ref!r} is not an agent's name, or a name@version")
    return matched.group(1), int(matched.group(2)) if matched.group(2) else None


def version_spec(asked: SessionSpec) -> dict[str, Any]:
    """What a version stores of a spec: everything a session body says but an agent to name
    and vars (a version is the agent; a call brings its vars)."""
    if asked.agent is not None or asked.vars is not None:
        raise MalformedRequest("a version is a session spec of its own: it names no agent and takes no vars")
    return asked.model_dump(mode="json", exclude=set(CALL_ONLY), exclude_defaults=True)


def call_spec(version: dict[str, Any], asked: SessionSpec, *, fill: bool = True) -> SessionSpec:
    """The spec a call runs: its version's, each field the call sets to other than its default
    replacing the version's (a webhook of the app's, a greeting of the day), and the call's vars
    filled into the instructions and greeting as quoted data (a placeholder no var fills is
    refused, as a campaign's is; not `fill`: its vars are still to come, a campaign's contacts')."""
    own = {
        name: getattr(asked, name)
        for name, field in SessionSpec.model_fields.items()
        if name not in CALL_ONLY
        and name != "instructions"
        and getattr(asked, name) != field.get_default(call_default_factory=True)
    }
    if asked.instructions:
        own["instructions"] = asked.instructions
    merged = SessionSpec.model_validate({**version, **{name: _plain(value) for name, value in own.items()}})
    if not fill:
        return merged
    try:
        values = checked_vars(asked.vars or {})
    except ValueError as refused:
        raise MalformedRequest(f"vars: {refused}") from refused
    return filled(merged, values)


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def status_of(version: int, published: int | None, ever_published: set[int]) -> VersionStatus:
    """A version is a draft until it is published; it is superseded once another is."""
    if version == published:
        return "published"
    return "superseded" if version in ever_published else "draft"


def changes(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """What differs between two versions' specs, field by field (`greeting.say`), each with its
    value before and after (absent: null); lists compare whole."""
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[dict[str, Any]] = []
        for key in sorted(set(before) | set(after)):
            found.extend(changes(before.get(key), after.get(key), f"{path}.{key}" if path else key))
        return found
    return [] if before == after else [{"path": path, "from": before, "to": after}]
