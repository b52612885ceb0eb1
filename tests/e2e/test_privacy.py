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
import secrets
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest
import redis

from models.db import connect
from pipeline.privacy.detect import is_luhn_valid
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call
from tests.e2e.test_app_webhooks import SECRET, Receiver
from tests.support.browser import Browser
from tests.support.live import controls_of, live_session, set_live_script
from tests.support.phone import ring
from tests.support.queues import settled
from tests.support.waiting import wait_for

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _card(first: str) -> str:
    """A Luhn-valid card number of 16 digits, new for each run: the database and the Redis of
    this machine outlive a run, so what an earlier run left there can never be mistaken for
    (or hide) a leak of this one."""
    body = first + "".join(str(secrets.randbelow(10)) for _ in range(14))
    return body + next(str(d) for d in range(10) if is_luhn_valid(tuple(int(c) for c in body + str(d))))


CARD_DIGITS, SPOKEN_DIGITS = _card("4"), _card("5")
CARD = " ".join(CARD_DIGITS[i : i + 4] for i in range(0, 16, 4))
TYPED_CARD = CARD.replace(" ", "-")
SPOKEN_CARD = " ".join(DIGIT_WORDS[int(digit)] for digit in SPOKEN_DIGITS)
SSN_DIGITS = f"{secrets.randbelow(565) + 100}{secrets.randbelow(90) + 10}{secrets.randbelow(9000) + 1000}"
SSN = f"{SSN_DIGITS[:3]}-{SSN_DIGITS[3:5]}-{SSN_DIGITS[5:]}"
LOCAL_PART = "rosa." + "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8))
EMAIL = f"{LOCAL_PART}@example.org"

# What would betray a value: its digits in any spacing, its words, the address or its local part.
NEEDLES = (CARD_DIGITS, SPOKEN_DIGITS, " ".join(SPOKEN_CARD.split()[:8]), SSN_DIGITS, LOCAL_PART)

CARD_MASK = f"•••• •••• •••• {CARD_DIGITS[-4:]}"
SSN_MASK = f"•••-••-{SSN_DIGITS[-4:]}"
EMAIL_MASK = "r•••@example.org"


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


def _logs(stack: Stack) -> str:
    """What the gateway and the workers logged (the simulator plays the provider: not ours)."""
    return "\n".join(line for process in [stack.gateway, *stack.workers] if process for line in process.lines)


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


