"""Agents end to end (issue 47): an agent's versions through the API, a call naming it runs the
published version and keeps it whatever is published meanwhile, rollback, a pinned version, a
route naming an agent, and every refusal by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script, simulator_call
from tests.support.browser import Browser
from tests.support.phone import ring
from tests.support.waiting import wait_for

V1 = {
    "instructions": "You are Acme's order desk. The caller is {name}.",
    "greeting": {"say": "Hello {name}, Acme here."},
    "voice": "cedar",
}
V2 = {**V1, "instructions": "You are Acme's returns desk. The caller is {name}.", "voice": "marin"}
# A caller who talks long enough for a version to be published while the call runs.
LONG_CALL = {
    "name": "agents",
    "caller": [
        {"say": "Hi, where is my order?", "after_ms": 200},
        {"say": "Thanks.", "after_ms": 1_500},
        {"hangup": True, "after_ms": 300},
    ],
    "model": [{"say": "Hello."}, {"say": "It ships Friday."}, {"say": "Bye."}],
}


def _ok(client: Client, method: str, path: str, body: Any = None, expected: int = 200) -> dict[str, Any]:
    status, answer = client.request(method, path, body)
    assert status == expected, (status, answer)
    return dict(answer)


def _agent(client: Client, name: str, *versions: dict[str, Any]) -> None:
    """An agent of `name` with `versions` added, none published."""
    _ok(client, "POST", "/v1/agents", {"name": name}, 201)
    for number, version in enumerate(versions, start=1):
        added = _ok(client, "POST", f"/v1/agents/{name}/versions", version, 201)
        assert (added["version"], added["status"]) == (number, "draft")


def _instructions_sent(stack: Stack, call_id: str) -> str:
    updates = [
        c["control"]
        for c in simulator_call(stack, call_id)["controls"]
        if c["control"]["type"] == "session.update"
    ]
    return str(
        next(update["session"]["instructions"] for update in updates if "instructions" in update["session"])
    )


def test_a_call_keeps_its_version_while_another_is_published_and_rollback_brings_it_back(
    stack: Stack, client: Client
) -> None:
    _agent(client, "orders", V1, V2)
    _ok(client, "POST", "/v1/agents/orders/versions/1/publish")
    set_script(stack, LONG_CALL)

    first = client.create_session("", agent="orders", vars={"name": "Ada"})
    assert first["agent"] == {"name": "orders", "version": 1}
    connected = client.connect(first["id"])
    # Published while the first call runs: the call keeps version 1.
    published = _ok(client, "POST", "/v1/agents/orders/versions/2/publish")
    assert published["agent"]["published_version"] == 2
    ended = client.wait_for_status(first["id"], timeout_s=60)
    assert ended["status"] == "ended" and ended["agent"] == {"name": "orders", "version": 1}
    assert ended["voice"] == "cedar"
    assert (
        _instructions_sent(stack, connected["call_id"]) == 'You are Acme\'s order desk. The caller is "Ada".'
    )
    story = client.call_log(first["id"])["entries"]
    assert story[0]["kind"] == "call.started" and story[0]["data"]["agent"] == {
        "name": "orders",
        "version": 1,
    }
    # What the agent's calls cost, by agent.
    port = stack.workers[0].ready["metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        scraped = response.read().decode()
    assert any(
        line.startswith("switchboard_cost_usd_total{")
        and 'agent="orders"' in line
        and float(line.split()[1]) > 0
        for line in scraped.splitlines()
    )

    set_script(stack, SCRIPTS / "spoken_call.json")
    second = client.create_session("", agent="orders", vars={"name": "Bo"})
    assert second["agent"] == {"name": "orders", "version": 2} and second["voice"] == "marin"

    rolled = _ok(client, "POST", "/v1/agents/orders/rollback")
    assert rolled["agent"]["published_version"] == 1
    third = client.create_session("", agent="orders", vars={"name": "Cy"})
    assert third["agent"] == {"name": "orders", "version": 1}
    pinned = client.create_session("", agent="orders@2", vars={"name": "Di"})
    assert pinned["agent"] == {"name": "orders", "version": 2}

    shown = _ok(client, "GET", "/v1/agents/orders")["agent"]
    by_version = {each["version"]: each for each in shown["versions"]}
    assert by_version[1]["status"] == "published" and by_version[2]["status"] == "superseded"
    assert by_version[1]["calls"] == 2 and by_version[2]["calls"] == 2
    assert [each["version"] for each in shown["publications"]] == [1, 2, 1]
    changed = _ok(client, "GET", "/v1/agents/orders/diff?from=1&to=2")["changes"]
    assert {change["path"] for change in changed} == {"instructions", "voice"}


def test_a_version_a_call_runs_cannot_be_deleted_and_a_call_s_own_fields_win(
    stack: Stack, client: Client
) -> None:
    _agent(client, "desk", {"instructions": "You are the desk."}, {"instructions": "You are the new desk."})
    _ok(client, "POST", "/v1/agents/desk/versions/2/publish")
    set_script(stack, LONG_CALL)
    session = client.create_session("", agent="desk@1", voice="sage")
    assert session["voice"] == "sage"  # the call's own field over its version's
    client.connect(session["id"])
    wait_for(lambda: client.session(session["id"])["status"] in ("listening", "responding"), "the call")
    status, refused = client.request("DELETE", "/v1/agents/desk/versions/1")
    assert status == 409 and refused["error"]["code"] == "version_in_use"
    status, refused = client.request("DELETE", "/v1/agents/desk/versions/2")
    assert status == 409 and refused["error"]["code"] == "version_published"
    client.end(session["id"])
    client.wait_for_status(session["id"], timeout_s=30)
    assert _ok(client, "DELETE", "/v1/agents/desk/versions/1") == {"agent": "desk", "deleted": 1}
    status, gone = client.request("GET", "/v1/agents/desk/versions/1")
    assert status == 404 and gone["error"]["code"] == "agent_version_not_found"


def test_a_route_naming_an_agent_answers_with_its_published_version(stack: Stack, client: Client) -> None:
    _agent(
        client, "front", {"instructions": "You are Acme's front desk.", "greeting": {"say": "Acme, hello."}}
    )
    status, refused = client.request("POST", "/v1/routes", {"number": "+18005550777", "agent": "front"})
    assert status == 409 and refused["error"]["code"] == "agent_not_published"
    _ok(client, "POST", "/v1/agents/front/versions/1/publish")
    route = _ok(client, "POST", "/v1/routes", {"number": "+18005550777", "agent": "front"}, 201)["route"]
    set_script(
        stack,
        {"name": "front", "caller": [{"hangup": True, "after_ms": 800}], "model": [{"say": "Acme, hello."}]},
    )
    call_id = ring(stack, "+18005550777")
    answered = wait_for(lambda: _answered(client, call_id), "the call's record")
    assert answered["route_id"] == route["id"]
    record = client.wait_for_status(answered["session_id"], timeout_s=30)
    assert record["agent"] == {"name": "front", "version": 1}


def _answered(client: Client, call_id: str) -> dict[str, Any] | None:
    status, body = client.request("GET", f"/v1/phone-calls/{call_id}")
    return dict(body) if status == 200 and body.get("session_id") else None


def test_every_refusal_names_what_it_refuses(client: Client) -> None:
    cases = [
        ("POST", "/v1/sessions", {"agent": "nobody"}, 404, "agent_not_found"),
        ("GET", "/v1/agents/nobody", None, 404, "agent_not_found"),
        ("POST", "/v1/sessions", {"agent": "Not A Name"}, 422, "malformed_request"),
        ("POST", "/v1/sessions", {}, 422, "malformed_request"),
        ("POST", "/v1/agents", {"name": "Bad Name"}, 422, "malformed_request"),
    ]
    _agent(client, "lonely", {"instructions": "Hello {name}."})
    cases += [
        ("POST", "/v1/agents", {"name": "lonely"}, 409, "agent_exists"),
        ("POST", "/v1/sessions", {"agent": "lonely"}, 409, "agent_not_published"),
        ("POST", "/v1/sessions", {"agent": "lonely@7"}, 404, "agent_version_not_found"),
        ("POST", "/v1/sessions", {"agent": "lonely@1"}, 422, "malformed_request"),  # {name} left empty
        (
            "POST",
            "/v1/agents/lonely/versions",
            {"instructions": "x", "agent": "other"},
            422,
            "malformed_request",
        ),
        ("POST", "/v1/agents/lonely/versions", {"instructions": "x", "tools": ["nope"]}, 422, "unknown_tool"),
        (
            "POST",
            "/v1/agents/lonely/versions",
            {"instructions": "x", "model": "gpt-live-1.1"},
            422,
            "malformed_request",
        ),
        ("POST", "/v1/agents/lonely/versions/9/publish", None, 404, "agent_version_not_found"),
        ("POST", "/v1/agents/lonely/rollback", None, 409, "nothing_to_roll_back"),
        ("GET", "/v1/agents/lonely/diff?from=1&to=5", None, 404, "agent_version_not_found"),
        ("GET", "/v1/agents/lonely/versions/x", None, 404, "agent_version_not_found"),
    ]
    for method, path, body, status, code in cases:
        got, answer = client.request(method, path, body)
        assert (got, answer["error"]["code"]) == (status, code), (method, path, body, answer)
    _ok(client, "POST", "/v1/agents/lonely/archive")
    got, answer = client.request("POST", "/v1/sessions", {"agent": "lonely@1", "vars": {"name": "Ada"}})
    assert (got, answer["error"]["code"]) == (409, "agent_archived")


def test_a_viewer_reads_agents_and_only_an_administrator_changes_them(
    stack: Stack, client: Client, services: Services
) -> None:
    _agent(client, "readable", {"instructions": "Hi."})
    made = subprocess.run(
        [sys.executable, "-m", "switchboard", "keys", "add", "vera", "--role", "viewer"],
        env={
            **os.environ,
            "SWITCHBOARD_DATABASE_URL": services.database_url,
            "SWITCHBOARD_REDIS_URL": services.redis_url,
            "SWITCHBOARD_BROKER_NAMESPACE": stack.namespace,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    viewer = Client(stack.api_url, json.loads(made.stdout)["key"])
    status, shown = viewer.request("GET", "/v1/agents/readable")
    assert status == 200 and shown["agent"]["name"] == "readable"
    for method, path, body in (
        ("POST", "/v1/agents", {"name": "mine"}),
        ("POST", "/v1/agents/readable/versions", {"instructions": "Changed."}),
        ("POST", "/v1/agents/readable/versions/1/publish", None),
    ):
        status, refused = viewer.request(method, path, body)
        assert status == 403, (path, refused)


def test_the_command_line_makes_publishes_and_compares_versions(stack: Stack, tmp_path: Any) -> None:
    def agents(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "switchboard", "agents", *arguments, "--api", stack.api_url],
            env={**os.environ, "SWITCHBOARD_API_TOKEN": stack.api_token},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    first, second = tmp_path / "v1.json", tmp_path / "v2.json"
    first.write_text(json.dumps({"instructions": "You are the billing desk."}))
    second.write_text(json.dumps({"instructions": "You are the billing desk.", "voice": "sage"}))
    assert agents("create", "billing").returncode == 0
    for spec in (first, second):
        added = agents("add-version", "billing", "--spec", str(spec))
        assert added.returncode == 0, added.stderr
    assert agents("publish", "billing", "1").returncode == 0
    assert agents("publish", "billing", "2").returncode == 0
    shown = json.loads(agents("show", "billing").stdout)["agent"]
    assert shown["published_version"] == 2
    diff = json.loads(agents("diff", "billing", "1", "2").stdout)
    assert diff["changes"] == [{"path": "voice", "from": None, "to": "sage"}]
    rolled = agents("rollback", "billing")
    assert rolled.returncode == 0 and json.loads(rolled.stdout)["agent"]["published_version"] == 1
    refused = agents("publish", "billing", "9")
    assert (
        refused.returncode == 1 and json.loads(refused.stderr)["error"]["code"] == "agent_version_not_found"
    )
    assert agents("publish", "billing").returncode == 2  # no version named


def test_the_console_shows_an_agent_s_versions_publications_changes_and_calls(
    stack: Stack, client: Client
) -> None:
    _agent(
        client,
        "console-desk",
        {"instructions": "You are the desk."},
        {"instructions": "You are the <b>new</b> desk."},
    )
    _ok(client, "POST", "/v1/agents/console-desk/versions/1/publish")
    session = client.create_session("", agent="console-desk")
    _ok(client, "POST", "/v1/agents/console-desk/versions/2/publish")
    browser = Browser()
    try:
        browser.goto(f"{stack.api_url}/console#/agents")
        browser.eval(
            f"document.getElementById('key').value = {json.dumps(stack.api_token)};"
            "document.getElementById('key-form').requestSubmit(); true"
        )
        browser.wait_for("document.querySelector('#agents tr[data-agent=\"console-desk\"]') !== null")
        listed = browser.eval("document.querySelector('#agents tr[data-agent=\"console-desk\"]').textContent")
        browser.eval("location.hash = '#/agent/console-desk'; true")
        browser.wait_for("document.querySelectorAll('#versions tr[data-version]').length === 2")
        rows = "Array.from(document.querySelectorAll('#versions tr'))"
        statuses = browser.eval(f"{rows}.map(r => r.dataset.status + ':' + r.textContent)")
        published = browser.eval(
            "Array.from(document.querySelectorAll('#publications tr')).map(r => r.textContent)"
        )
        browser.eval("document.getElementById('compare').click(); true")
        browser.wait_for("document.querySelectorAll('#changes tr').length > 0")
        changed = browser.eval("Array.from(document.querySelectorAll('#changes tr')).map(r => r.textContent)")
        injected = browser.eval("document.querySelectorAll('#changes b').length")
        browser.eval("location.hash = '#/calls?agent=console-desk@1'; true")
        browser.wait_for(f"document.querySelector('#calls tr[data-session=\"{session['id']}\"]') !== null")
        calls = browser.eval("document.querySelectorAll('#calls tr[data-session]').length")
    finally:
        browser.close()
    assert "version 2" in listed
    assert statuses[0].startswith("superseded:1") and "1 call" in statuses[0]
    assert statuses[1].startswith("published:2") and "0 calls" in statuses[1]
    assert [row[:1] for row in published] == ["2", "1"]
    assert changed == ["instructionsYou are the desk.You are the <b>new</b> desk."]
    assert injected == 0  # a version's text is shown as text, never as markup
    assert calls == 1


def test_a_version_sent_ten_times_at_once_under_one_key_is_added_once(stack: Stack, client: Client) -> None:
    _agent(client, "retried")
    body = json.dumps({"instructions": "You are the retried desk."}).encode()

    def post() -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            f"{stack.api_url}/v1/agents/retried/versions",
            data=body,
            method="POST",
            headers={
                "Authorization": f"Bearer {stack.api_token}",
                "Content-Type": "application/json",
                "Idempotency-Key": "add-the-version",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: post(), range(10)))
    added = [answer for status, answer in answers if status == 201]
    assert added and {answer["version"] for answer in added} == {1}
    assert {answer["error"]["code"] for status, answer in answers if status != 201} <= {"request_in_progress"}
    assert [each["version"] for each in _ok(client, "GET", "/v1/agents/retried")["agent"]["versions"]] == [1]


def test_another_deployment_s_agents_are_unknown_here(
    stack: Stack, client: Client, services: Services
) -> None:
    _agent(client, "ours", {"instructions": "Ours."})
    _ok(client, "POST", "/v1/agents/ours/versions/1/publish")
    with Stack(services.database_url, services.redis_url, namespace=f"{stack.namespace}-theirs") as theirs:
        theirs.start(workers=1)
        other = Client(theirs.api_url, theirs.api_token)
        for method, path, body in (
            ("GET", "/v1/agents/ours", None),
            ("POST", "/v1/sessions", {"agent": "ours"}),
            ("POST", "/v1/agents/ours/versions/1/publish", None),
            ("POST", "/v1/agents/ours/versions", {"instructions": "Theirs now."}),
        ):
            status, answer = other.request(method, path, body)
            assert (status, answer["error"]["code"]) == (404, "agent_not_found"), (path, answer)
        status, listed = other.request("GET", "/v1/agents")
        assert status == 200 and listed["agents"] == []
    assert [each["version"] for each in _ok(client, "GET", "/v1/agents/ours")["agent"]["versions"]] == [1]
