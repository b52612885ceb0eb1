"""Deliveries to the app, end to end. Webhooks: a session that names a URL is told of its call —
call.started, tool.failed, call.ended with the end-of-call report (transcript, tool steps, who
ended it, usage, cost) — signed as Standard Webhooks (checked here with the `standardwebhooks`
package), retried with the same id until the app takes it, and replayed from the dead letters
with the same id. Event streams (docs/events.md): a session that names a broker has its call log
and report published to the RabbitMQ on this machine, read back by a consumer written with kombu;
a broker that refuses is retried, dead-lettered, and replayed once it takes messages. The deliveries
share one stack."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.message import Message
from kombu.messaging import Consumer
from standardwebhooks.webhooks import Webhook

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script
from tests.support.waiting import wait_for

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
PRICES = {
    "gpt-realtime": {
        "text": {"input": 4.0, "cached": 0.4, "output": 16.0},
        "audio": {"input": 32.0, "cached": 0.4, "output": 64.0},
    }
}


class Receiver:
    """The app's endpoint: checks each delivery's signature, keeps what it was told, and
    answers 500 to the first `failing` deliveries of a kind (or all of them, with None)."""

    def __init__(self) -> None:
        self.deliveries: list[dict[str, Any]] = []
        self.failing: dict[str, int | None] = {}
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    payload = Webhook(SECRET).verify(body, dict(self.headers))
                except Exception as error:  # noqa: BLE001 (any refusal is a test failure, recorded)
                    receiver.deliveries.append({"bad_signature": str(error)})
                    self.send_response(400)
                    self.end_headers()
                    return
                with receiver._lock:
                    kind = payload["type"]
                    left = receiver.failing.get(kind, 0)
                    refuse = left is None or left > 0
                    if left:
                        receiver.failing[kind] = left - 1
                    receiver.deliveries.append(
                        {"id": self.headers["webhook-id"], "refused": refuse, **payload}
                    )
                self.send_response(500 if refuse else 204)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def taken(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.deliveries if d.get("type") == kind and not d["refused"]]


@pytest.fixture(scope="module")
def webhook_stack(services: Services, namespace: str) -> Iterator[Stack]:
    extra = {
        "SWITCHBOARD_PRICES": json.dumps(PRICES),
        "SWITCHBOARD_APP_WEBHOOK_RETRIES": "2",
        "SWITCHBOARD_APP_WEBHOOK_MIN_BACKOFF_MS": "50",
        "SWITCHBOARD_APP_WEBHOOK_MAX_BACKOFF_MS": "200",
        "SWITCHBOARD_EVENT_STREAM_RETRIES": "2",
        "SWITCHBOARD_EVENT_STREAM_MIN_BACKOFF_MS": "50",
        "SWITCHBOARD_EVENT_STREAM_MAX_BACKOFF_MS": "200",
    }
    with Stack(
        services.database_url, services.redis_url, namespace=f"{namespace}-apphooks", extra_env=extra
    ) as stack:
        stack.start(workers=1)
        yield stack


def test_the_app_is_told_of_its_call_with_a_report_and_retried_with_the_same_id(webhook_stack: Stack) -> None:
    receiver = Receiver()
    receiver.failing["call.ended"] = 2
    client = Client(webhook_stack.api_url, webhook_stack.api_token, webhook_stack.live_url)
    set_script(
        webhook_stack,
        {
            "name": "tool-fails",
            "caller": [{"say": "Can you check order 7?", "after_ms": 100}, {"hangup": True, "after_ms": 300}],
            "model": [
                {"function_call": {"name": "fail", "arguments": {"message": "the order system is down"}}},
                {"say": "Sorry, I can't reach the order system right now."},
            ],
        },
    )
    session = client.create_session(
        "You are the order desk.", tools=["fail"], webhook={"url": receiver.url, "secret": SECRET}
    )
    client.connect(session["id"])
    client.wait_for_status(session["id"], timeout_s=30)

    ended = wait_for(lambda: receiver.taken("call.ended"), "call.ended")[0]
    assert not [d for d in receiver.deliveries if "bad_signature" in d]
    [started] = receiver.taken("call.started")
    [failed] = receiver.taken("tool.failed")
    assert started["data"]["session_id"] == session["id"] and started["data"]["medium"] == "webrtc"
    assert failed["data"]["status"] == "failed"
    attempts = [d for d in receiver.deliveries if d.get("type") == "call.ended"]
    assert len(attempts) == 3 and {d["id"] for d in attempts} == {ended["id"]}  # retried, one id
    report = ended["data"]["report"]
    assert (report["end_reason"], report["ended_by"]) == ("caller_hung_up", "caller")
    assert [t["role"] for t in report["transcript"]] == ["user", "assistant"]
    assert [step["status"] for step in report["tool_steps"]] == ["failed"]
    assert report["usage"]["output_tokens"] > 0 and report["cost_usd"] > 0
    assert client.session(session["id"])["cost_usd"] == report["cost_usd"]
    # The caller waited through the tool for the one spoken answer: one turn heard, as recorded.
    assert report["heard_latency"]["turns"] == 1
    assert report["heard_latency"] == client.session(session["id"])["heard_latency"]
    # The same prices make the workers' cost metric.
    port = webhook_stack.workers[0].ready["metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        scraped = response.read().decode()
    [cost] = [line for line in scraped.splitlines() if line.startswith("switchboard_cost_usd_total{")]
    assert cost.startswith('switchboard_cost_usd_total{agent="",model="gpt-realtime-2.1"}')
    assert float(cost.split()[1]) > 0


def _dlq(stack: Stack, services: Services, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", "dlq", *arguments],
        env={
            **os.environ,
            "SWITCHBOARD_DATABASE_URL": services.database_url,
            "SWITCHBOARD_REDIS_URL": services.redis_url,
            "SWITCHBOARD_BROKER_NAMESPACE": stack.namespace,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_delivery_the_app_never_takes_is_a_dead_letter_and_replays_with_its_id(
    webhook_stack: Stack, services: Services
) -> None:
    receiver = Receiver()
    receiver.failing["call.ended"] = None
    client = Client(webhook_stack.api_url, webhook_stack.api_token, webhook_stack.live_url)
    session = client.create_session("Be brief.", webhook={"url": receiver.url, "secret": SECRET})
    client.end(session["id"])
    wait_for(
        lambda: len([d for d in receiver.deliveries if d.get("type") == "call.ended"]) == 3, "3 refusals"
    )

    def dlq(*arguments: str) -> subprocess.CompletedProcess[str]:
        return _dlq(webhook_stack, services, *arguments)

    listed = wait_for(lambda: "notify_app" in dlq("list").stdout, "the dead letter")
    assert listed
    receiver.failing["call.ended"] = 0
    replayed = dlq("replay", "--all")
    assert replayed.returncode == 0, replayed.stderr
    [taken] = wait_for(lambda: receiver.taken("call.ended"), "the replayed delivery")
    refused_ids = {d["id"] for d in receiver.deliveries if d.get("type") == "call.ended" and d["refused"]}
    assert refused_ids == {taken["id"]}


def test_a_webhook_answered_with_a_redirect_is_not_delivered_and_its_target_hears_nothing(
    webhook_stack: Stack, services: Services
) -> None:
    """The app's endpoint answers 302 to another host: that host is never asked (neither the
    body nor the signature goes there), each attempt fails as a 5xx would, and the delivery is a
    dead letter saying why, not a delivery counted as made."""
    asked: dict[str, list[dict[str, Any]]] = {"redirecting": [], "elsewhere": []}

    def server(name: str, status: int, location: str | None = None) -> ThreadingHTTPServer:
        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {key.lower(): value for key, value in self.headers.items()}
                asked[name].append({"method": self.command, "headers": headers, "body": body})
                self.send_response(status)
                if location is not None:
                    self.send_header("location", location)
                self.send_header("content-length", "0")
                self.end_headers()

            do_GET = do_POST = _answer

            def log_message(self, *_args: Any) -> None:
                return

        running = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=running.serve_forever, daemon=True).start()
        return running

    elsewhere = server("elsewhere", 200)
    redirecting = server("redirecting", 302, f"http://127.0.0.1:{elsewhere.server_address[1]}/taken")
    try:
        client = Client(webhook_stack.api_url, webhook_stack.api_token, webhook_stack.live_url)
        url = f"http://127.0.0.1:{redirecting.server_address[1]}/hooks"
        session = client.create_session("Be brief.", webhook={"url": url, "secret": SECRET})
        client.end(session["id"])
        listed = wait_for(
            lambda: (out := _dlq(webhook_stack, services, "list").stdout) and session["id"] in out and out,
            "the redirected delivery's dead letter",
        )
    finally:
        redirecting.shutdown()
        elsewhere.shutdown()
    # The fault happened: the endpoint was asked, signed, and answered 302 each time (3 attempts).
    assert len(asked["redirecting"]) == 3
    assert all(a["method"] == "POST" and "webhook-signature" in a["headers"] for a in asked["redirecting"])
    assert asked["elsewhere"] == []
    assert "notify_app" in listed and "302 (redirects are not followed)" in listed


# ── event streams ──────────────────────────────────────────────────────────────────────────

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
# A consumer that has every message it will get within this has them all.
STREAM_TIMEOUT_S = 30.0


class AppBus:
    """The app's side of its broker: a queue bound to the stream's exchange (every kind), and
    the messages taken from it in the order the broker gave them."""

    def __init__(self, url: str, exchange: str) -> None:
        self.connection = Connection(url, connect_timeout=5)
        try:
            self.connection.ensure_connection(max_retries=1, timeout=5)
        except Exception as error:  # noqa: BLE001 (any of kombu's transports' errors says the same)
            pytest.fail(f"RabbitMQ is not reachable at {url} ({error!r}); .ci/run starts it when installed")
        self.queue = Queue(
            f"app-{uuid.uuid4().hex[:8]}",
            Exchange(exchange, type="topic", durable=True),
            routing_key="session.#",
            exclusive=True,
        )
        self.queue(self.connection.default_channel).declare()
        self.messages: list[tuple[str, str, dict[str, Any]]] = []

    def take_until_report(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Messages as (message id, routing key, body), up to and with the report."""

        def taken(body: dict[str, Any], message: Message) -> None:
            self.messages.append(
                (message.properties["message_id"], message.delivery_info["routing_key"], body)
            )
            message.ack()

        with Consumer(self.connection, queues=[self.queue], callbacks=[taken], accept=["json"]):
            deadline = time.monotonic() + STREAM_TIMEOUT_S
            while not any(body.get("kind") == "call.report" for _, _, body in self.messages):
                if time.monotonic() > deadline:
                    raise AssertionError(f"no report within {STREAM_TIMEOUT_S} s: {self.messages}")
                with contextlib.suppress(TimeoutError, socket.timeout):
                    self.connection.drain_events(timeout=1)
        return self.messages

    def close(self) -> None:
        self.connection.release()


