"""The privacy boundary end to end (issue 25): calls in which the caller gives a card number
(written and spoken as words), an SSN and an e-mail address — by voice, typed, and passed to a
tool or a Live delegation — and then every store Switchboard keeps is read for them: every row
of every table in PostgreSQL, every Redis key of the namespace, the processes' logs, the
webhooks the app received, the session record, the call log, an export and the watchers'
stream. None holds a clear value. The simulated provider's own log is the positive control: it
holds them all, so the same search would see a leak."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest
import redis

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call
from tests.e2e.test_app_webhooks import SECRET, Receiver
from tests.support.live import controls_of, live_session, set_live_script
from tests.support.waiting import wait_for

CARD = "4532 0151 1283 0366"
SPOKEN_CARD = "five five two zero zero zero one two three four five six seven eight nine seven"
SSN = "219-09-9999"
EMAIL = "rosa.planted@example.org"
TYPED_CARD = "4532-0151-1283-0366"

# What would betray a value: its digits in any spacing, its words, the address or its local part.
NEEDLES = (
    "4532015112830366",
    "5520001234567897",
    "five five two zero zero zero one",
    "219099999",
    "rosa.planted",
)

CARD_MASK = "•••• •••• •••• 0366"


def leaks(text: str) -> list[str]:
    """The needles found in `text`, read with spaces, dashes and JSON's escapes taken out."""
    plain = re.sub(r"[\s\-]|\\[nrt]", "", text)
    spaced = " ".join(text.split())
    return [needle for needle in NEEDLES if needle in plain or needle in spaced]


def _database_text(database_url: str) -> str:
    """Every row of every table, as text (what a dump of the database would hold)."""
    connection = psycopg2.connect(database_url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
            )
            tables = [name for (name,) in cursor.fetchall()]
            rows: list[str] = []
            for table in tables:
                cursor.execute(f'SELECT row_to_json(t)::text FROM "{table}" t')
                rows.extend(row for (row,) in cursor.fetchall())
    finally:
        connection.close()
    assert {"sessions", "session_events", "transcript_items", "tool_steps", "webhook_deliveries"} <= set(
        tables
    )
    return "\n".join(rows)


def _redis_text(redis_url: str, namespace: str) -> str:
    """Every key of the namespace with its value, whatever its type."""
    client = redis.Redis.from_url(redis_url)
    parts: list[str] = []
    try:
        for key in client.scan_iter(match=f"*{namespace}*", count=1_000):
            kind = client.type(key).decode()
            value: Any
            if kind == "string":
                value = client.get(key)
            elif kind == "hash":
                value = client.hgetall(key)
            elif kind == "list":
                value = client.lrange(key, 0, -1)
            elif kind == "set":
                value = client.smembers(key)
            elif kind == "zset":
                value = client.zrange(key, 0, -1)
            elif kind == "stream":
                value = client.xrange(key)
            else:
                value = kind
            parts.append(f"{key!r} {value!r}")
    finally:
        client.close()
    return "\n".join(parts)


