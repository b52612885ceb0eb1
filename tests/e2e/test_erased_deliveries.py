"""Erasure reaches the deliveries to the app that are queued or waiting for their retry (issue 44,
item 4), end to end: a phone call whose app endpoint answers 500 and whose broker refuses, both
retrying, then `DELETE /v1/callers/{number}`, then the endpoint and the broker back. The app
received `call.started` with the caller's number and `attention.requested` with its reason after
the erasure (a worker held the retries in memory, out of the scrub's reach); now it receives
nothing of the erased call, from either delivery."""

from __future__ import annotations

import base64
import contextlib
import json
import random
import secrets
import shutil
import socket
import string
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.message import Message
from kombu.messaging import Consumer

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script
from tests.support.phone import ring
from tests.support.waiting import wait_for

RUN = "".join(random.choices(string.ascii_lowercase, k=8))
REASON = f"Quillfeather{RUN} wants a refund"
CALLER = "+1312555" + "".join(random.choices(string.digits, k=4))
ROUTE = "+1800555" + "".join(random.choices(string.digits, k=4))
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
# Retries close together, many of them: the deliveries are waiting for their next try, in a
# worker's memory, when the erasure comes.
RETRY_ENV = {
    "SWITCHBOARD_APP_WEBHOOK_RETRIES": "30",
    "SWITCHBOARD_APP_WEBHOOK_MIN_BACKOFF_MS": "300",
    "SWITCHBOARD_APP_WEBHOOK_MAX_BACKOFF_MS": "1000",
    "SWITCHBOARD_EVENT_STREAM_RETRIES": "30",
    "SWITCHBOARD_EVENT_STREAM_MIN_BACKOFF_MS": "300",
    "SWITCHBOARD_EVENT_STREAM_MAX_BACKOFF_MS": "1000",
}
# Several of the retries' longest back-off: every delivery that waited is tried in this.
AFTER_ERASURE_S = 6.0


class Endpoint:
    """The app's webhook endpoint: answers 500 until told otherwise, and keeps every body."""

    def __init__(self) -> None:
        self.status = 500
        self.received: list[tuple[float, int, dict[str, Any]]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                status = endpoint.status
                endpoint.received.append((time.time(), status, body))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def refused(self, kind: str) -> int:
        return sum(1 for _, status, body in self.received if body["type"] == kind and status == 500)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _rabbitmqctl(*arguments: str) -> None:
    if shutil.which("rabbitmqctl") is None:
        pytest.fail("rabbitmqctl is not installed: the event-stream tests need the machine's RabbitMQ")
    done = subprocess.run(
        ["rabbitmqctl", *arguments], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"rabbitmqctl {' '.join(arguments)}: {done.stderr}"


@pytest.fixture(scope="module")
def stack(services: Services, namespace: str) -> Iterator[Stack]:
    with Stack(
        services.database_url, services.redis_url, namespace=f"{namespace}-erased", extra_env=RETRY_ENV
    ) as running:
        running.start(workers=1)
        yield running


def test_a_call_erased_while_its_deliveries_retry_is_never_delivered(stack: Stack) -> None:
    endpoint = Endpoint()
    vhost = f"sb-erased-{uuid.uuid4().hex[:8]}"
    url = f"amqp://guest:guest@127.0.0.1:5672/{vhost}"  # a vhost the broker does not have yet
    client = Client(stack.api_url, stack.api_token, stack.live_url)
    set_script(
        stack,
        {
            "name": "erased-deliveries",
            "timing": {"delta_interval_ms": 10, "chars_per_delta": 12, "speech_ms": 150},
            "caller": [
                {"say": "I would like a refund, please.", "after_ms": 150},
                {"hangup": True, "after_ms": 2_500},
            ],
            "model": [{"say": "Let me find someone for you."}],
        },
    )
    session = {
        "instructions": "You are the refunds desk.",
        "webhook": {"url": endpoint.url, "secret": SECRET},
        "events": {"url": url},
    }
    client.add_route(ROUTE, session)
    try:
        call_id = ring(stack, ROUTE, **{"from": CALLER})
        session_id = wait_for(
            lambda: client.request("GET", f"/v1/phone-calls/{call_id}")[1].get("session_id"),
            "the call's session",
        )
        live = ("connected", "listening", "responding")
        assert client.wait_for_status(session_id, live, timeout_s=30)["status"] in live
        client.attention(session_id, REASON, wait_s=60)
        assert client.wait_for_status(session_id, timeout_s=60)["status"] == "ended"

        # The faults are in place: each delivery was refused and is retrying.
        wait_for(lambda: endpoint.refused("call.started") >= 2, "call.started refused twice")
        wait_for(lambda: endpoint.refused("attention.requested") >= 2, "attention.requested refused twice")
        wait_for(
            lambda: any("the app's broker amqp://127.0.0.1:5672" in line for line in stack.workers[0].lines),
            "the stream's broker refusing",
        )
        assert client.session(session_id)["event_stream"]["published_seq"] == 0
        said = json.dumps([body for _, _, body in endpoint.received])
        assert CALLER in said and REASON in said  # what the erasure is to keep from the app

        erased = client.erase_caller(CALLER)
        assert erased["sessions"] == [session_id], erased
        erased_at = time.time()
        endpoint.status = 204
        _rabbitmqctl("add_vhost", vhost)
        try:
            _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
            streamed = _taken_for(url, AFTER_ERASURE_S)
        finally:
            _rabbitmqctl("delete_vhost", vhost)
    finally:
        endpoint.close()

    after = [body for at, _, body in endpoint.received if at >= erased_at]
    assert after == [], after  # nothing of the erased call, with or without its content
    assert not [body for body in streamed if body.get("session_id") == session_id], streamed
    # The deliveries were attempted after the erasure, and dropped (not only scrubbed from Redis).
    dropped = [line for line in stack.workers[0].lines if f"its session {session_id} was erased" in line]
    assert dropped, "no delivery of the erased call was attempted after the erasure"


def _taken_for(url: str, seconds: float) -> list[dict[str, Any]]:
    """What the app's queue on the default exchange of the broker at `url` takes in `seconds`."""
    connection = Connection(url, connect_timeout=5)
    connection.ensure_connection(max_retries=3, timeout=10)
    queue = Queue(
        f"app-{uuid.uuid4().hex[:8]}",
        Exchange("switchboard.events", type="topic", durable=True),
        routing_key="session.#",
        exclusive=True,
    )
    taken: list[dict[str, Any]] = []

    def take(body: dict[str, Any], message: Message) -> None:
        taken.append(body)
        message.ack()

    try:
        queue(connection.default_channel).declare()
        deadline = time.monotonic() + seconds
        with Consumer(connection, queues=[queue], callbacks=[take], accept=["json"]):
            while time.monotonic() < deadline:
                with contextlib.suppress(TimeoutError, socket.timeout):
                    connection.drain_events(timeout=0.2)
    finally:
        connection.release()
    return taken
