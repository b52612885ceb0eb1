"""What an operator or an app types into a call passes the privacy boundary as a caller's words
do (issue 44): a card number, an SSN and an e-mail planted through every text the API takes —
the session's own instructions and greeting, agent/say and agent/reply, a prompt block, a
supervisor's say and whisper, an attention reason, a collection's prompt and (refused) arguments,
and the end reason — are kept masked in every store; and the webhook that fails on every attempt
leaves no trace of what it carried in the workers' logs."""

from __future__ import annotations

import json
import uuid
from typing import Any

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script
from tests.e2e.test_app_webhooks import SECRET, Receiver
from tests.e2e.test_privacy import (
    CARD,
    CARD_MASK,
    EMAIL,
    SSN,
    TYPED_CARD,
    _database_text,
    _export,
    _logs,
    _redis_text,
    leaks,
    private_stack,  # noqa: F401 - the module's stack, shared
)
from tests.support.waiting import wait_for

BY = {"id": "sup-typed", "name": "Dana"}


def _accepted(client: Client, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """The request, asked again while the agent is busy answering (409 agent_busy)."""

    def asked() -> tuple[int, Any] | None:
        status, answer = client.request(method, path, body)
        busy = status == 409 and answer["error"]["code"] == "agent_busy"
        return None if busy else (status, answer)

    answered: tuple[int, Any] = wait_for(asked, f"{path} to be taken", timeout_s=30, every_s=0.2)
    return answered


def test_what_operators_and_apps_type_is_kept_masked_everywhere(
    private_stack: Stack,  # noqa: F811 - the fixture imported above
    services: Services,
) -> None:
    client = Client(private_stack.api_url, private_stack.api_token, private_stack.live_url)
    receiver = Receiver()
    # The app's endpoint refuses every attention request: each failed attempt is logged.
    receiver.failing["attention.requested"] = None
    set_script(
        private_stack,
        {
            "name": "privacy-typed",
            "timing": {"delta_interval_ms": 10, "chars_per_delta": 10, "response_wait_ms": 20000},
            "caller": [{"say": "Hello, I need some help.", "after_ms": 100}],
            "model": [{"say": "Of course, one moment."}],
        },
    )
    marker = f"lisbon-{uuid.uuid4().hex[:8]}"
    session = client.create_session(
        f"You are the payments desk. The caller's SSN on file is {SSN}.",
        greeting={"say": f"Hello, I am calling about the card {CARD}."},
        privacy={"redact": ["email"]},
        webhook={"url": receiver.url, "secret": SECRET},
    )
    session_id = session["id"]
    client.connect(session_id)
    wait_for(lambda: len(client.session(session_id)["transcript"]) >= 2, "the greeting and the caller")
    base = f"/v1/sessions/{session_id}"

    said = _accepted(client, "POST", f"{base}/agent/say", {"text": f"Your card {CARD} is on file."})
    assert said[0] == 202, said
    steered = _accepted(client, "POST", f"{base}/agent/reply", {"instructions": f"Confirm the SSN {SSN}."})
    assert steered[0] == 202, steered
    assert client.request("PUT", f"{base}/prompt/notes", {"text": f"Write to {EMAIL}."})[0] == 200
    for verb in (
        {"type": "whisper", "text": f"their SSN is {SSN}"},
        {"type": "say", "text": f"Card {CARD}?"},
    ):
        status, answer = _accepted(client, "POST", f"{base}/supervisor", {"by": BY, "verb": verb})
        assert status in (200, 202), answer
    # A card given in a collection's arguments is refused (a WebRTC call has no keypad either);
    # what the refused request carried is masked all the same.
    collect = {"tool": "echo", "prompt": f"Key in {CARD}", "arguments": {"card_number": TYPED_CARD}}
    refused = client.request("POST", f"{base}/collect", collect)
    assert refused[0] in (409, 422), refused
    attention = {"reason": f"{marker}: card {CARD} declined", "wait_s": 60}
    assert client.request("POST", f"{base}/attention", attention)[0] == 202
    wait_for(
        lambda: len([d for d in receiver.deliveries if d.get("type") == "attention.requested"]) >= 2,
        "the app to refuse the attention request twice",
        timeout_s=30,
    )
    ended = client.request("POST", f"{base}/end", {"reason": f"paid {TYPED_CARD}"})
    assert ended[0] == 202, ended
    record = client.wait_for_status(session_id, timeout_s=60)
    assert record["status"] == "ended"
    wait_for(lambda: receiver.taken("call.ended"), "the end-of-call webhook", timeout_s=30)

    record = client.session(session_id, events=True)
    kinds = [entry["kind"] for entry in client.call_log(session_id)["entries"]]
    assert "attention.requested" in kinds and any(kind.startswith("supervisor.") for kind in kinds), kinds
    stores = {
        "database": _database_text(services.database_url),
        "redis": _redis_text(services.redis_url, private_stack.namespace),
        "logs": _logs(private_stack),
        "webhooks": json.dumps(receiver.deliveries, ensure_ascii=False),
        "record": json.dumps(record, ensure_ascii=False),
        "call log": json.dumps(client.call_log(session_id), ensure_ascii=False),
        "export": _export(services, session_id),
    }
    # The stores were read: the masked card is kept where the record and the log are.
    escaped = json.dumps(CARD_MASK)[1:-1]
    kept = [name for name, text in stores.items() if CARD_MASK in text or escaped in text]
    assert {"database", "record", "webhooks"} <= set(kept), kept
    assert "r•••@example.org" in stores["record"] or "r•••@example.org" in stores["database"]
    assert {name: leaks(text) for name, text in stores.items() if leaks(text)} == {}
    # Each refused delivery was logged by its id, not by what it carried.
    assert marker not in stores["logs"]