def _streamed_as_logged(
    client: Client, session_id: str, messages: list[tuple[str, str, dict[str, Any]]]
) -> None:
    """The messages are the call log's entries, in seq order, each once and as the API answers
    it, with its stable id and its kind's routing key; then the report."""
    log = client.call_log(session_id)
    assert log["ended"]
    *entries, (report_id, report_key, report) = messages
    assert [body for _, _, body in entries] == [{"session_id": session_id, **e} for e in log["entries"]]
    assert [(i, key) for i, key, _ in entries] == [
        (f"{session_id}:{e['seq']}", f"session.{e['kind']}") for e in log["entries"]
    ]
    assert (report_id, report_key) == (f"{session_id}:report", "session.call.report")
    assert report["after_seq"] == log["entries"][-1]["seq"] and log["entries"][-1]["kind"] == "call.ended"


def test_a_call_is_streamed_to_the_apps_broker_in_seq_order_with_stable_ids(webhook_stack: Stack) -> None:
    """Every call-log entry, then the report, reach a kombu consumer of the app's RabbitMQ."""
    exchange = f"test.events.{uuid.uuid4().hex[:8]}"
    bus = AppBus(RABBITMQ, exchange)
    try:
        client = Client(webhook_stack.api_url, webhook_stack.api_token, webhook_stack.live_url)
        set_script(
            webhook_stack,
            {
                "name": "streamed",
                "caller": [
                    {"say": "Is the shop open today?", "after_ms": 100},
                    {"hangup": True, "after_ms": 300},
                ],
                "model": [{"say": "Yes, until six."}],
            },
        )
        refused = {"instructions": "x", "events": {"url": "https://app:s3cret@example.com/hook"}}
        status, answer = client.request("POST", "/v1/sessions", refused)
        assert (status, answer["error"]["code"]) == (422, "events_url_unsupported")
        assert "s3cret" not in json.dumps(answer)
        events = {"url": RABBITMQ, "exchange": exchange}
        session = client.create_session("You are the shop's line.", events=events)
        # The URL is a secret as a webhook's is: its password is never shown back.
        assert "guest:guest" not in json.dumps(session)
        assert session["event_stream"]["url"] == "amqp://guest:***@127.0.0.1:5672/"
        client.connect(session["id"])
        client.wait_for_status(session["id"], timeout_s=30)

        messages = bus.take_until_report()
        _streamed_as_logged(client, session["id"], messages)
        kinds = [body["kind"] for _, _, body in messages]
        assert kinds[0] == "call.started" and "turn.user" in kinds and "turn.agent" in kinds
        report = messages[-1][2]["report"]
        assert (report["end_reason"], report["ended_by"]) == ("caller_hung_up", "caller")
        assert [t["role"] for t in report["transcript"]] == ["user", "assistant"]
        # Nor in the record with its event log (the creation's payload holds the URL).
        assert "guest:guest" not in json.dumps(client.session(session["id"], events=True))
        stream = client.session(session["id"])["event_stream"]
        assert (stream["published_seq"], stream["report_published"]) == (messages[-2][2]["seq"], True)
    finally:
        bus.close()