def _console_text(stack: Stack, session_id: str) -> str:
    """What the console shows of the call: the calls list, then the call's own page."""
    browser = Browser()
    try:
        browser.goto(f"{stack.api_url}/console")
        browser.eval(
            f"document.getElementById('key').value = {json.dumps(stack.api_token)};"
            "document.getElementById('me').value = 'Dana';"
            "document.getElementById('key-form').requestSubmit(); true"
        )
        # The console opens on the queue; the calls list is its own page.
        browser.eval("location.hash = '#/calls'; true")
        browser.wait_for(f"!!document.querySelector('tr[data-session={json.dumps(session_id)}]')")
        listed = str(browser.eval("document.body.innerText"))
        browser.eval(f"location.hash = '#/call/{session_id}'; true")
        # An ended call's page is its call log (the live transcript is for calls in progress).
        browser.wait_for("document.querySelectorAll('#timeline li[data-kind=\"turn.user\"]').length >= 2")
        browser.wait_for("document.querySelectorAll('#timeline li[data-kind=\"tool.call\"]').length >= 1")
        return listed + "\n" + str(browser.eval("document.body.innerText"))
    finally:
        browser.close()


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
    assert record["privacy"] == {"redact": ["card", "email", "ssn"], "consent": None, "retention_days": None}
    assert record["storage"] == "full"
    wait_for(lambda: receiver.taken("call.ended"), "the end-of-call webhook", timeout_s=30)

    # The positive control: the provider heard every value in the clear, as said.
    provider_log = json.dumps(simulator_call(private_stack, call_id), ensure_ascii=False)
    assert set(leaks(provider_log)) >= set(NEEDLES) - {SPOKEN_DIGITS}

    record = client.session(session_id, events=True)
    said = " ".join(item["text"] for item in record["transcript"])
    assert CARD_MASK in said and SSN_MASK in said and EMAIL_MASK in said
    assert f"•••• •••• •••• {SPOKEN_DIGITS[-4:]}" in said
    [step] = record["tool_steps"]
    assert step["tool"] == "echo" and step["status"] == "succeeded"

    stores = {
        "database": _database_text(services.database_url),
        "redis": _redis_text(services.redis_url, private_stack.namespace),
        "logs": _logs(private_stack),
        "webhooks": json.dumps(receiver.deliveries, ensure_ascii=False),
        "record": json.dumps(record, ensure_ascii=False),
        "call log": json.dumps(client.call_log(session_id), ensure_ascii=False),
        "export": _export(services, session_id),
        "watchers": json.dumps(heard, ensure_ascii=False),
        "console": _console_text(private_stack, session_id),
    }
    # The masked card is kept (as it is or as JSON's escapes write it): the stores were read.
    escaped = json.dumps(CARD_MASK)[1:-1]
    kept = [name for name, text in stores.items() if CARD_MASK in text or escaped in text]
    assert {"database", "export", "record", "webhooks", "console"} <= set(kept), kept
    assert any(message.get("type") == "transcript.final" for message in heard)
    assert {name: leaks(text) for name, text in stores.items() if leaks(text)} == {}

    # Erased on request, the session keeps none of what was said, not even masked.
    settled(private_stack, CARD_DIGITS[-4:])
    erased = client.erase_session(session_id)
    assert erased["erased"] is True and erased["removed"]["events"] > 0 and erased["removed"]["data_key"] == 1
    rows = "\n".join(row for row in _database_text(services.database_url).splitlines() if session_id in row)
    left = rows + _redis_text(services.redis_url, private_stack.namespace)
    for said_then in (CARD_MASK, SSN_MASK, EMAIL_MASK, "My card is", "I have the card", "typed:"):
        assert said_then not in left and json.dumps(said_then)[1:-1] not in left, said_then
    assert client.session(session_id)["erased_because"] == "request"


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
    assert set(leaks(heard_by_provider)) >= {CARD_DIGITS, SSN_DIGITS}
    # The task the handler answered was the caller's words, masked.
    [commentary] = [c for c in controls_of(provider_log) if c["type"] == "session.commentary.append"]
    assert CARD_MASK in commentary["content"] and "Hi there." in commentary["content"]

    record = client.session(session_id, events=True)
    said = " ".join(item["text"] for item in record["transcript"] if item["role"] == "user")
    assert "Hi there." in said and CARD_MASK in said and SSN_MASK in said
    stores = {
        "database": _database_text(services.database_url),
        "redis": _redis_text(services.redis_url, private_stack.namespace),
        "logs": _logs(private_stack),
        "record": json.dumps(record, ensure_ascii=False),
        "call log": json.dumps(client.call_log(session_id), ensure_ascii=False),
        "export": _export(services, session_id),
        "watchers": json.dumps(heard, ensure_ascii=False),
    }
    assert {name: leaks(text) for name, text in stores.items() if leaks(text)} == {}


