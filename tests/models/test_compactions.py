"""Compaction records on real PostgreSQL: the summary is stored before anything is pruned, and a
summary that cannot be stored abandons the compaction without touching the call."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from models.applied import Applied
from models.db import database as db
from models.records import event_log, session_record
from models.sessions import locked_session, new_session
from pipeline.dialects import parse_inbound
from pipeline.platform.envelope import EventEnvelope, SendControl
from pipeline.session.state import SessionState
from pipeline.transitions import apply
from tests.pipeline import events as ev
from tests.support.calls import GATEWAY, new_session_id, spoken_turns

SUMMARY = "Dana: order 4417 shipped 12 May, tracking ZX-991; refund of 12.50 still open."


class Call:
    """A session driven through `LockedSession.deliver`, numbering events as a gateway would."""

    def __init__(self) -> None:
        self.id = new_session_id()
        self.seq = 0
        now = time.time()
        created = ev.session_created(limits={"max_output_tokens": 512, "compaction_input_tokens": 100})
        with new_session(self.id, GATEWAY) as session:
            session.apply_host(parse_inbound(created), now)
        for event in (ev.admission_begun(), ev.call_attached("rtc_test")):
            with locked_session(self.id) as session:
                session.apply_host(parse_inbound(event), now)

    def deliver(self, event: dict[str, Any]) -> Applied:
        self.seq += 1
        envelope = EventEnvelope(
            session_id=self.id,
            seq=self.seq,
            generation=1,
            gateway_id=GATEWAY,
            received_at=time.time(),
            event=event,
        )
        with locked_session(self.id) as session:
            return session.deliver(envelope)

    def state(self) -> SessionState:
        with locked_session(self.id) as session:
            return session.state


def _controls(applied: Applied) -> list[dict[str, Any]]:
    return [item.control for item in applied.to_gateway if isinstance(item, SendControl)]


def _compacting(call: Call) -> None:
    """Four spoken turns (eight known items; the last response reports 103 input tokens, over
    the threshold of 100) start compaction 1; its maintenance response begins."""
    started = [call.deliver(event) for event in spoken_turns(4)][-1]
    [create] = _controls(started)
    assert create["type"] == "response.create" and create["response"]["conversation"] == "none"
    call.deliver(ev.response_created("resp_m", metadata=ev.maintenance(1)))


def test_a_compaction_is_recorded_from_start_to_prune(database: Any) -> None:
    call = Call()
    _compacting(call)
    [row] = session_record(call.id)["compactions"]
    assert row["status"] == "started" and row["trigger_input_tokens"] == 103 and row["items_before"] == 8

    call.deliver(ev.assistant_text_final("resp_m", "item_m", SUMMARY))
    assert session_record(call.id)["compactions"][0]["summary"] == SUMMARY
    done = call.deliver(ev.response_done("resp_m", metadata=ev.maintenance(1)))

    controls = _controls(done)
    assert [c["item_id"] for c in controls if c["type"] == "conversation.item.delete"] == [
        "item_u0",
        "item_a0",
    ]
    assert controls[-1]["item"]["content"][0]["text"] == f"Earlier conversation compacted. Summary: {SUMMARY}"
    [row] = session_record(call.id)["compactions"]
    assert row["status"] == "completed"
    assert (row["items_deleted"], row["items_after"], row["response_id"]) == (2, 7, "resp_m")
    assert row["finished_at"] is not None
    # The summary is the record's, not a line of the conversation's transcript.
    assert all(line["text"] != SUMMARY for line in session_record(call.id)["transcript"])


@pytest.fixture
def summaries_refused(database: Any) -> Iterator[Call]:
    """A call whose compaction summaries PostgreSQL refuses to store (a trigger raising for
    this session only): a real failure of the write, not a stand-in for one."""
    call = Call()
    name = f"refuse_summary_{uuid.uuid4().hex[:12]}"
    db.execute_sql(
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" IF NEW.session_id = '{call.id}' AND NEW.summary IS NOT NULL THEN"
        " RAISE EXCEPTION 'summary storage refused'; END IF; RETURN NEW; END $$"
    )
    db.execute_sql(
        f"CREATE TRIGGER {name} BEFORE UPDATE ON compactions FOR EACH ROW EXECUTE FUNCTION {name}()"
    )
    try:
        yield call
    finally:
        db.execute_sql(f"DROP TRIGGER {name} ON compactions")
        db.execute_sql(f"DROP FUNCTION {name}()")


def test_a_summary_that_cannot_be_stored_abandons_the_compaction_not_the_call(
    summaries_refused: Call,
) -> None:
    call = summaries_refused
    _compacting(call)

    written = call.deliver(ev.assistant_text_final("resp_m", "item_m", SUMMARY))

    assert written.dispositions == [(call.seq, "applied")]
    [row] = session_record(call.id)["compactions"]
    assert (row["status"], row["reason"], row["summary"]) == ("abandoned", "summary_not_persisted", None)
    [incident] = [
        i for i in session_record(call.id)["incidents"] if i["code"] == "compaction_summary_not_persisted"
    ]
    assert "summary storage refused" in incident["context"]["detail"]
    state = call.state()
    assert state.realtime.compaction is None and state.realtime.compaction_cooldown == 3

    # The maintenance response ends: nothing is pruned. The call goes on.
    done = call.deliver(ev.response_done("resp_m", metadata=ev.maintenance(1)))
    assert _controls(done) == []
    heard = call.deliver(ev.user_final("item_u9", "Are you still there?"))
    assert [c["type"] for c in _controls(heard)] == ["response.create"]

    # The abandonment is in the log, so the stored state is still the fold of the log.
    log = event_log(call.id)
    assert "switchboard.compaction_unsaved" in [event["kind"] for event in log]
    folded = SessionState()
    for logged in sorted(log, key=lambda event: event["applied_order"] or 0):
        if logged["disposition"] in ("applied", "late"):
            folded = apply(folded, parse_inbound(logged["payload"]), logged["generation"]).state
    assert folded == call.state()
    assert json.dumps(folded.model_dump(mode="json"))  # the state is plain JSON
