"""Erasure on request, end to end (issue 25): calls run through the real processes, then
`DELETE /v1/sessions/{id}` and `DELETE /v1/callers/{number}` (and their CLI verbs) erase them —
after which no row of the database and no Redis key of the namespace holds a word of the call,
and the session record says when and why. Repeats, races, refusals, roles, and a worker killed
in the middle are each checked."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import dramatiq
import psycopg2
import pytest
import redis

from models.db import parse_database_url
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script
from tests.e2e.test_privacy import _database_text, _redis_text
from tests.support.phone import ring
from tests.support.queues import settled
from tests.support.waiting import wait_for

# The callers' surnames, unique to this run: the stores are searched whole, and a database
# shared with other runs may hold another run's calls.
RUN = "".join(random.choices(string.ascii_lowercase, k=8))
QUARTZFEATHER = f"Quartzfeather{RUN}"
SNAPDRAGON = f"Snapdragon{RUN}"
BUTTERCRUMB = f"Buttercrumb{RUN}"
WOBBLEPOT = f"Wobblepot{RUN}"
THISTLEWAITE = f"Thistlewaite{RUN}"
FIDDLEWICK = f"Fiddlewick{RUN}"
MARCHBANKS = f"Marchbanks{RUN}"
QUILLFEATHER = f"Quillfeather{RUN}"
CALLER_NUMBER = "+1312555" + "".join(random.choices(string.digits, k=4))


def _script(words: str, *, hangup_ms: int = 1_500) -> dict[str, Any]:
    """A call in which the caller says `words`, the model repeats them, and a tool gets them."""
    return {
        "name": "erasure",
        "timing": {
            "delta_interval_ms": 10,
            "chars_per_delta": 8,
            "speech_ms": 150,
            "response_wait_ms": 20000,
        },
        "caller": [
            {"say": f"Hello, my name is {words}.", "after_ms": 150},
            {"hangup": True, "after_ms": hangup_ms},
        ],
        "model": [
            {"function_call": {"name": "echo", "arguments": {"text": f"note for {words}"}}},
            {"say": f"Thank you, {words}, noted."},
        ],
    }


def _ended_call(stack: Stack, client: Client, words: str) -> str:
    set_script(stack, _script(words))
    session_id = str(client.create_session("You are the bakery's order desk.", tools=["echo"])["id"])
    client.connect(session_id)
    record = client.wait_for_status(session_id, timeout_s=90)
    assert record["status"] == "ended", record
    said = " ".join(item["text"] for item in record["transcript"])
    assert words in said  # the call's words were kept: there is something to erase
    settled(stack, words)
    return session_id


def _stores(stack: Stack, services: Services) -> str:
    return _database_text(services.database_url) + "\n" + _redis_text(services.redis_url, stack.namespace)


def _cli(stack: Stack, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", *arguments, "--api", stack.api_url],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _key(stack: Stack, role: str) -> str:
    made = subprocess.run(
        [sys.executable, "-m", "switchboard", "keys", "add", f"erasure-{role}", "--role", role],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    return str(json.loads(made.stdout)["key"])


@pytest.fixture(scope="module")
def erase_stack(services: Services, namespace: str) -> Iterator[Stack]:
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-erase") as running:
        running.start(workers=1)
        yield running


@pytest.fixture
def admin(erase_stack: Stack) -> Client:
    return Client(erase_stack.api_url, erase_stack.api_token, erase_stack.live_url)


def test_an_ended_call_is_erased_from_every_store(
    erase_stack: Stack, admin: Client, services: Services
) -> None:
    words = f"Wilhelmina {QUARTZFEATHER}"
    session_id = _ended_call(erase_stack, admin, words)
    assert QUARTZFEATHER in _database_text(services.database_url)

    status, erased = admin.request("DELETE", f"/v1/sessions/{session_id}", timeout_s=90)

    assert status == 200, erased
    assert erased["erased"] is True and erased["session_id"] == session_id
    assert erased["already_erased"] is False
    removed = erased["removed"]
    assert removed["events"] > 0 and removed["transcript_items"] >= 2 and removed["tool_steps"] == 1
    stores = _stores(erase_stack, services)
    assert QUARTZFEATHER not in stores
    record = admin.session(session_id, events=True)
    assert record["erased_because"] == "request" and record["erased_at"] is not None
    assert record["status"] == "ended" and record["usage"]["total_tokens"] > 0
    assert record["instructions"] == "You are the bakery's order desk."
    [audit] = record["erasures"]
    assert audit["by"] == "admin:token" and audit["removed"] == removed
    # The call's story went with its content; how it ended stays, and a follower sees the end.
    log = admin.call_log(session_id)
    assert log["ended"] is True and [entry["kind"] for entry in log["entries"]] == ["call.ended"]
    assert log["entries"][0]["data"]["erased"] == "request"

    status, again = admin.request("DELETE", f"/v1/sessions/{session_id}", timeout_s=90)
    assert status == 200 and again["already_erased"] is True
    assert set(again["removed"].values()) == {0}
    assert len(admin.session(session_id)["erasures"]) == 1


def test_two_erasures_at_once_both_answer_and_erase_once(erase_stack: Stack, admin: Client) -> None:
    session_id = _ended_call(erase_stack, admin, f"Bartholomew {SNAPDRAGON}")
    answers: list[tuple[int, Any]] = []
    start = threading.Barrier(2)

    def erase() -> None:
        start.wait()
        answers.append(admin.request("DELETE", f"/v1/sessions/{session_id}", timeout_s=90))

    threads = [threading.Thread(target=erase) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [status for status, _ in answers] == [200, 200], answers
    assert sorted(body["already_erased"] for _, body in answers) == [False, True]
    [audit] = admin.session(session_id)["erasures"]
    assert audit["removed"]["transcript_items"] > 0


def test_an_unknown_or_live_session_is_refused_and_nothing_is_erased(
    erase_stack: Stack, admin: Client
) -> None:
    status, body = admin.request("DELETE", "/v1/sessions/sess_never_was")
    assert status == 404 and body["error"]["code"] == "session_not_found"

    words = f"Ottoline {BUTTERCRUMB}"
    set_script(erase_stack, _script(words, hangup_ms=60_000))
    session_id = str(admin.create_session("You are the bakery's order desk.", tools=["echo"])["id"])
    admin.connect(session_id)
    wait_for(
        lambda: any(words in item["text"] for item in admin.session(session_id)["transcript"]),
        "the caller's words",
        timeout_s=60,
    )

    status, body = admin.request("DELETE", f"/v1/sessions/{session_id}")
    assert status == 409 and body["error"]["code"] == "session_live"
    cli = _cli(erase_stack, "sessions", "erase", session_id)
    assert cli.returncode == 1 and "session_live" in cli.stderr

    record = admin.session(session_id)
    assert record["erased_at"] is None and record["erasures"] == []
    assert any(words in item["text"] for item in record["transcript"])
    admin.end(session_id)
    admin.wait_for_status(session_id, timeout_s=60)


def test_only_an_admin_may_erase(erase_stack: Stack, admin: Client) -> None:
    session_id = _ended_call(erase_stack, admin, f"Cornelius {WOBBLEPOT}")
    paths = (f"/v1/sessions/{session_id}", f"/v1/callers/{CALLER_NUMBER}")
    for token in ("", "not-the-token"):
        nobody = Client(erase_stack.api_url, token)
        for path in paths:
            status, body = nobody.request("DELETE", path)
            assert status == 401 and body["error"]["code"] == "unauthorized"
    for role in ("app", "supervisor", "viewer"):
        someone = Client(erase_stack.api_url, _key(erase_stack, role))
        for path in paths:
            status, body = someone.request("DELETE", path)
            assert status == 403 and body["error"]["code"] == "forbidden", (role, path)
    assert admin.session(session_id)["erased_at"] is None
    other_admin = Client(erase_stack.api_url, _key(erase_stack, "admin"))
    erased = other_admin.erase_session(session_id)
    assert erased["already_erased"] is False
    assert admin.session(session_id)["erasures"][0]["by"].startswith("admin:")
    assert admin.session(session_id)["erasures"][0]["by"] != "admin:token"


def test_a_caller_s_phone_calls_are_erased_by_number(
    erase_stack: Stack, admin: Client, services: Services
) -> None:
    words = f"Peregrine {THISTLEWAITE}"
    set_script(erase_stack, _script(words))
    admin.add_route("+18005550177", {"instructions": "You are the bakery's order desk.", "tools": ["echo"]})
    call_id = ring(erase_stack, "+18005550177", **{"from": CALLER_NUMBER})
    session_id = wait_for(
        lambda: admin.request("GET", f"/v1/phone-calls/{call_id}")[1].get("session_id"), "the call's session"
    )
    record = admin.wait_for_status(session_id, timeout_s=90)
    assert record["status"] == "ended" and any(words in item["text"] for item in record["transcript"])
    settled(erase_stack, words)
    assert admin.phone_call(call_id)["caller"] == CALLER_NUMBER

    status, body = admin.request("DELETE", f"/v1/callers/{CALLER_NUMBER[1:]}")
    assert status == 422 and body["error"]["code"] == "malformed_number"
    assert _cli(erase_stack, "callers", "erase", "not-a-number").returncode == 1

    cli = _cli(erase_stack, "callers", "erase", CALLER_NUMBER)

    assert cli.returncode == 0, cli.stderr
    answer = json.loads(cli.stdout)
    assert answer["number"] == CALLER_NUMBER and answer["erased"] == 1 and answer["skipped_live"] == 0
    assert answer["sessions"] == [session_id]
    assert admin.session(session_id)["erased_at"] is not None
    assert admin.phone_call(call_id)["caller"] == ""
    stores = _stores(erase_stack, services)
    assert THISTLEWAITE not in stores and CALLER_NUMBER[1:] not in stores
    again = admin.erase_caller(CALLER_NUMBER)
    assert (again["erased"], again["sessions"]) == (0, [])


def test_a_caller_s_calls_turned_away_are_erased_by_number(
    erase_stack: Stack, admin: Client, services: Services
) -> None:
    """Issue 44: a call from the number to a number no route answers has no session to erase;
    after `DELETE /v1/callers/{number}` (the number written with separators), its record
    answers no number and no store of the deployment holds it."""
    caller = "+1312555" + "".join(random.choices(string.digits, k=4))
    call_id = ring(erase_stack, "+18005550188", **{"from": caller})
    turned_away = wait_for(
        lambda: (lambda shown: shown if shown.get("action") == "reject" else None)(
            admin.request("GET", f"/v1/phone-calls/{call_id}")[1]
        ),
        "the call turned away",
    )
    assert (turned_away["caller"], turned_away["session_id"]) == (caller, None)

    answer = admin.erase_caller(f"{caller[:2]} ({caller[2:5]}) {caller[5:8]}-{caller[8:]}")

    shown = admin.phone_call(call_id)
    assert (shown["caller"], shown["dialled"], shown["reason"]) == ("", "", "unknown_number")
    assert caller[1:] not in _stores(erase_stack, services)
    assert (answer["number"], answer["turned_away"], answer["erased"]) == (caller, 1, 0), answer


def test_the_cli_erases_a_session(erase_stack: Stack, admin: Client, services: Services) -> None:
    session_id = _ended_call(erase_stack, admin, f"Mirabel {FIDDLEWICK}")

    cli = _cli(erase_stack, "sessions", "erase", session_id)

    assert cli.returncode == 0, cli.stderr
    answer = json.loads(cli.stdout)
    assert answer["session_id"] == session_id and answer["already_erased"] is False
    assert FIDDLEWICK not in _stores(erase_stack, services)
    missing = _cli(erase_stack, "sessions", "erase", "sess_never_was")
    assert missing.returncode == 1 and "session_not_found" in missing.stderr
    exported = subprocess.run(
        [sys.executable, "-m", "switchboard", "sessions", "export", session_id],
        env=erase_stack.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert exported.returncode == 1 and "erased" in exported.stderr and exported.stdout == ""


def _waits_on_lock(services: Services) -> bool:
    with psycopg2.connect(**parse_database_url(services.database_url)) as probe, probe.cursor() as cursor:
        # This database's backends only: the server may be shared with other runs.
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        (waiting,) = cursor.fetchone()
    probe.close()
    return bool(waiting)


def _plant_dead_letter(services: Services, namespace: str, session_id: str, words: str) -> None:
    message = dramatiq.Message(
        queue_name="transcript",
        actor_name="transcript_event",
        args=(),
        kwargs={"envelope": {"session_id": session_id, "seq": 99, "event": {"transcript": words}}},
        options={},
    )
    client = redis.Redis.from_url(services.redis_url)
    client.hset(f"{namespace}:transcript.XQ.msgs", message.message_id, message.encode())
    client.zadd(f"{namespace}:transcript.XQ", {message.message_id: time.time() * 1000})
    client.close()


def test_a_worker_killed_mid_erasure_leaves_all_or_nothing(services: Services, namespace: str) -> None:
    """Killed -9 while its erasure waits for the row lock: nothing is erased, and the message,
    back on another worker, erases it all. Erased in the database but not yet in Redis (a kill
    between the two): the repeat finds it erased and finishes the scrub."""
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-erase-kill") as stack:
        stack.start(workers=1)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        words = f"Evangeline {MARCHBANKS}"
        session_id = _ended_call(stack, client, words)

        holder = psycopg2.connect(**parse_database_url(services.database_url))
        asked: list[tuple[int, Any]] = []
        with holder.cursor() as cursor:
            cursor.execute("SELECT id FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
            request = threading.Thread(
                target=lambda: asked.append(
                    client.request("DELETE", f"/v1/sessions/{session_id}", timeout_s=90)
                )
            )
            request.start()
            assert wait_for(lambda: _waits_on_lock(services), "the erasure to wait on the row lock", 20, 0.01)
            stack.workers[0].kill()
        holder.rollback()
        holder.close()

        # No worker runs now: the database is read directly.
        connection = psycopg2.connect(**parse_database_url(services.database_url))
        with connection.cursor() as cursor:
            cursor.execute("SELECT erased_at FROM sessions WHERE id = %s", (session_id,))
            assert cursor.fetchone() == (None,)
            cursor.execute(
                "SELECT count(*) FROM transcript_items WHERE session_id = %s AND text <> ''", (session_id,)
            )
            assert cursor.fetchone()[0] >= 2
            cursor.execute("SELECT count(*) FROM erasures WHERE session_id = %s", (session_id,))
            assert cursor.fetchone() == (0,)
        connection.close()

        stack.add_worker()
        wait_for(lambda: client.session(session_id)["erased_at"], "the redelivered erasure", timeout_s=60)
        request.join(timeout=120)
        assert MARCHBANKS not in _database_text(services.database_url)
        # A message the new worker had in memory when it scrubbed (the inline tool's delayed
        # backup, say, taken back from the killed worker) is carried out, and gone, moments later.
        wait_for(
            lambda: MARCHBANKS not in _redis_text(services.redis_url, stack.namespace),
            "the killed worker's taken messages to be processed",
            timeout_s=60,
        )
        assert MARCHBANKS not in _stores(stack, services)
        status, again = client.request("DELETE", f"/v1/sessions/{session_id}", timeout_s=90)
        assert status == 200 and again["already_erased"] is True
        assert len(client.session(session_id)["erasures"]) == 1

        # Erased in the database only, as a kill right after its commit leaves it.
        second_words = f"Leopold {QUILLFEATHER}"
        second = _ended_call(stack, client, second_words)
        _plant_dead_letter(services, stack.namespace, second, second_words)
        from models.db import connect
        from models.erasure import erase_session

        connect(services.database_url)
        assert erase_session(second, by="admin:token") is not None
        assert QUILLFEATHER not in _database_text(services.database_url)
        assert QUILLFEATHER in _redis_text(services.redis_url, stack.namespace)

        status, repeat = client.request("DELETE", f"/v1/sessions/{second}", timeout_s=90)

        assert status == 200 and repeat["already_erased"] is True
        assert repeat["redis"]["dead_letters"] == 1
        assert QUILLFEATHER not in _stores(stack, services)
