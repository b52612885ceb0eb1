"""What one release reads of another's messages and stored state (pipeline.platform.releases): a field
or a directive kind it does not know is dropped and named; everything else reads as usual; a
wrong value of a known field still raises; a field moved into a nested model is read at either
place and stored where the release before reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.platform.envelope import EventEnvelope, SendControl, ToGateway
from pipeline.platform.releases import MOVED, across_releases, as_stored, first_report
from pipeline.session.state import RealtimeCall, SessionState
from tests.pipeline import test_properties
from tests.pipeline.before_the_move import (
    ADDED_SINCE,
    FIELDS_BEFORE_THE_MOVE,
    STORED_BEFORE_THE_MOVE,
    StateBeforeTheMove,
    read_by_the_release_before,
    without_the_added,
)
from tests.pipeline.events import (
    assistant_final,
    fold,
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


def _with_field(
    place: tuple[Any, ...], name: str, value: Any, stored_json: str | None = None
) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(as_stored(STATE) if stored_json is None else stored_json)
    target: Any = stored
    for step in place:
        target = target[step]
    target[name] = value
    return stored


def _is_a_model(place: tuple[Any, ...], stored_json: str | None = None) -> bool:
    """Whether the object at `place` is a model's (whose fields are fixed), not a mapping's
    (whose keys are data: `tool_versions`)."""
    try:
        _, dropped = across_releases(SessionState, _with_field(place, "probe", 1, stored_json))
    except ValidationError:
        return False
    return dropped == (".".join(map(str, (*place, "probe"))),)


STATE = _talked()
PLACES = [place for place in _objects(json.loads(as_stored(STATE))) if _is_a_model(place)]


def test_what_this_release_wrote_reads_as_it_is_and_drops_nothing() -> None:
    assert across_releases(SessionState, as_stored(STATE)) == (STATE, ())
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
    model_there: Any = json.loads(as_stored(STATE))
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


# ── a field moved between releases ───────────────────────────────────────────────────────


def test_the_state_before_the_move_is_read_with_every_field_it_had() -> None:
    assert set(StateBeforeTheMove.model_fields) == FIELDS_BEFORE_THE_MOVE
    assert MOVED[SessionState] == ("realtime", frozenset(RealtimeCall.model_fields))


@pytest.mark.parametrize("session", STORED_BEFORE_THE_MOVE, ids=lambda session: str(session["what"]))
def test_a_state_the_release_before_stored_reads_as_this_release_folds_its_log(
    session: dict[str, Any],
) -> None:
    """The state a worker of the release before stored is the state this release folds from the
    same log, and what this release stores of it is what that worker stored."""
    folded, _ = fold(session["log"])
    assert across_releases(SessionState, json.dumps(session["stored"])) == (folded, ())
    assert across_releases(SessionState, session["stored"]) == (folded, ())
    assert without_the_added(json.loads(as_stored(folded))) == session["stored"]


def test_what_this_release_stores_a_worker_of_the_release_before_reads_as_its_own() -> None:
    stored = as_stored(STATE)
    assert set(json.loads(stored)) == FIELDS_BEFORE_THE_MOVE | ADDED_SINCE
    before = read_by_the_release_before(stored)
    assert before.model_dump(mode="json") == without_the_added(json.loads(stored))
    top = json.loads(STATE.model_dump_json(exclude={"realtime"}))
    assert json.loads(before.model_dump_json()) == without_the_added(
        {**top, **json.loads(STATE.realtime.model_dump_json())}
    )


def test_a_state_stored_nested_reads_as_the_same_state() -> None:
    """What the release after this one stores (the Realtime part under `realtime`) reads as the
    state it is, nothing dropped."""
    nested = STATE.model_dump_json()
    assert "realtime" in json.loads(nested) and "turn" not in json.loads(nested)
    assert across_releases(SessionState, nested) == (STATE, ())
    assert across_releases(SessionState, json.loads(nested)) == (STATE, ())


def test_a_moved_field_found_at_both_places_is_read_where_it_is_now() -> None:
    stored = {**json.loads(STATE.model_dump_json()), "compactions": 7, "silences_heard": 3}
    state, dropped = across_releases(SessionState, stored)
    assert (state, dropped) == (STATE, ())
    assert stored["compactions"] == 7  # the caller's data is not changed


def test_a_state_read_from_storage_is_the_state_validation_makes() -> None:
    """The stored state is read as one flat object and assembled without a second validation:
    what comes out compares, copies, changes and stores as a state validated from the nested
    shape does."""
    read, _ = across_releases(SessionState, as_stored(STATE))
    validated = SessionState.model_validate_json(STATE.model_dump_json())
    assert read == validated and read.realtime == validated.realtime
    assert read.model_fields_set == validated.model_fields_set
    assert type(read) is SessionState and type(read.realtime) is RealtimeCall
    changed = read.evolve(generation=read.generation + 1).with_realtime(compactions=9)
    assert changed.realtime.compactions == 9 and read.realtime.compactions == STATE.realtime.compactions
    assert as_stored(read) == as_stored(STATE)
    with pytest.raises(ValidationError):
        read.evolve(generation="many")


NESTED_PLACES = [
    place
    for place in _objects(json.loads(STATE.model_dump_json()))
    if _is_a_model(place, STATE.model_dump_json())
]


@settings(max_examples=200, deadline=None)
@given(
    place=st.sampled_from(NESTED_PLACES),
    name=st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
    value=st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none(), st.just({"deep": [1]})),
)
def test_a_field_added_anywhere_in_a_nested_state_reads_back_the_same_state(
    place: tuple[Any, ...], name: str, value: Any
) -> None:
    """A state stored nested with one field more at any depth (the release after the next may
    add one) is the state: the field named where the data has it, nothing else changed."""
    nested = STATE.model_dump_json()
    model_there: Any = json.loads(nested)
    for step in place:
        model_there = model_there[step]
    if name in model_there or (place == () and name in RealtimeCall.model_fields):
        return  # a field of the model there already, or one that moved there from the top
    state, dropped = across_releases(SessionState, json.dumps(_with_field(place, name, value, nested)))
    assert state == STATE
    assert dropped == (".".join(map(str, (*place, name))),)


@test_properties.PROPERTY_SETTINGS
@given(test_properties.SEQUENCE)
def test_the_fold_of_any_log_is_stored_as_before_and_reads_back_the_same(raws: list[dict[str, Any]]) -> None:
    """Whatever a session's log, the state this release folds from it is stored with every field
    where the release before keeps it (which reads it without dropping a thing), and reads back
    as the same state from that shape and from the nested one."""
    state, _ = fold(raws)
    stored = as_stored(state)
    assert set(json.loads(stored)) == FIELDS_BEFORE_THE_MOVE | ADDED_SINCE
    assert read_by_the_release_before(stored).model_dump(mode="json") == without_the_added(json.loads(stored))
    assert across_releases(SessionState, stored) == (state, ())
    assert across_releases(SessionState, state.model_dump_json()) == (state, ())
