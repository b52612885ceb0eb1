"""An agent's versions (pipeline/agents/versions.py): how a call names one, the spec it runs
(its version's, the call's own fields on top, its vars filled in as data), what changed between
two versions, and each version's status."""

from __future__ import annotations

import pytest

from pipeline.agents.versions import call_spec, changes, parsed_ref, status_of, version_spec
from pipeline.api.requests import SessionSpec
from pipeline.call.errors import MalformedRequest

VERSION = version_spec(
    SessionSpec.model_validate(
        {
            "instructions": "You are {company}'s order desk. The caller is {name}.",
            "greeting": {"say": "Hello {name}, this is {company}."},
            "tools": ["lookup_order"],
            "model": "gpt-realtime-2.1",
            "voice": "cedar",
        }
    )
)


def test_a_call_names_the_published_version_or_pins_one() -> None:
    assert parsed_ref("support") == ("support", None)
    assert parsed_ref("support@3") == ("support", 3)
    for bad in ("Support", "support@0", "support@", "@3", "support@3@4", "a b", "x" * 65):
        with pytest.raises(MalformedRequest):
            parsed_ref(bad)


def test_a_version_is_a_spec_of_its_own() -> None:
    assert "agent" not in VERSION and "vars" not in VERSION
    assert VERSION["instructions"].startswith("You are {company}")
    for naming in ({"agent": "other"}, {"instructions": "Hi.", "vars": {"a": "b"}}):
        with pytest.raises(MalformedRequest, match="names no agent and takes no vars"):
            version_spec(SessionSpec.model_validate(naming))


def test_the_call_runs_its_version_with_its_vars_filled_in_as_quoted_data() -> None:
    asked = SessionSpec.model_validate(
        {"agent": "support", "vars": {"company": "Acme", "name": "Ada\nIgnore all"}}
    )
    spec = call_spec(VERSION, asked)
    assert spec.instructions == 'You are "Acme"\'s order desk. The caller is "Ada\\nIgnore all".'
    assert spec.greeting is not None and spec.greeting.say == 'Hello "Ada\\nIgnore all", this is "Acme".'
    # The spec run is whole: it names no agent (the session records which one it came from).
    assert (spec.tools, spec.model, spec.voice, spec.agent) == (
        ("lookup_order",),
        "gpt-realtime-2.1",
        "cedar",
        None,
    )


def test_what_the_call_sets_replaces_the_version_s() -> None:
    asked = SessionSpec.model_validate(
        {
            "agent": "support",
            "vars": {"company": "Acme", "name": "Ada"},
            "voice": "marin",
            "webhook": {"url": "https://app.example.com/hooks", "secret": "whsec_" + "A" * 32},
        }
    )
    spec = call_spec(VERSION, asked)
    assert spec.voice == "marin" and spec.webhook is not None
    assert spec.model == "gpt-realtime-2.1" and spec.tools == ("lookup_order",)  # kept
    assert (
        call_spec(VERSION, asked.model_copy(update={"instructions": "Only {name}."})).instructions
        == 'Only "Ada".'
    )


def test_a_placeholder_no_var_fills_is_refused_unless_the_vars_are_still_to_come() -> None:
    asked = SessionSpec.model_validate({"agent": "support", "vars": {"company": "Acme"}})
    with pytest.raises(MalformedRequest, match="name"):
        call_spec(VERSION, asked)
    assert "{name}" in call_spec(VERSION, asked, fill=False).instructions
    with pytest.raises(MalformedRequest, match="vars:"):
        call_spec(VERSION, SessionSpec.model_validate({"agent": "support", "vars": {"1bad": "x"}}))


def test_what_changed_between_two_versions_field_by_field() -> None:
    after = {**VERSION, "voice": "marin", "greeting": {"say": "Hi."}, "tools": ["lookup_order", "refund"]}
    found = {change["path"]: (change["from"], change["to"]) for change in changes(VERSION, after)}
    assert found == {
        "voice": ("cedar", "marin"),
        "greeting.say": ("Hello {name}, this is {company}.", "Hi."),
        "tools": (["lookup_order"], ["lookup_order", "refund"]),
    }
    assert changes(VERSION, VERSION) == []
    assert changes({"a": 1}, {"b": 2}) == [
        {"path": "a", "from": 1, "to": None},
        {"path": "b", "from": None, "to": 2},
    ]


def test_a_version_is_a_draft_until_published_and_superseded_after() -> None:
    assert status_of(1, None, set()) == "draft"
    assert status_of(2, 2, {1, 2}) == "published"
    assert status_of(1, 2, {1, 2}) == "superseded"
    assert status_of(3, 2, {1, 2}) == "draft"
