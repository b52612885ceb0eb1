"""What one release reads of another's messages and stored state (pipeline.releases): a field
or a directive kind it does not know is dropped and named; everything else reads as usual; a
wrong value of a known field still raises."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.envelope import EventEnvelope, SendControl, ToGateway
from pipeline.releases import across_releases, first_report
from pipeline.state import SessionState
from tests.pipeline.events import (
    assistant_final,
    listening,
    response_created,
    response_done,
    speech_started,
    state_after,
    user_final,
)


def _talked() -> SessionState:
    """A state with a turn behind it and one in progress: its nested models filled."""
    return state_after(
        [
            *listening(),
            speech_started("item_u1"),
            user_final("item_u1", "Where is my order?"),
            response_created("resp_1"),
            assistant_final("resp_1", "item_a1", "It ships on Friday."),
            response_done("resp_1"),
            speech_started("item_u2"),
            user_final("item_u2", "And the invoice?"),
            response_created("resp_2"),
        ]
    )


def _objects(tree: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every JSON object in `tree`."""
    if isinstance(tree, dict):
        return [path, *(found for key, value in tree.items() for found in _objects(value, (*path, key)))]
    if isinstance(tree, list):
        return [found for index, value in enumerate(tree) for found in _objects(value, (*path, index))]
    return []


def _with_field(place: tuple[Any, ...], name: str, value: Any) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(STATE.model_dump_json())
    target: Any = stored
    for step in place:
        target = target[step]
    target[name] = value
    return stored


def _is_a_model(place: tuple[Any, ...]) -> bool:
    """Whether the object at `place` is a model's (whose fields are fixed), not a mapping's
    (whose keys are data: `tool_versions`)."""
    try:
        SessionState.model_validate(_with_field(place, "probe", 1))
    except ValidationError as error:
        return [each["type"] for each in error.errors()] == ["extra_forbidden"]
    return False


STATE = _talked()
PLACES = [place for place in _objects(json.loads(STATE.model_dump_json())) if _is_a_model(place)]


def test_what_this_release_wrote_reads_as_it_is_and_drops_nothing() -> None:
    assert across_releases(SessionState, STATE.model_dump_json()) == (STATE, ())
    assert ("turn",) in PLACES and ("usage",) in PLACES  # the property below walks real nesting


@settings(max_examples=200, deadline=None)
@given(
    place=st.sampled_from(PLACES),
    name=st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
    value=st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none(), st.just({"deep": [1]})),
)
def test_a_field_added_anywhere_in_a_stored_state_reads_back_the_same_state(
    place: tuple[Any, ...], name: str, value: Any
) -> None:
    """The state a worker of the next release stored, with one field more at any depth, is the
    state this release stored: the field named, nothing else changed."""
    model_there: Any = json.loads(STATE.model_dump_json())
    for step in place:
        model_there = model_there[step]
    if name in model_there:
        return  # a field of the model there already
    stored = _with_field(place, name, value)
    state, dropped = across_releases(SessionState, json.dumps(stored))
    assert state == STATE
    assert dropped == (".".join(map(str, (*place, name))),)


def test_a_batch_keeps_the_items_it_knows_in_order() -> None:
    batch = {
        "session_id": "sess_1",
        "generation": 2,
        "applied_seq": 7,
        "shiny": 1,
        "items": [
            {"kind": "control", "id": "a", "control": {"type": "response.create"}, "priority": 1},
            {"kind": "teleport", "id": "b"},
            {"kind": "teleport", "id": "c"},
            {"kind": "control", "id": "d", "control": {"type": "response.cancel", "priority": 5}},
        ],
    }
    read, dropped = across_releases(ToGateway, json.dumps(batch))
    assert read == ToGateway(
        session_id="sess_1",
        generation=2,
        applied_seq=7,
        items=(
            SendControl(id="a", control={"type": "response.create"}),
            # A control's own body is the provider's: what is in it is carried as it is.
            SendControl(id="d", control={"type": "response.cancel", "priority": 5}),
        ),
    )
    assert dropped == ("items.0.priority", "items.1 of kind teleport", "items.2 of kind teleport", "shiny")


def test_a_wrong_value_of_a_known_field_is_still_refused() -> None:
    envelope = {
        "session_id": "sess_1",
        "seq": 0,  # seq starts at 1
        "generation": 1,
        "gateway_id": "gw1",
        "received_at": 1.0,
        "event": {},
        "added": True,
    }
    with pytest.raises(ValidationError):
        across_releases(EventEnvelope, envelope)
    read, dropped = across_releases(EventEnvelope, {**envelope, "seq": 1})
    assert (read.seq, dropped) == (1, ("added",))
    assert "added" in envelope  # the caller's message is not changed


def test_each_name_is_reported_once_whatever_the_position() -> None:
    first = first_report("a test batch", ("items.3.priority", "shiny"))
    assert (
        first
        == "a test batch of another release: ignored what this release does not know (items.priority, shiny)"
    )
    assert first_report("a test batch", ("items.0.priority",)) is None
    assert first_report("a test batch", ("items.0.priority", "items.2 of kind teleport")) is not None
