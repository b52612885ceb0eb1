"""A session's state across a rolling deploy, on the real row: this release stores it where the
release before reads it (every field at the top), carries on from a row that release stored, and
from the nested row the release after stores; the state stays the fold of the log."""

from __future__ import annotations

import json
from typing import Any

from models.applied import Applied
from models.db import SessionRow
from models.sessions import locked_session
from pipeline.platform.envelope import SendControl
from pipeline.platform.releases import as_stored
from pipeline.session.state import Phase
from tests.pipeline import events as ev
from tests.pipeline.before_the_move import (
    ADDED_SINCE,
    FIELDS_BEFORE_THE_MOVE,
    STORED_BEFORE_THE_MOVE,
    read_by_the_release_before,
    without_the_added,
)
from tests.support.calls import admit, deliver, new_session_id, refold, spoken_turns

# Of `spoken_turns`: the sideband up, the configuration confirmed, and the caller's first line
# answered with a response that is under way (response.created).
TURN_UNDER_WAY = 5


def _stored(session_id: str) -> dict[str, Any]:
    stored: dict[str, Any] = SessionRow.get_by_id(session_id).state
    return stored


def _store(database: Any, session_id: str, state_json: str) -> None:
    """The row's state as another release's worker committed it."""
    database.execute_sql("UPDATE sessions SET state = %s::jsonb WHERE id = %s", (state_json, session_id))


def _sent(applied: Applied) -> list[str]:
    return [item.control["type"] for item in applied.to_gateway if isinstance(item, SendControl)]


def test_a_row_this_release_stores_is_read_by_a_worker_of_the_release_before(database: Any) -> None:
    session_id = new_session_id()
    admit(session_id)
    for seq, event in enumerate(spoken_turns(1)[:TURN_UNDER_WAY], start=1):
        deliver(session_id, seq, event)

    stored = _stored(session_id)
    assert set(stored) == FIELDS_BEFORE_THE_MOVE | ADDED_SINCE
    assert stored["turn"]["response_id"] == "resp_0" and stored["speech_started_count"] == 1
    before = read_by_the_release_before(stored)
    with locked_session(session_id) as session:
        assert session.state == refold(session_id)
        assert before.model_dump(mode="json") == without_the_added(_stored(session_id))
        assert session.state.realtime.turn is not None and session.state.realtime.turn.response_id == "resp_0"


def test_a_row_the_release_before_stored_is_read_and_carried_on(database: Any) -> None:
    """A worker of the release before stored the state of a turn whose tool call runs; a worker
    of this release reads it as the fold of that log, ends the call from it, and stores the
    ended state where the release before reads it."""
    [session] = [each for each in STORED_BEFORE_THE_MOVE if each["what"] == "a turn whose tool call runs"]
    folded, _ = ev.fold(session["log"])
    assert folded.realtime.turn is not None and folded.realtime.chain.pending is not None
    session_id = new_session_id()
    admit(session_id)
    _store(database, session_id, json.dumps(session["stored"]))

    with locked_session(session_id) as locked:
        assert locked.state == folded
    end = {"type": "switchboard.end_requested", "reason": "app_ended"}
    deliver(session_id, 1, end)

    ended, _ = ev.fold([*session["log"], end])
    assert ended.phase is Phase.ENDED
    with locked_session(session_id) as locked:
        assert locked.state == ended
    stored = _stored(session_id)
    assert set(stored) == FIELDS_BEFORE_THE_MOVE | ADDED_SINCE
    assert without_the_added(stored) == read_by_the_release_before(stored).model_dump(mode="json")
    assert stored == json.loads(as_stored(ended))


def test_a_row_the_release_after_stores_nested_is_read_and_carried_on(database: Any) -> None:
    """The release after this one stores the Realtime part under `realtime`: a worker of this
    release reads that row mid-turn, answers the caller's next line from it, and the state stays
    the fold of the log (stored at the top again)."""
    session_id = new_session_id()
    admit(session_id)
    events = spoken_turns(2)
    for seq, event in enumerate(events[:TURN_UNDER_WAY], start=1):
        deliver(session_id, seq, event)
    with locked_session(session_id) as session:
        nested = session.state.model_dump_json()
    _store(database, session_id, nested)
    assert "realtime" in _stored(session_id) and "turn" not in _stored(session_id)

    rest = enumerate(events[TURN_UNDER_WAY:], start=TURN_UNDER_WAY + 1)
    sent = [_sent(deliver(session_id, seq, event)) for seq, event in rest]

    assert ["response.create"] in sent  # the caller's second line is answered
    with locked_session(session_id) as session:
        assert session.state == refold(session_id)
        assert session.state.phase is Phase.LISTENING and session.state.realtime.responses_asked == 2
    assert set(_stored(session_id)) == FIELDS_BEFORE_THE_MOVE | ADDED_SINCE