def _export(services: Services, session_id: str) -> str:
    exported = subprocess.run(
        [sys.executable, "-m", "switchboard", "sessions", "export", session_id],
        env={
            **os.environ,
            "SWITCHBOARD_DATABASE_URL": services.database_url,
            "SWITCHBOARD_REDIS_URL": services.redis_url,
        },
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    return exported.stdout


@pytest.fixture(scope="module")
def private_stack(services: Services, namespace: str) -> Iterator[Stack]:
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-privacy") as running:
        running.start(workers=1)
        yield running


@pytest.fixture(scope="module")
def receiver() -> Receiver:
    return Receiver()


def _watched(client: Client, session_id: str) -> list[dict[str, Any]]:
    heard: list[dict[str, Any]] = []
    client.follow_live(session_id, heard.append)
    return heard


def test_a_realtime_call_keeps_no_clear_value_anywhere(
    private_stack: Stack, services: Services, receiver: Receiver
) -> None:
    """Spoken, spoken as words, typed and passed to a tool: masked everywhere it is kept."""
    client = Client(private_stack.api_url, private_stack.api_token, private_stack.live_url)
    set_script(
        private_stack,
        {
            "name": "privacy",
            "timing": {
                "delta_interval_ms": 10,
                "chars_per_delta": 5,
                "speech_ms": 200,
                "response_wait_ms": 20000,
            },
            "caller": [
                {"say": f"My card is {CARD} and my social is {SSN}.", "after_ms": 150},
                {"say": f"Again, that is {SPOKEN_CARD}, and write to {EMAIL} please.", "after_ms": 400},
                {"hangup": True, "after_ms": 3000},
            ],
            "model": [
                {"function_call": {"name": "echo", "arguments": {"text": f"card {CARD} for {EMAIL}"}}},
                {"say": f"Thank you, I have the card {CARD}."},
                {"say": f"I will write to {EMAIL}."},
            ],
        },
    )
    session = client.create_session(
        "You are the payments desk.",
        tools=["echo"],
        privacy={"redact": ["email"]},
        webhook={"url": receiver.url, "secret": SECRET},
    )
    session_id = session["id"]
    heard = _watched(client, session_id)
    call_id = client.connect(session_id)["call_id"]
    # Typed once the tool has answered: typed text is answered like speech, and would cut in.
    wait_for(
        lambda: [step for step in client.session(session_id)["tool_steps"] if step["status"] == "succeeded"],
        "the echo tool's answer",
        timeout_s=30,
    )
    typed = client.caller_text(session_id, f"typed: {TYPED_CARD}")
    assert typed["status"] == "queued"
    record = client.wait_for_status(session_id, timeout_s=90)
    assert record["status"] == "ended", record
    assert record["privacy"] == {"redact": ["card", "email", "ssn"]}
    wait_for(lambda: receiver.taken("call.ended"), "the end-of-call webhook", timeout_s=30)

    # The positive control: the provider heard every value in the clear, as said.
    provider_log = json.dumps(simulator_call(private_stack, call_id), ensure_ascii=False)
    assert set(leaks(provider_log)) >= {
        "4532015112830366",
        "five five two zero zero zero one",
        "219099999",
        "rosa.planted",
    }

    record = client.session(session_id, events=True)
    said = " ".join(item["text"] for item in record["transcript"])
    assert CARD_MASK in said and "•••-••-9999" in said and "r•••@example.org" in said
    assert "•••• •••• •••• 7897" in said
    [step] = record["tool_steps"]
    assert step["tool"] == "echo" and step["status"] == "succeeded"

    stores = {
        "database": _database_text(services.database_url),
        "redis": _redis_text(services.redis_url, private_stack.namespace),
        "logs": "\n".join(
            line
            for process in [private_stack.gateway, *private_stack.workers]
            if process
            for line in process.lines
        ),
        "webhooks": json.dumps(receiver.deliveries, ensure_ascii=False),
        "record": json.dumps(record, ensure_ascii=False),
        "call log": json.dumps(client.call_log(session_id), ensure_ascii=False),
        "export": _export(services, session_id),
        "watchers": json.dumps(heard, ensure_ascii=False),
    }
    # The masked card is kept (as it is or as JSON's escapes write it): the stores were read.
    escaped = json.dumps(CARD_MASK)[1:-1]
    kept = [name for name, text in stores.items() if CARD_MASK in text or escaped in text]
    assert {"database", "export", "record", "webhooks"} <= set(kept), kept
    assert any(message.get("type") == "transcript.final" for message in heard)
    assert {name: leaks(text) for name, text in stores.items() if leaks(text)} == {}


def test_a_live_call_s_transcript_and_delegated_task_keep_no_clear_value(
    private_stack: Stack, services: Services
) -> None:
    """Live writes the caller's deltas down itself; a card said over several deltas is masked
    in them, and the delegation's task (taken from them) never holds it."""
    client = Client(private_stack.api_url, private_stack.api_token, private_stack.live_url)
    set_live_script(
        private_stack,
        {
            "caller": [
                {"say": "Hi there.", "after_ms": 100},
                {"say": f"Please charge {CARD}, my SSN is {SSN}.", "after_ms": 100, "delegate": True},
                {"hangup": True, "after_ms": 400},
            ],
            "model": [{"say": "Hello! How can I help?"}],
        },
    )
    session = client.create_session(
        "You are the payments desk.", provider="live", live={"delegation": "echo_task"}
    )
    session_id = session["id"]
    heard = _watched(client, session_id)
    call_id = client.connect(session_id)["call_id"]
    record = client.wait_for_status(session_id, timeout_s=60)
    assert record["status"] == "ended", record

    provider_log = live_session(private_stack, call_id)
    deltas = [entry["event"] for entry in provider_log["events"]]
    heard_by_provider = "".join(e["delta"] for e in deltas if e["type"] == "session.input_transcript.delta")
    assert set(leaks(heard_by_provider)) >= {"4532015112830366", "219099999"}
    # The task the handler answered was the caller's words, masked.
    [commentary] = [c for c in controls_of(provider_log) if c["type"] == "session.commentary.append"]
    assert CARD_MASK in commentary["content"] and "Hi there." in commentary["content"]

    record = client.session(session_id, events=True)
    said = " ".join(item["text"] for item in record["transcript"] if item["role"] == "user")
    assert "Hi there." in said and CARD_MASK in said and "•••-••-9999" in said
    stores = {
        "database": _database_text(services.database_url),
        "redis": _redis_text(services.redis_url, private_stack.namespace),
        "logs": "\n".join(
            line
            for process in [private_stack.gateway, *private_stack.workers]
            if process
            for line in process.lines
        ),
        "record": json.dumps(record, ensure_ascii=False),
        "call log": json.dumps(client.call_log(session_id), ensure_ascii=False),
        "export": _export(services, session_id),
        "watchers": json.dumps(heard, ensure_ascii=False),
    }
    assert {name: leaks(text) for name, text in stores.items() if leaks(text)} == {}
