"""Erasure on real PostgreSQL and Redis, below the API: one transaction under the row lock that
blanks every table's content of a session, repeat-safe and race-safe; the Redis scrub of the
session's keys, dead letters, delayed messages and control batches; and the retention sweep."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import dramatiq
import psycopg2
import pytest
import redis

from models import dead_letters as dead_letter_rows
from models import incidents, phone
from models.db import database
from models.erasure import erase_caller, erase_session, retention_due
from models.records import call_log, session_record
from models.records import sessions as listed_sessions
from models.sessions import locked_session, new_session
from pipeline.call.errors import MalformedNumber, SessionLive, SessionNotFound
from pipeline.phone.sip import PhoneLine, line_of
from pipeline.privacy.policy import PrivacyPolicy
from pipeline.session.step import RecordIncident
from pipeline.session.wire import AdmissionBegun, CallAttached, SessionCreated
from switchboard.services import Services
from tests.support.calls import GATEWAY, deliver, new_session_id, spoken_turns
from workers.erasure import LET_GO_OF_SWEEP_LOCK, TAKE_SWEEP_LOCK, scrub, sweep_lock, sweep_retention

INSTRUCTIONS = "You are the bakery's order desk."
WORDS = "marzipan zeppelin quokka"


def _created(namespace: str, *, privacy: PrivacyPolicy | None = None, phone: PhoneLine | None = None) -> str:
    session_id = new_session_id()
    now = time.time()
    created = SessionCreated(instructions=INSTRUCTIONS, privacy=privacy or PrivacyPolicy(), phone=phone)
    with new_session(session_id, GATEWAY, namespace) as session:
        session.apply_host(created, now)
    for event in (AdmissionBegun(), CallAttached(call_id=f"rtc_{session_id}")):
        with locked_session(session_id) as session:
            session.apply_host(event, now)
    return session_id


def _call(session_id: str, words: str, *, end: bool = True) -> None:
    """A spoken turn whose lines are `words`, a quoting incident, a tool step and a compaction;
    then the end."""
    events = spoken_turns(1)
    for event in events:
        if "transcript" in event:
            event["transcript"] = f"{words} {event['transcript']}"
    for seq, event in enumerate(events, 1):
        deliver(session_id, seq, event)
    incidents.record(
        session_id,
        RecordIncident(
            code="malformed_provider_frame", severity="warning", summary=f"bad: {words}", context={"q": words}
        ),
    )
    database.execute_sql(
        "INSERT INTO tool_steps (session_id, provider_call_id, sequence, tool_name, tool_version,"
        " catalog_digest, side_effect, raw_arguments, argument_digest, invocation_key, status, result, error,"
        " outcome_digest) VALUES (%s, 'call_1', 1, 'echo', '1', 'd', 'read', %s, 'sha:a', 'k', 'failed',"
        " %s::jsonb, %s::jsonb, 'sha:o')",
        (
            session_id,
            json.dumps({"text": words}),
            json.dumps({"echo": words}),
            json.dumps({"code": "boom", "message": words}),
        ),
    )
    database.execute_sql(
        "INSERT INTO compactions (session_id, number, status, forced, trigger_input_tokens, items_before,"
        " summary) VALUES (%s, 1, 'completed', false, 10, 4, %s)",
        (session_id, f"The caller said {words}."),
    )
    if end:
        seq = len(events)
        deliver(session_id, seq + 1, {"type": "switchboard.end_requested", "reason": "app_ended"})
        deliver(session_id, seq + 2, {"type": "switchboard.sideband_closed", "code": 1000, "by_host": True})


def _session_rows(session_id: str) -> str:
    """Every row of every table that names the session, as text."""
    tables = [
        name
        for (name,) in database.execute_sql(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        ).fetchall()
    ]
    rows: list[str] = []
    for table in tables:
        for (row,) in database.execute_sql(f'SELECT row_to_json(t)::text FROM "{table}" t').fetchall():
            if session_id in row:
                rows.append(row)
    assert rows
    return "\n".join(rows)


def _audit_rows(session_id: str) -> list[tuple[str, str, dict[str, int]]]:
    return [
        (by, because, removed)
        for by, because, removed in database.execute_sql(
            "SELECT by, because, removed FROM erasures WHERE session_id = %s ORDER BY id", (session_id,)
        ).fetchall()
    ]


def test_erasing_a_session_blanks_every_table_s_content_in_one_go(
    worker_runtime: Any, namespace: str
) -> None:
    session_id = _created(namespace)
    _call(session_id, WORDS)
    before = _session_rows(session_id)
    assert before.count("marzipan") >= 6  # transcript, event, incident, tool step, compaction …

    erased = erase_session(session_id, by="admin:token")

    assert erased is not None and not erased.already_erased
    assert erased.removed["events"] > 0 and erased.removed["transcript_items"] == 2
    assert erased.removed["tool_steps"] == 1 and erased.removed["compactions"] == 1
    assert erased.removed["incidents"] == 1
    after = _session_rows(session_id)
    assert "marzipan" not in after and "zeppelin" not in after
    record = session_record(session_id, with_events=True)
    assert record["erased_because"] == "request" and record["erased_at"] is not None
    assert record["status"] == "ended" and record["end_reason"] == "app_ended"
    assert record["instructions"] == INSTRUCTIONS  # the app's, not the caller's
    assert record["usage"]["total_tokens"] == 110
    assert [event["payload"] for event in record["log"] if event.get("seq") == 4] == [
        {"type": "conversation.item.input_audio_transcription.completed", "erased": True}
    ]
    assert len(record["transcript"]) == 2 and {item["text"] for item in record["transcript"]} == {""}
    assert _audit_rows(session_id) == [("admin:token", "request", erased.removed)]
    [listed] = [s for s in listed_sessions(namespace)["sessions"] if s["id"] == session_id]
    assert listed["erased_at"] == record["erased_at"]
    [ended] = call_log(session_id)
    assert ended.kind == "call.ended"
    assert ended.data == {
        "reason": "app_ended",
        "ended_by": "app",
        "duration_s": ended.data["duration_s"],
        "erased": "request",
    }


def test_erasing_again_changes_nothing_and_says_so(worker_runtime: Any, namespace: str) -> None:
    session_id = _created(namespace)
    _call(session_id, WORDS)
    first = erase_session(session_id, by="admin:token")
    erased_at = session_record(session_id)["erased_at"]

    again = erase_session(session_id, by="admin:other")

    assert again is not None and again.already_erased
    assert set(again.removed.values()) == {0}
    assert session_record(session_id)["erased_at"] == erased_at
    assert first is not None and _audit_rows(session_id) == [("admin:token", "request", first.removed)]


def test_two_erasures_at_once_erase_once(worker_runtime: Any, namespace: str) -> None:
    session_id = _created(namespace)
    _call(session_id, WORDS)
    results: list[Any] = []
    start = threading.Barrier(2)

    def erase() -> None:
        start.wait()
        results.append(erase_session(session_id, by="admin:token"))
        database.close()

    threads = [threading.Thread(target=erase) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(result.already_erased for result in results) == [False, True]
    [(_, _, removed)] = _audit_rows(session_id)
    assert removed["transcript_items"] == 2


def test_a_live_session_is_refused_and_left_as_it_was(worker_runtime: Any, namespace: str) -> None:
    session_id = _created(namespace)
    _call(session_id, WORDS, end=False)
    before = _session_rows(session_id)

    with pytest.raises(SessionLive):
        erase_session(session_id, by="admin:token")

    assert _session_rows(session_id) == before
    assert _audit_rows(session_id) == []
    with pytest.raises(SessionNotFound):
        erase_session("sess_never_was", by="admin:token")


def test_a_deployment_erases_none_of_another_s_sessions(worker_runtime: Any, namespace: str) -> None:
    session_id = _created(f"{namespace}-other-deployment")
    _call(session_id, WORDS)

    with pytest.raises(SessionNotFound):
        erase_session(session_id, by="admin:token", namespace=namespace)

    assert "marzipan" in _session_rows(session_id) and _audit_rows(session_id) == []
    assert erase_session(session_id, by="admin:token", namespace=f"{namespace}-other-deployment")


def test_a_caller_s_sessions_are_found_by_either_number_and_the_live_ones_skipped(
    worker_runtime: Any, namespace: str
) -> None:
    caller = "+14155550199"
    line = PhoneLine(caller=caller, dialled="+18005550100", route_id="route_x")
    called_back = PhoneLine(caller="+18005550100", dialled="14155550199", route_id="route_y")
    ended, callee, live = (
        _created(namespace, phone=line),
        _created(namespace, phone=called_back),
        _created(namespace, phone=line),
    )
    other = _created(namespace, phone=PhoneLine(caller="+14155550100", dialled="+18005550101"))
    for session_id in (ended, callee, other):
        _call(session_id, WORDS)
    _call(live, WORDS, end=False)

    done = erase_caller(namespace, caller, by="admin:token").as_json()

    assert done["erased"] == 2 and done["skipped_live"] == 1 and done["live_sessions"] == [live]
    assert sorted(done["sessions"]) == sorted([ended, callee])
    for session_id in (ended, callee):
        rows = _session_rows(session_id)
        assert "marzipan" not in rows and "4155550199" not in rows
    assert "marzipan" in _session_rows(other) and "marzipan" in _session_rows(live)
    # Their numbers are gone with them: asked again, only the live one is left to find.
    assert erase_caller(namespace, caller, by="admin:token").as_json()["erased"] == 0
    with pytest.raises(MalformedNumber):
        erase_caller(namespace, "4155550199", by="admin:token")


def _turned_away(namespace: str, sip_from: str, sip_to: str) -> str:
    """A call from `sip_from` to `sip_to`, which no route of the deployment answers: rejected,
    with no session; answers its call id."""
    call_id = f"rtc_{uuid.uuid4().hex}"
    line = line_of(
        (("From", f"<sip:{sip_from}@carrier.example.com>"), ("To", f"<sip:{sip_to}@sip.example>")), "To"
    )
    ringing = phone.Ringing(
        f"wh_{call_id}", call_id, line, f"req_{call_id}", GATEWAY, namespace, maximum_calls=10
    )
    assert phone.ring(ringing, lambda _route, _line: [], time.time()).action == "reject"
    return call_id


def test_a_caller_s_calls_turned_away_lose_the_number_too(worker_runtime: Any, namespace: str) -> None:
    """Calls no session answered (an unrouted number) have no session to erase: erasing the
    caller blanks the number in theirs too, whichever spelling it came in (the national trunk
    prefix inside it) — from it, or to it — and leaves other callers' calls as they were."""
    from_it = _turned_away(namespace, "+4402079460177", "+18005550999")
    to_it = _turned_away(namespace, "+14155550100", "+442079460177")
    other = _turned_away(namespace, "+14155550100", "+18005550999")
    assert phone.phone_call(namespace, from_it)["caller"] == "+442079460177"

    done = erase_caller(namespace, "+44 20 7946 0177", by="admin:token").as_json()

    assert (done["number"], done["turned_away"], done["erased"]) == ("+44 20 7946 0177", 2, 0)
    for call_id in (from_it, to_it):
        shown = phone.phone_call(namespace, call_id)
        assert (shown["caller"], shown["dialled"], shown["action"]) == ("", "", "reject")
    assert phone.phone_call(namespace, other)["caller"] == "+14155550100"
    stored = database.execute_sql(
        "SELECT string_agg(caller || ' ' || number, ' ') FROM phone_calls WHERE namespace = %s", (namespace,)
    ).fetchone()[0]
    assert "79460177" not in stored and "+14155550100" in stored
    assert erase_caller(namespace, "+442079460177", by="admin:token").as_json()["turned_away"] == 0