def test_a_card_said_across_the_live_write_down_is_kept_whole_and_masked(
    private_stack: Stack, services: Services
) -> None:
    """Issue 44, item 9: the gateway writes a Live speaker's words down every second, wherever
    they are. A card read out word by word over three seconds is said across two write-downs;
    the pieces end where no value is cut, so the record, the stores and the watchers hold it
    masked whole, never as two halves each too short to be a card."""
    digits = _card("4")
    words = [DIGIT_WORDS[int(digit)] for digit in digits]
    # Any seven of its words in a row: whichever way a write-down cut it, one half has eight.
    windows = [" ".join(words[i : i + 7]) for i in range(len(words) - 6)]
    client = Client(private_stack.api_url, private_stack.api_token, private_stack.live_url)
    set_live_script(
        private_stack,
        {
            # A word every 150 ms of wall time: the card's sixteen take 2.4 s, two write-downs.
            "timing": {"fragment_ms": 150, "reply_after_ms": 50, "answer_wait_ms": 8_000},
            "caller": [
                {"say": f"Please take my card {' '.join(words)} thanks a lot.", "after_ms": 100},
                {"hangup": True, "after_ms": 400},
            ],
            "model": [{"say": "Thank you."}],
        },
    )
    session = client.create_session("You are the payments desk.", provider="live")
    session_id = session["id"]
    heard = _watched(client, session_id)
    call_id = client.connect(session_id)["call_id"]
    record = client.wait_for_status(session_id, timeout_s=60)
    assert record["status"] == "ended", record

    # The positive control: the provider heard the card, and the search below would see it.
    digit_word = re.compile(rf"\b(?:{'|'.join(DIGIT_WORDS)})\b")
    provider_log = json.dumps(live_session(private_stack, call_id), ensure_ascii=False)
    assert all(window in " ".join(digit_word.findall(provider_log)) for window in windows)

    record = client.session(session_id, events=True)
    pieces = [
        entry["payload"]
        for entry in record["log"]
        if entry["payload"].get("type") == "switchboard.live_transcript"
        and entry["payload"].get("speaker") == "caller"
    ]
    # The line was written down in pieces while the caller spoke, and reads masked whole.
    assert len(pieces) >= 2, [piece["text"] for piece in pieces]
    said = " ".join(item["text"] for item in record["transcript"] if item["role"] == "user")
    assert f"•••• •••• •••• {digits[-4:]}" in said and "Please" in said and "thanks" in said
    stores = {
        "database": _database_text(services.database_url),
        "redis": _redis_text(services.redis_url, private_stack.namespace),
        "logs": _logs(private_stack),
        "record": json.dumps(record, ensure_ascii=False),
        "call log": json.dumps(client.call_log(session_id), ensure_ascii=False),
        "export": _export(services, session_id),
        "watchers": json.dumps(heard, ensure_ascii=False),
    }
    assert any(message.get("type") == "transcript.final" for message in heard)
    leaked = {}
    for name, text in stores.items():
        # This call's own stores are also read as their digit words alone, in order: a half
        # spread over fragments or deltas ({"text": " four"}, {"text": " one"}…) reads whole.
        readings = [" ".join(text.split())]
        if name in {"record", "call log", "export", "watchers"}:
            readings.append(" ".join(digit_word.findall(text)))
        leaked[name] = [window for window in windows if any(window in reading for reading in readings)]
    assert {name: found for name, found in leaked.items() if found} == {}


