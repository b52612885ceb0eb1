"""Per-session ordered application under the row lock (DESIGN invariants 2, 3 and 4), on
real PostgreSQL and Redis."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import pytest

from models.db import SessionEventRow, SessionRow, TranscriptItemRow
from models.records import event_log
from models.releases import read_across
from pipeline.dialects import parse_inbound
from pipeline.session.state import Phase, SessionState
from pipeline.transitions import apply
from tests.support.calls import admit, envelope, new_session_id, spoken_turns
from tests.workers.conftest import drain


def _deliver_all(envelopes: list[dict[str, Any]], threads: int) -> None:
    from workers.actors import deliver

    work = list(envelopes)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def run() -> None:
        while True:
            with lock:
                if not work:
                    return
                item = work.pop()
            try:
                deliver([item])
            except BaseException as error:  # noqa: BLE001 (surfaced below; a thread must not swallow it)
                errors.append(error)

    pool = [threading.Thread(target=run) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert errors == []


def _control_ids(batches: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for batch in batches for item in batch["items"] if item["kind"] == "control"]


def test_racing_workers_apply_out_of_order_events_once_in_seq_order(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """Four threads delivering a shuffled, duplicated stream apply each seq once, in seq order,
    and the controls reach the gateway queue once each, in apply order."""
    session_id = new_session_id()
    admit(session_id, namespace=worker_runtime.settings.broker_namespace)
    events = spoken_turns(4)
    envelopes = [envelope(session_id, seq, event) for seq, event in enumerate(events, start=1)]
    stream = envelopes * 2
    random.Random(7).shuffle(stream)

    _deliver_all(stream, threads=4)

    row = SessionRow.get_by_id(session_id)
    assert row.applied_seq == len(events)
    assert row.status == "listening"
    logged = [event for event in event_log(session_id) if event["seq"] is not None]
    assert sorted(event["seq"] for event in logged) == list(range(1, len(events) + 1))
    assert {event["disposition"] for event in logged} == {"applied"}
    by_order = sorted(logged, key=lambda event: event["applied_order"])
    assert [event["seq"] for event in by_order] == list(range(1, len(events) + 1))
    user_finals = [
        seq for seq, event in enumerate(events, 1) if event["type"].endswith("transcription.completed")
    ]
    assert _control_ids(drain(control_inbox)) == ["ctl_1_0"] + [f"ctl_{seq}_0" for seq in user_finals]
    transcripts = TranscriptItemRow.select().where(TranscriptItemRow.session == session_id)
    assert transcripts.count() == 8


def test_an_early_event_waits_in_the_log_until_the_gap_fills(worker_runtime: Any, control_inbox: Any) -> None:
    """Seq 3 before seq 2 is logged pending and applied when 2 arrives."""
    from workers.actors import deliver

    session_id = new_session_id()
    admit(session_id, namespace=worker_runtime.settings.broker_namespace)
    events = spoken_turns(1)
    first = deliver([envelope(session_id, 1, events[0])])
    early = deliver([envelope(session_id, 4, events[3])])
    assert early.dispositions == [(4, "pending")]
    assert SessionRow.get_by_id(session_id).applied_seq == 1
    deliver([envelope(session_id, 3, events[2])])
    filled = deliver([envelope(session_id, 2, events[1])])
    assert first.dispositions == [(1, "applied")]
    assert filled.dispositions == [(2, "applied"), (3, "applied"), (4, "applied")]
    assert _control_ids(drain(control_inbox)) == ["ctl_1_0", "ctl_4_0"]


def test_a_provider_event_under_a_new_seq_is_a_duplicate_that_changes_nothing(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """The same provider event_id numbered twice applies once; its second seq is a duplicate."""
    from workers.actors import deliver

    session_id = new_session_id()
    admit(session_id, namespace=worker_runtime.settings.broker_namespace)
    events = spoken_turns(1)
    for seq, event in enumerate(events[:4], start=1):
        deliver([envelope(session_id, seq, event)])
    again = deliver([envelope(session_id, 5, events[3])])
    assert again.dispositions == [(5, "duplicate")]
    assert SessionRow.get_by_id(session_id).applied_seq == 5
    assert _control_ids(drain(control_inbox)) == ["ctl_1_0", "ctl_4_0"]
    assert TranscriptItemRow.select().where(TranscriptItemRow.session == session_id).count() == 1


def test_a_redelivered_seq_changes_nothing(worker_runtime: Any, control_inbox: Any) -> None:
    """Delivering an applied seq again writes nothing and emits nothing."""
    from workers.actors import deliver

    session_id = new_session_id()
    admit(session_id, namespace=worker_runtime.settings.broker_namespace)
    first = envelope(session_id, 1, spoken_turns(0)[0])
    deliver([first])
    drain(control_inbox)
    assert deliver([first]).dispositions == []
    assert drain(control_inbox) == []
    assert SessionEventRow.select().where(SessionEventRow.session == session_id).count() == 4


def test_the_state_equals_the_fold_of_the_applied_log(worker_runtime: Any, control_inbox: Any) -> None:
    """Re-folding the log in applied order reproduces the stored state (invariant 4)."""
    session_id = new_session_id()
    admit(session_id, namespace=worker_runtime.settings.broker_namespace)
    events = [*spoken_turns(3), {"type": "switchboard.end_requested", "reason": "app_ended"}]
    events.append({**spoken_turns(1)[3], "event_id": "ev_after_end"})  # a late user final
    stream = [envelope(session_id, seq, event) for seq, event in enumerate(events, start=1)]
    random.Random(3).shuffle(stream)
    _deliver_all(stream, threads=3)

    state = SessionState()
    for logged in sorted(event_log(session_id), key=lambda event: event["applied_order"] or 0):
        if logged["disposition"] in ("applied", "late"):
            state = apply(state, parse_inbound(logged["payload"]), logged["generation"]).state
    stored = read_across(SessionState, SessionRow.get_by_id(session_id).state, "stored session state")
    assert state == stored
    assert stored.phase is Phase.ENDED
    late = [event for event in event_log(session_id) if event["disposition"] == "late"]
    assert [event["kind"] for event in late] == ["conversation.item.input_audio_transcription.completed"]
    assert late[0]["controls"] == []


def test_the_lower_seq_of_a_repeated_provider_event_wins_whatever_arrives_first(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """A copy of a provider event numbered later but delivered earlier is the duplicate."""
    from workers.actors import deliver

    session_id = new_session_id()
    admit(session_id, namespace=worker_runtime.settings.broker_namespace)
    events = spoken_turns(1)
    deliver([envelope(session_id, 1, events[0])])
    deliver([envelope(session_id, 2, events[1])])
    deliver([envelope(session_id, 5, events[3])])
    deliver([envelope(session_id, 4, events[3])])
    filled = deliver([envelope(session_id, 3, events[2])])
    assert filled.dispositions == [(3, "applied"), (4, "applied"), (5, "duplicate")]
    assert _control_ids(drain(control_inbox)) == ["ctl_1_0", "ctl_4_0"]


def test_a_sessions_events_in_one_message_apply_in_one_transaction_and_publish_once(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """The gateway sends a session's events of one flush in one message: they are logged and
    applied in seq order under one lock, their controls go in one batch, and the same provider
    event twice in the message applies once (the second copy is a duplicate)."""
    from workers.actors import deliver

    session_id = new_session_id()
    admit(session_id, namespace=worker_runtime.settings.broker_namespace)
    events = spoken_turns(1)
    deliver([envelope(session_id, seq, event) for seq, event in enumerate(events[:3], start=1)])
    batches = drain(control_inbox)
    assert _control_ids(batches) == ["ctl_1_0"]
    together = [envelope(session_id, 4, events[3]), envelope(session_id, 5, events[3])]
    together += [envelope(session_id, 6, events[4]), envelope(session_id, 7, events[5])]
    applied = deliver(together)
    assert applied.dispositions == [(4, "applied"), (5, "duplicate"), (6, "applied"), (7, "applied")]
    [batch] = drain(control_inbox)
    assert _control_ids([batch]) == ["ctl_4_0"] and batch["applied_seq"] == 7
    assert SessionRow.get_by_id(session_id).applied_seq == 7
    assert TranscriptItemRow.select().where(TranscriptItemRow.session == session_id).count() == 2


def test_a_message_with_the_events_of_two_sessions_is_refused(worker_runtime: Any) -> None:
    """Events of two sessions in one message are malformed (no gateway sends that): refused
    without retry, and nothing of either is applied."""
    from pipeline.call.errors import MalformedEnvelope
    from workers.actors import deliver

    first, second = new_session_id(), new_session_id()
    admit(first, namespace=worker_runtime.settings.broker_namespace)
    admit(second, namespace=worker_runtime.settings.broker_namespace)
    event = spoken_turns(0)[0]
    with pytest.raises(MalformedEnvelope):
        deliver([envelope(first, 1, event), envelope(second, 1, event)])
    assert SessionRow.get_by_id(first).applied_seq == 0
    assert SessionRow.get_by_id(second).applied_seq == 0


def test_a_rolling_deploy_s_two_releases_apply_each_other_s_events_and_load_each_other_s_state(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """A gateway of the next release numbers an event with a field this worker does not know,
    and a worker of that release stored the session's state with one more field: this worker
    applies the event and loads the state (each was refused: the event went to the dead
    letters, the session could no longer be loaded by anyone of this release)."""
    from workers.actors import deliver

    session_id = new_session_id()
    admit(session_id, namespace=worker_runtime.settings.broker_namespace)
    events = spoken_turns(1)
    stored = SessionRow.get_by_id(session_id).state
    stored = stored if isinstance(stored, dict) else json.loads(stored)
    SessionRow.update(state={**stored, "next_release_field": {"any": 1}}).where(
        SessionRow.id == session_id
    ).execute()
    newer = {**envelope(session_id, 1, events[0]), "next_release_field": "x"}
    applied = deliver([newer])
    assert applied.dispositions == [(1, "applied")]
    for seq, event in enumerate(events[1:], start=2):
        deliver([envelope(session_id, seq, event)])
    assert SessionRow.get_by_id(session_id).applied_seq == len(events)
    assert _control_ids(drain(control_inbox)) == ["ctl_1_0", "ctl_4_0"]