def _plant(client: redis.Redis, namespace: str, session_id: str) -> None:
    """What Redis may hold of a session: a dead letter, a delayed webhook, a queued event, a
    control batch, keys."""
    for queue, actor, suffix in (
        ("transcript", "transcript_event", ".XQ"),
        ("app_webhooks", "notify_app", ".DQ"),
        ("transcript", "transcript_event", ""),
    ):
        kwargs: dict[str, Any] = (
            {"envelope": {"session_id": session_id, "seq": 9, "event": {"transcript": WORDS}}}
            if actor == "transcript_event"
            else {"session_id": session_id, "delivery_id": "d", "kind": "call.ended", "data": {"t": WORDS}}
        )
        message = dramatiq.Message(queue_name=queue, actor_name=actor, args=(), kwargs=kwargs, options={})
        full = f"{namespace}:{queue}{suffix}"
        client.hset(f"{full}.msgs", message.message_id, message.encode())
        if suffix == ".XQ":
            client.zadd(full, {message.message_id: time.time() * 1000})
        else:
            client.rpush(full, message.message_id)
    batch = {"session_id": session_id, "generation": 1, "items": [{"id": "c", "text": WORDS}]}
    client.rpush(f"{namespace}:gateway.gw-erase-test", json.dumps(batch))
    client.set(f"{namespace}:seq:{session_id}", 12)
    client.set(f"{namespace}:directive:{session_id}:ctl_1_d0", "gw")