def test_a_broker_that_refuses_is_retried_dead_lettered_and_replayed_once_it_takes(
    webhook_stack: Stack, services: Services
) -> None:
    """A stream to a vhost that does not exist yet fails each try and dead-letters; once the
    vhost exists, `dlq replay` publishes the whole log and the report, in order, once."""
    vhost = f"sb-test-{uuid.uuid4().hex[:8]}"
    url = f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    client = Client(webhook_stack.api_url, webhook_stack.api_token, webhook_stack.live_url)
    session = client.create_session("Be brief.", events={"url": url})
    client.end(session["id"])

    def dead_letters() -> str:
        listed = _dlq(webhook_stack, services, "list").stdout
        return listed if "stream_events" in listed else ""

    listed = wait_for(dead_letters, "the stream's dead letter")
    assert "guest:guest" not in listed  # a dead letter names the session, never the URL
    # It says which broker failed, and how: the host and port, never the password.
    assert "EventStreamFailed: the app's broker amqp://127.0.0.1:5672 could not be reached" in listed, listed
    assert client.session(session["id"])["event_stream"]["published_seq"] == 0
    _rabbitmqctl("add_vhost", vhost)
    try:
        _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        bus = AppBus(url, "switchboard.events")  # the default exchange
        try:
            replayed = _dlq(webhook_stack, services, "replay", "--all")
            assert replayed.returncode == 0, replayed.stderr
            _streamed_as_logged(client, session["id"], bus.take_until_report())
        finally:
            bus.close()
    finally:
        _rabbitmqctl("delete_vhost", vhost)


def _rabbitmqctl(*arguments: str) -> None:
    if shutil.which("rabbitmqctl") is None:
        pytest.fail("rabbitmqctl is not installed: the event-stream tests need the machine's RabbitMQ")
    done = subprocess.run(
        ["rabbitmqctl", *arguments], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"rabbitmqctl {' '.join(arguments)}: {done.stderr}"
