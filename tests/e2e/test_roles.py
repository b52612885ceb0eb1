"""API keys with roles, end to end: made and revoked with `switchboard keys`, checked by the
gateway on every route, and a supervisor's identity taken from their key; an Idempotency-Key is
its API key's own, and a request sent with one acts once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg2

from pipeline.api import watch_tokens
from pipeline.api.idempotency import STALE_CLAIM_S, fingerprint, fingerprint_key
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script


def _keys(stack: Stack, services: Services, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", "keys", *arguments],
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


def _key(stack: Stack, services: Services, name: str, role: str) -> dict[str, Any]:
    made = _keys(stack, services, "add", name, "--role", role)
    assert made.returncode == 0, made.stderr
    return dict(json.loads(made.stdout))


def test_each_role_may_do_its_own_and_nothing_else(stack: Stack, client: Client, services: Services) -> None:
    set_script(stack, {"name": "quiet", "caller": [{"hangup": True, "after_ms": 30_000}], "model": []})
    app = Client(stack.api_url, _key(stack, services, "billing-app", "app")["key"], stack.live_url)
    viewer = Client(stack.api_url, _key(stack, services, "wallboard", "viewer")["key"], stack.live_url)
    dana_key = _key(stack, services, "Dana", "supervisor")
    dana = Client(stack.api_url, dana_key["key"], stack.live_url)

    session = app.create_session("You are the billing desk.")
    sid = session["id"]
    app.connect(sid)
    deadline = time.monotonic() + 20
    while viewer.session(sid)["status"] != "listening" and time.monotonic() < deadline:
        time.sleep(0.05)

    take_over = {"verb": {"type": "take_over"}}
    assert viewer.request("POST", f"/v1/sessions/{sid}/supervisor", take_over)[0] == 403
    assert viewer.request("POST", f"/v1/sessions/{sid}/end")[0] == 403
    assert app.request("POST", "/v1/routes", {"number": "+1555", "session": {"instructions": "x"}})[0] == 403
    assert app.request("POST", f"/v1/sessions/{sid}/supervisor", take_over)[0] == 403
    nobody = Client(stack.api_url, "", stack.live_url)
    assert nobody.request("GET", f"/v1/sessions/{sid}")[0] == 401
    forged = Client(stack.api_url, dana_key["key"][:-4] + "AAAA", stack.live_url)
    assert forged.request("GET", f"/v1/sessions/{sid}")[0] == 401

    # The supervisor acts as themselves: the key names them, whatever the body claims.
    taken = dana.request(
        "POST",
        f"/v1/sessions/{sid}/supervisor",
        {"by": {"id": "someone_else"}, "verb": {"type": "take_over"}},
    )
    assert taken[0] == 200
    assert dana.request("POST", f"/v1/sessions/{sid}/end")[0] == 403
    entry = next(e for e in viewer.call_log(sid)["entries"] if e["kind"] == "supervisor.took_over")
    assert entry["data"]["by"] == {"id": dana_key["id"], "name": "Dana"}
    # The deployment's token must say who acts.
    no_one = client.request("POST", f"/v1/sessions/{sid}/supervisor", {"verb": {"type": "release"}})
    assert (no_one[0], no_one[1]["error"]["code"]) == (422, "malformed_request")

    listed = _keys(stack, services, "list")
    assert dana_key["id"] in listed.stdout and dana_key["key"] not in listed.stdout
    assert _keys(stack, services, "revoke", dana_key["id"]).returncode == 0
    deadline = time.monotonic() + 15
    while dana.request("GET", f"/v1/sessions/{sid}")[0] != 401:
        assert time.monotonic() < deadline, "a revoked key still works"
        time.sleep(0.5)
    app.end(sid)


# ── Idempotency-Key: the key's own, one effect however often it is sent ──────────────────


def _post(
    stack: Stack, token: str, path: str, body: bytes, key: str | None, content_type: str = "application/json"
) -> tuple[int, Any, dict[str, str]]:
    """A POST with its answer's status, JSON body and headers, names lowercased (the client
    keeps no headers)."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(f"{stack.api_url}{path}", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), _lowered(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), _lowered(error.headers)