def _namespace_text(client: redis.Redis, namespace: str) -> str:
    parts: list[str] = []
    for key in client.scan_iter(match=f"{namespace}:*"):
        kind = client.type(key)
        if kind == b"hash":
            parts.append(repr(client.hgetall(key)))
        elif kind == b"list":
            parts.append(repr(client.lrange(key, 0, -1)))
        elif kind == b"string":
            parts.append(repr(client.get(key)))
        parts.append(repr(key))
    return "\n".join(parts)


def test_the_redis_scrub_drops_the_session_s_keys_and_messages_only(
    services: Services, namespace: str
) -> None:
    client = redis.Redis.from_url(services.redis_url)
    space = f"{namespace}-scrub"
    erased, kept = new_session_id(), new_session_id()
    _plant(client, space, erased)
    _plant(client, space, kept)
    # A message of the session that a worker took (its id off the list, in its acks).
    taken = dramatiq.Message(
        queue_name="tool_runs", actor_name="run_tool", args=(), kwargs={"session_id": erased}, options={}
    )
    client.hset(f"{space}:tool_runs.msgs", taken.message_id, taken.encode())
    client.sadd(f"{space}:__acks__.worker-x.tool_runs", taken.message_id)

    # Dead letters are rows in PostgreSQL (a Redis set holds only an older release's).
    for session_id in (erased, kept):
        letter = dramatiq.Message(
            queue_name="transcript",
            actor_name="transcript_event",
            args=(),
            kwargs={"session_id": session_id},
            options={},
        )
        summary = dead_letter_rows.Summary("transcript_event", session_id, 4, 10, "RuntimeError: disk full")
        dead_letter_rows.keep(space, "transcript", letter.message_id, letter.encode(), summary)

    scrubbed = scrub(client, space, erased)

    assert scrubbed == {"keys": 2, "dead_letters": 2, "queued": 3, "controls": 1}
    assert [row.body for row in dead_letter_rows.stored(space) if erased.encode() in row.body] == []
    assert len(dead_letter_rows.stored(space)) == 1
    assert client.hget(f"{space}:tool_runs.msgs", taken.message_id) is None
    text = _namespace_text(client, space)
    assert erased not in text
    assert kept in text and text.count(WORDS) == 4
    assert scrub(client, space, erased) == {"keys": 0, "dead_letters": 0, "queued": 0, "controls": 0}
    for key in client.scan_iter(match=f"{space}:*"):
        client.delete(key)
    client.close()


