"""Webhooks to the app, end to end: a session that names a URL is told of its call —
call.started, tool.failed, call.ended with the end-of-call report (transcript, tool steps, who
ended it, usage, cost) — signed as Standard Webhooks (checked here with the `standardwebhooks`
package), retried with the same id until the app takes it, and replayed from the dead letters
with the same id."""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
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
    assert (report["end_reason"], report["ended_by"]) == ("provider_call_ended", "caller")
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
    [cost] = [line for line in scraped.splitlines() if line.startswith("switchboard_cost_usd_total ")]
    assert float(cost.split()[1]) > 0


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
        return subprocess.run(
            [sys.executable, "-m", "switchboard", "dlq", *arguments],
            env={
                **os.environ,
                "SWITCHBOARD_DATABASE_URL": services.database_url,
                "SWITCHBOARD_REDIS_URL": services.redis_url,
                "SWITCHBOARD_BROKER_NAMESPACE": webhook_stack.namespace,
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    listed = wait_for(lambda: "notify_app" in dlq("list").stdout, "the dead letter")
    assert listed
    receiver.failing["call.ended"] = 0
    replayed = dlq("replay", "--all")
    assert replayed.returncode == 0, replayed.stderr
    [taken] = wait_for(lambda: receiver.taken("call.ended"), "the replayed delivery")
    refused_ids = {d["id"] for d in receiver.deliveries if d.get("type") == "call.ended" and d["refused"]}
    assert refused_ids == {taken["id"]}