def _lowered(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _sessions_told(services: Services, instructions: str) -> int:
    with psycopg2.connect(services.database_url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sessions WHERE instructions = %s", (instructions,))
        return int(cursor.fetchone()[0])


def test_twenty_identical_creates_at_once_make_one_session(stack: Stack, services: Services) -> None:
    """Twenty POST /v1/sessions with one Idempotency-Key at once: one session; each answer is
    its 201 (the first, or replayed) or 409 `request_in_progress`; another body under the key is
    refused; another API key's same key is its own."""
    app = _key(stack, services, "retrying-app", "app")["key"]
    instructions = f"You are the front desk {uuid.uuid4().hex}."
    body = json.dumps({"instructions": instructions}).encode()
    key = f"create-{uuid.uuid4().hex}"
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: _post(stack, app, "/v1/sessions", body, key), range(20)))

    assert _sessions_told(services, instructions) == 1
    created = [answer for status, answer, _ in answers if status == 201]
    refused = [answer["error"]["code"] for status, answer, _ in answers if status != 201]
    assert created and set(refused) <= {"request_in_progress"}
    assert len({answer["id"] for answer in created}) == 1
    # Each 201, replayed or not, says where the session is.
    locations = {headers.get("location") for status, _, headers in answers if status == 201}
    assert locations == {f"/v1/sessions/{created[0]['id']}"}
    assert sum(1 for status, _, headers in answers if headers.get("idempotent-replayed") == "true") == (
        len(created) - 1
    )
    # Asked again once all have answered: the first answer, replayed, and still one session.
    status, again, headers = _post(stack, app, "/v1/sessions", body, key)
    assert (status, again, headers.get("idempotent-replayed")) == (201, created[0], "true")
    assert headers["location"] == f"/v1/sessions/{created[0]['id']}"
    reused = _post(stack, app, "/v1/sessions", json.dumps({"instructions": "Other."}).encode(), key)
    assert (reused[0], reused[1]["error"]["code"]) == (422, "idempotency_key_reused")
    other_app = _key(stack, services, "other-app", "app")["key"]
    theirs = _post(stack, other_app, "/v1/sessions", body, key)
    assert theirs[0] == 201 and theirs[1]["id"] != created[0]["id"]
    assert "idempotent-replayed" not in theirs[2]
    assert _sessions_told(services, instructions) == 2
    for malformed in ("x" * 256, "tab\tin"):
        status, answer, _ = _post(stack, app, "/v1/sessions", body, malformed)
        assert (status, answer["error"]["code"]) == (422, "malformed_idempotency_key")
    # A body that does not say it is JSON is refused before anything happens: no session, and
    # its Idempotency-Key is not taken (the same key then creates the session).
    plain = f"You are the plain desk {uuid.uuid4().hex}."
    plain_body = json.dumps({"instructions": plain}).encode()
    plain_key = f"plain-{uuid.uuid4().hex}"
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        status, answer, _ = _post(stack, app, "/v1/sessions", plain_body, plain_key, content_type)
        assert (status, answer["error"]["code"]) == (415, "unsupported_media_type")
    assert _sessions_told(services, plain) == 0
    status, answer, headers = _post(stack, app, "/v1/sessions", plain_body, plain_key)
    assert status == 201 and "idempotent-replayed" not in headers
    assert _sessions_told(services, plain) == 1


def test_a_verb_sent_twice_with_its_key_acts_once(stack: Stack, client: Client) -> None:
    """`end` sent twice with one key ends the call once and answers the same twice; without a
    key, the second `end` is told the call is over."""
    set_script(stack, {"name": "quiet", "caller": [{"hangup": True, "after_ms": 30_000}], "model": []})
    sid = client.create_session("You are the billing desk.")["id"]
    client.connect(sid)
    body = json.dumps({"reason": "app_ended"}).encode()
    key = f"end-{uuid.uuid4().hex}"
    first = _post(stack, stack.api_token, f"/v1/sessions/{sid}/end", body, key)
    second = _post(stack, stack.api_token, f"/v1/sessions/{sid}/end", body, key)
    assert first[0] == 202 and (second[0], second[1]) == (first[0], first[1])
    assert (first[2].get("idempotent-replayed"), second[2].get("idempotent-replayed")) == (None, "true")
    assert _post(stack, stack.api_token, f"/v1/sessions/{sid}/end", body, None)[0] == 409
    ended = [e for e in client.call_log(sid)["entries"] if e["kind"] == "call.ended"]
    assert len(ended) == 1


def test_a_claim_left_running_by_a_dead_gateway_is_taken_over_once_stale(
    stack: Stack, services: Services
) -> None:
    """A claim still running (its gateway died half-way) is 409 while it could still answer,
    and taken over, acting once, when it is older than any request can run."""
    instructions = f"You are the night desk {uuid.uuid4().hex}."
    body = json.dumps({"instructions": instructions}).encode()
    key = f"orphan-{uuid.uuid4().hex}"
    # The deployment's fingerprint key, as its gateways derive it (from the API token).
    deployment = fingerprint_key(watch_tokens.derive_secret(stack.api_token), stack.namespace)
    print_ = fingerprint("POST", "/v1/sessions", body, deployment)

    def claimed_ago(seconds: float) -> None:
        with psycopg2.connect(services.database_url) as connection, connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO idempotency_keys (namespace, owner, key, fingerprint, claim, state, created_at)"
                " VALUES (%s, 'token', %s, %s, 'dead-gateway', 'running', now() - %s * interval '1 second')"
                " ON CONFLICT (namespace, owner, key) DO UPDATE SET created_at = excluded.created_at",
                (stack.namespace, key, print_, seconds),
            )

    claimed_ago(5)
    status, answer, _ = _post(stack, stack.api_token, "/v1/sessions", body, key)
    assert (status, answer["error"]["code"]) == (409, "request_in_progress")
    assert _sessions_told(services, instructions) == 0
    claimed_ago(STALE_CLAIM_S + 5)
    status, answer, _ = _post(stack, stack.api_token, "/v1/sessions", body, key)
    assert status == 201
    replayed = _post(stack, stack.api_token, "/v1/sessions", body, key)
    assert (replayed[0], replayed[1]["id"]) == (201, answer["id"])
    assert _sessions_told(services, instructions) == 1