def _end_back(session_id: str, days: int) -> None:
    database.execute_sql(
        "UPDATE sessions SET ended_at = now() - make_interval(days => %s) WHERE id = %s", (days, session_id)
    )


def test_the_retention_sweep_erases_the_sessions_past_their_retention(
    worker_runtime: Any, services: Services, namespace: str
) -> None:
    space = f"{namespace}-retention"
    client = redis.Redis.from_url(services.redis_url)
    deployment_default = _created(space)
    own_short = _created(space, privacy=PrivacyPolicy(retention_days=7))
    own_long = _created(space, privacy=PrivacyPolicy(retention_days=400))
    recent = _created(space)
    for session_id in (deployment_default, own_short, own_long, recent):
        _call(session_id, WORDS)
    _plant(client, space, own_short)
    for session_id in (deployment_default, own_long):
        _end_back(session_id, 31)
    _end_back(own_short, 8)

    assert sweep_retention(client, space, None) == 1  # no deployment default: only the policy's own
    assert session_record(own_short)["erased_because"] == "retention"
    assert own_short not in _namespace_text(client, space)
    assert sorted(retention_due(space, 30)) == sorted([deployment_default])

    assert sweep_retention(client, space, 30) == 1
    assert sweep_retention(client, space, 30) == 0
    for session_id in (own_short, deployment_default):
        record = session_record(session_id)
        assert record["erased_because"] == "retention" and record["erasures"][0]["by"] == "retention"
        assert "marzipan" not in _session_rows(session_id)
    for session_id in (own_long, recent):
        assert session_record(session_id)["erased_at"] is None
        assert "marzipan" in _session_rows(session_id)
    client.close()


