"""API keys with roles, end to end: made and revoked with `switchboard keys`, checked by the
gateway on every route, and a supervisor's identity taken from their key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

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