def _inject(stack: Stack, call_id: str, frames: list[str]) -> None:
    base = stack.simulator_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{base}/_sim/calls/{call_id}/inject", data=json.dumps({"frames": frames}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def _dead_letters(stack: Stack, *arguments: str) -> str:
    listed = subprocess.run(
        [sys.executable, "-m", "switchboard", "dlq", *arguments],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    return listed.stdout


def test_a_summary_an_incident_and_a_dead_letter_keep_no_clear_value(
    private_stack: Stack, services: Services
) -> None:
    """The model's compaction summary repeats the card, a malformed frame quotes it (an
    incident), and a line that fails every attempt is dead-lettered: each is kept masked."""
    client = Client(private_stack.api_url, private_stack.api_token, private_stack.live_url)
    refused = f"refuse_{uuid.uuid4().hex[:10]}"
    database = connect(services.database_url)
    # A line PostgreSQL refuses, so that its event is retried and dead-lettered.
    database.execute_sql(
        f"CREATE FUNCTION {refused}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF NEW.payload::text LIKE '%%dead letter me%%' THEN RAISE EXCEPTION 'disk full (simulated)';"
        " END IF; RETURN NEW; END $$"
    )
    database.execute_sql(
        f"CREATE TRIGGER {refused} BEFORE INSERT ON session_events FOR EACH ROW EXECUTE FUNCTION {refused}()"
    )
    try:
        set_script(
            private_stack,
            {
                "name": "privacy-maintenance",
                "timing": {
                    "delta_interval_ms": 5,
                    "chars_per_delta": 40,
                    "speech_ms": 100,
                    "response_wait_ms": 2000,
                },
                "caller": [
                    {
                        "say": f"Hello, my card number is {CARD} and my social is {SSN}, please note them.",
                        "after_ms": 20,
                    },
                    {"say": "Can you confirm the refund goes back to that same card?", "after_ms": 20},
                    {"say": "And how long does the refund take to arrive, roughly?", "after_ms": 20},
                    {"say": "Will I get a confirmation of it by email as well?", "after_ms": 20},
                    {"say": f"And dead letter me: the card is {CARD}.", "after_ms": 20},
                    {"hangup": True, "after_ms": 30000},
                ],
                "model": [
                    {"say": f"Noted, the card {CARD}."},
                    {"say": "Yes, it does."},
                    {"say": "About five working days."},
                    {"say": "Yes, you will."},
                    {"say": "Done."},
                ],
                "out_of_band": [{"text": f"Working notes: caller's card {CARD}, SSN {SSN}, mail {EMAIL}."}],
            },
        )
        session = client.create_session(
            "You are the payments desk.",
            limits={"compaction_input_tokens": 30, "max_session_seconds": 20},
            privacy={"redact": ["email"]},
        )
        session_id = session["id"]
        call_id = client.connect(session_id)["call_id"]
        wait_for(lambda: client.session(session_id)["transcript"], "the caller's first line", timeout_s=30)
        _inject(
            private_stack,
            call_id,
            ['{"type": "conversation.item.added", "transcript": "' + CARD + " and " * 60],
        )

        def dead() -> list[dict[str, Any]]:
            return [
                letter
                for letter in json.loads(_dead_letters(private_stack, "list", "--json"))
                if letter["session_id"] == session_id
            ]

        [letter] = wait_for(dead, "the refused line to be dead-lettered", timeout_s=60)
        shown = _dead_letters(private_stack, "show", letter["id"][:12])
    finally:
        database.execute_sql(f"DROP TRIGGER {refused} ON session_events")
        database.execute_sql(f"DROP FUNCTION {refused}()")
    record = client.wait_for_status(session_id, timeout_s=60)
    assert record["status"] in ("ended", "failed"), record
    record = client.session(session_id, events=True)
    assert [c["summary"] for c in record["compactions"] if c["summary"]], record["compactions"]
    assert CARD_MASK in record["compactions"][0]["summary"]
    [incident] = [i for i in record["incidents"] if "frame_preview" in i["context"]]
    assert incident["context"]["frame_preview"].startswith('{"type": "conversation.item.added"')
    assert CARD_MASK in shown or json.dumps(CARD_MASK)[1:-1] in shown

    stores = {
        "database": _database_text(services.database_url),
        "redis": _redis_text(services.redis_url, private_stack.namespace),
        "logs": _logs(private_stack),
        "record": json.dumps(record, ensure_ascii=False),
        "dead letter": shown,
        "export": _export(services, session_id),
    }
    assert {name: leaks(text) for name, text in stores.items() if leaks(text)} == {}


def _session_of_phone_call(client: Client, call_id: str) -> str | None:
    status, body = client.request("GET", f"/v1/phone-calls/{call_id}")
    return str(body["session_id"]) if status == 200 and body.get("session_id") else None


def test_a_card_keyed_in_on_a_phone_call_is_kept_as_presses_without_digits(private_stack: Stack) -> None:
    """One digit an event, a keyed-in card is no text a detector can read: every digit of it is
    logged masked, while the route's menu key, pressed on its own, still asks for a person."""
    client = Client(private_stack.api_url, private_stack.api_token, private_stack.live_url)
    keyed = [{"dtmf": digit, "after_ms": 150} for digit in CARD_DIGITS]
    set_script(
        private_stack,
        {
            "name": "privacy-keypad",
            # A key press is answered by nothing: the next press does not wait for an answer.
            "timing": {"response_wait_ms": 100},
            "caller": [
                {"say": "I will key in my card now.", "after_ms": 100},
                *keyed,
                {"dtmf": "0", "after_ms": 6_000},
                {"hangup": True, "after_ms": 1_500},
            ],
            "model": [{"say": "Go ahead."}],
        },
    )
    number = f"+1800555{secrets.randbelow(9000) + 1000}"
    client.add_route(number, {"instructions": "Be brief."}, keys={"0": "attention"})
    call_id = ring(private_stack, number)
    session_id = wait_for(lambda: _session_of_phone_call(client, call_id), "the session", timeout_s=30)
    client.wait_for_status(session_id, timeout_s=60)
    pressed = wait_for(
        lambda: (
            [e for e in client.call_log(session_id)["entries"] if e["kind"] == "call.key"][16:]
            and [e["data"]["key"] for e in client.call_log(session_id)["entries"] if e["kind"] == "call.key"]
        ),
        "every key press in the call log",
    )
    assert pressed == ["•"] * 16 + ["0"]
    kinds = [entry["kind"] for entry in client.call_log(session_id)["entries"]]
    assert "attention.requested" in kinds
    record = client.session(session_id, events=True)
    keys = [
        entry["payload"]["event"]
        for entry in record["log"]
        if entry["kind"] == "input_audio_buffer.dtmf_event_received"
    ]
    assert keys == ["•"] * 16 + ["0"]
    # The positive control: the provider was sent the digits.
    sent = [
        e["event"]["event"]
        for e in simulator_call(private_stack, call_id)["events"]
        if "dtmf" in e["event"]["type"]
    ]
    assert "".join(sent) == CARD_DIGITS + "0"