def test_a_second_sweeper_waits_its_turn(worker_runtime: Any, services: Services, namespace: str) -> None:
    """While one sweeper holds the sweep's lock, another sweeps nothing."""
    space = f"{namespace}-retention-lock"
    client = redis.Redis.from_url(services.redis_url)
    session_id = _created(space)
    _call(session_id, WORDS)
    _end_back(session_id, 31)
    holder = psycopg2.connect(services.database_url)
    holder.autocommit = True
    with holder.cursor() as cursor:
        cursor.execute(TAKE_SWEEP_LOCK, sweep_lock(space))
        assert cursor.fetchone() == (True,)
        assert sweep_retention(client, space, 30) == 0
        cursor.execute(LET_GO_OF_SWEEP_LOCK, sweep_lock(space))
    holder.close()
    assert sweep_retention(client, space, 30) == 1
    client.close()


def test_an_erased_session_keeps_nothing_that_arrives_after(worker_runtime: Any, namespace: str) -> None:
    """A straggler of the ended call lands nowhere; an end asked again is still answered."""
    session_id = _created(namespace)
    _call(session_id, WORDS)
    erase_session(session_id, by="admin:token")
    logged = session_record(session_id)["logged_seq"]
    late = {
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": "ev_straggler",
        "item_id": "item_late",
        "content_index": 0,
        "transcript": f"one more thing: {WORDS}",
    }

    straggler = deliver(session_id, logged + 1, late)
    end = deliver(
        session_id,
        logged + 2,
        {
            "type": "switchboard.end_requested",
            "reason": "again",
            "request_id": "req_again",
            "gateway_id": "gw-x",
        },
    )

    assert straggler.dispositions == [(logged + 1, "erased")]
    assert "marzipan" not in _session_rows(session_id)
    [(gateway_id, reply)] = end.replies
    assert gateway_id == "gw-x" and reply.status == 409
    assert session_record(session_id)["logged_seq"] == logged


def test_a_session_the_sweep_cannot_lock_holds_up_none_of_the_others(
    worker_runtime: Any, services: Services, namespace: str
) -> None:
    """A due session whose row is held past the lock timeout is left for the next sweep."""
    space = f"{namespace}-retention-held"
    client = redis.Redis.from_url(services.redis_url)
    held, free = _created(space), _created(space)
    for session_id in (held, free):
        _call(session_id, WORDS)
    _end_back(held, 32)  # the older one: swept first
    _end_back(free, 31)
    holder = psycopg2.connect(services.database_url)
    with holder.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (held,))
        assert sweep_retention(client, space, 30) == 1
    holder.rollback()
    holder.close()
    assert session_record(free)["erased_because"] == "retention"
    assert session_record(held)["erased_at"] is None
    assert sweep_retention(client, space, 30) == 1
    assert session_record(held)["erased_because"] == "retention"
    client.close()


def test_a_deployment_s_sweep_waits_for_none_of_another_s(
    worker_runtime: Any, services: Services, namespace: str
) -> None:
    """Two deployments on one database sweep side by side: another deployment's sweeper holding
    its lock stops nothing here (a second sweeper of this one waits its turn, above)."""
    ours, theirs = f"{namespace}-retention-ours", f"{namespace}-retention-theirs"
    client = redis.Redis.from_url(services.redis_url)
    due = _created(ours)
    _call(due, WORDS)
    _end_back(due, 31)
    sweeper = psycopg2.connect(services.database_url)
    sweeper.autocommit = True
    with sweeper.cursor() as cursor:
        cursor.execute(TAKE_SWEEP_LOCK, sweep_lock(theirs))
        assert cursor.fetchone() == (True,)
        assert sweep_retention(client, ours, 30) == 1
        cursor.execute(LET_GO_OF_SWEEP_LOCK, sweep_lock(theirs))
    sweeper.close()
    assert session_record(due)["erased_because"] == "retention"
    client.close()


def test_a_metadata_session_is_erased_by_the_next_sweep_and_its_webhook_still_goes(
    worker_runtime: Any, services: Services, namespace: str
) -> None:
    """`storage: "metadata"` (created so, or the caller declined recording): the first sweep
    after the call erases its content whatever its retention, destroys its data key, and leaves
    the end-of-call webhook's message to be delivered (what the app is owed)."""
    space = f"{namespace}-storage"
    client = redis.Redis.from_url(services.redis_url)
    session_id = new_session_id()
    now = time.time()
    created = SessionCreated(instructions=INSTRUCTIONS, storage="metadata")
    with new_session(session_id, GATEWAY, space, keys=worker_runtime.keys) as session:
        session.apply_host(created, now)
    for event in (AdmissionBegun(), CallAttached(call_id=f"rtc_{session_id}")):
        with locked_session(session_id) as session:
            session.apply_host(event, now)
    kept = _created(space)
    unfinished = new_session_id()
    with new_session(unfinished, GATEWAY, space) as session:
        session.apply_host(SessionCreated(instructions=INSTRUCTIONS, storage="metadata"), now)
    for each in (session_id, kept):
        _call(each, WORDS)
    _plant(client, space, session_id)

    assert sweep_retention(client, space, None) == 1
    record = session_record(session_id)
    assert record["erased_because"] == "storage" and record["storage"] == "metadata"
    assert [(because, removed["data_key"]) for _, because, removed in _audit_rows(session_id)] == [
        ("storage", 1)
    ]
    assert "marzipan" not in _session_rows(session_id)
    left = _namespace_text(client, space)
    assert "notify_app" in left and "transcript_event" not in left  # the webhook waits to be delivered
    assert session_record(kept)["erased_at"] is None and "marzipan" in _session_rows(kept)
    assert session_record(unfinished)["erased_at"] is None  # a call not over keeps what it makes
    assert sweep_retention(client, space, None) == 0
    client.close()
