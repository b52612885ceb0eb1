"""Two deployments on one PostgreSQL and one Redis, each with its own admin token: every route of
the API document, asked by one deployment with the other's ids, answers as if those ids did not
exist, and changes nothing of the other's (B's gateway once read A's call, minted a token to watch
it, spoke in it and ended it)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS
from tests.support.phone import ring
from tests.support.queues import doomed_message
from tests.support.waiting import wait_for

# Routes that hold nothing of a deployment's calls: health, the document, the console's files,
# metrics of the gateway asked, who the key is, and the provider's signed webhook (signed with
# the deployment's own secret, which another deployment does not have).
WITHOUT_DEPLOYMENT_DATA = {
    "/healthz",
    "/readyz",
    "/openapi.json",
    "/docs",
    "/console",
    "/console/{asset}",
    "/metrics",
    "/v1/me",
    "/v1/webhooks/openai",
}
SUPERVISOR = {"id": "sup-b", "name": "B's supervisor"}
A_NUMBER = "+14155550147"
A_AGENT = "a-desk"


@pytest.fixture(scope="module")
def two(services: Services, namespace: str) -> Iterator[tuple[Stack, Stack]]:
    run = uuid.uuid4().hex[:6]
    with (
        Stack(
            services.database_url,
            services.redis_url,
            namespace=f"{namespace}-apart-a{run}",
            api_token=f"token-a-{run}",
            simulator_args=("--script", str(SCRIPTS / "stays_on_line.json")),
        ) as a,
        Stack(
            services.database_url,
            services.redis_url,
            namespace=f"{namespace}-apart-b{run}",
            api_token=f"token-b-{run}",
        ) as b,
    ):
        a.start(workers=1)
        b.start(workers=1)
        yield a, b


def _a_world(a: Stack, redis_url: str) -> dict[str, Any]:
    """One of everything in deployment A, with its ids."""
    client = Client(a.api_url, a.api_token)
    session = client.create_session("You are A's order desk.")
    client.connect(session["id"])
    # The caller's two lines and the agent's two answers, so nothing more happens in the call.
    wait_for(
        lambda: len(client.session(session["id"])["transcript"]) >= 4, "A's call to be said", timeout_s=30
    )
    trunk = {
        "name": "a-main",
        "url": "sips:sip.example.com",
        "username": "acme",
        "password": f"pw-{uuid.uuid4().hex}",
        "caller_number": "+12125550100",
    }
    client.add_trunk(trunk)
    route = client.add_route("+12125550199", {"instructions": "A's line."})
    client.suppress(A_NUMBER, reason="asked A not to call")
    live = {"instructions": "You remind Sam.", "provider": "live"}
    campaign = client.create_campaign(
        {"name": "A's reminders", "session": live, "contacts": [{"to": "+14155550148"}], "paused": True}
    )
    placed = client.place_call("+14155550149", live, trunk="a-main")
    client._ok("POST", "/v1/agents", {"name": A_AGENT})
    client._ok("POST", f"/v1/agents/{A_AGENT}/versions", {"instructions": "A's agent."})
    client._ok("POST", f"/v1/agents/{A_AGENT}/versions/1/publish")
    phone_call_id = ring(a, "+12125550100")  # no route: turned away, but recorded
    wait_for(lambda: _status(client, f"/v1/phone-calls/{phone_call_id}") == 200, "A's phone call recorded")
    return {
        "session_id": session["id"],
        "route_id": route["id"],
        "call_ids": [placed["call"]["id"], phone_call_id],
        "campaign_id": campaign["campaign"]["id"] if "campaign" in campaign else campaign["id"],
        "name": "a-main",
        "agent": A_AGENT,
        "number": A_NUMBER,
        "letter_id": _a_dead_letter(a, redis_url),
    }


def _a_dead_letter(a: Stack, redis_url: str) -> str:
    """A dead letter of A's (a message that can never succeed), listed by A."""
    letter_id = doomed_message(a, redis_url)
    client = Client(a.api_url, a.api_token)
    wait_for(lambda: _status(client, f"/v1/dead-letters/{letter_id}") == 200, "A's dead letter")
    return letter_id


def _status(client: Client, path: str) -> int:
    return client.request("GET", path)[0]


def _bodies(world: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """A body each route would take from a deployment's own caller: the refusal must come from
    the ids, not from a body that does not validate."""
    return {
        ("POST", "/v1/sessions/{session_id}/connect"): {"sdp": "v=0\r\n"},
        ("POST", "/v1/sessions/{session_id}/end"): {"reason": "ended_by_b"},
        ("POST", "/v1/sessions/{session_id}/caller/text"): {"text": "B typing into A's call"},
        ("POST", "/v1/sessions/{session_id}/agent/say"): {"text": "B speaking in A's call"},
        ("POST", "/v1/sessions/{session_id}/agent/reply"): {"instructions": "Say B was here."},
        ("PUT", "/v1/sessions/{session_id}/prompt/{name}"): {"text": "B's instructions"},
        ("PUT", "/v1/sessions/{session_id}/tools"): {"tools": []},
        ("POST", "/v1/sessions/{session_id}/attention"): {"reason": "B wants a person", "wait_s": 30},
        ("POST", "/v1/sessions/{session_id}/collect"): {"tool": "take_payment", "prompt": "Key it in."},
        ("POST", "/v1/sessions/{session_id}/supervisor"): {
            "by": SUPERVISOR,
            "verb": {"type": "end", "reason": "ended_by_b"},
        },
        ("POST", "/v1/campaigns/{campaign_id}/contacts"): {"contacts": [{"to": "+14155550150"}]},
        ("POST", "/v1/sessions"): {"instructions": "B's own"},
        ("POST", "/v1/routes"): {"number": "+12125550199", "session": {"instructions": "B's line."}},
        ("POST", "/v1/trunks"): {
            "name": world["name"],
            "url": "sips:b.example.com",
            "username": "b",
            "password": "b-password",
            "caller_number": "+12125550101",
        },
        ("POST", "/v1/suppressions"): {"number": world["number"], "reason": "B's own list"},
        ("POST", "/v1/agents"): {"name": world["agent"]},
        ("POST", "/v1/agents/{name}/versions"): {"instructions": "B's version of A's agent."},
    }


def _paths_with(path: str, world: dict[str, Any]) -> list[str]:
    """The path with A's ids in it (one path per id of that kind, and per campaign verb)."""
    values: dict[str, list[str]] = {
        "session_id": [world["session_id"]],
        "route_id": [world["route_id"]],
        "call_id": world["call_ids"],
        "campaign_id": [world["campaign_id"]],
        "name": [world["name"]]
        if path.startswith("/v1/trunks")
        else [world["agent"]]
        if path.startswith("/v1/agents")
        else ["instructions"],
        "version": ["1"],
        "number": [world["number"]],
        "letter_id": [world["letter_id"]],
        "verb": ["pause", "resume", "cancel"],
    }
    paths = [path]
    for parameter in (part[1:-1] for part in path.split("/") if part.startswith("{")):
        assert parameter in values, f"{path}: no id of another deployment for {{{parameter}}}"
        paths = [
            done.replace(f"{{{parameter}}}", quote(value, safe="+"))
            for done in paths
            for value in values[parameter]
        ]
    return paths


def test_every_route_asked_with_another_deployments_ids_finds_nothing_and_changes_nothing(
    two: tuple[Stack, Stack], services: Services
) -> None:
    a, b = two
    world = _a_world(a, services.redis_url)
    as_a, as_b = Client(a.api_url, a.api_token), Client(b.api_url, b.api_token)
    before = as_a.session(world["session_id"])
    log_before = as_a.call_log(world["session_id"])["entries"]
    bodies = _bodies(world)
    document = as_b.request("GET", "/openapi.json")[1]
    walked: list[tuple[str, str, int]] = []
    a_ids = [str(value) for key, value in world.items() if key not in ("name", "agent")] + world["call_ids"]

    operations = [
        (method.upper(), template)
        for template, described in document["paths"].items()
        if template not in WITHOUT_DEPLOYMENT_DATA
        for method in described
        if method in ("get", "post", "put", "delete")
    ]
    # The routes that name an id first; then the lists and creates, whose creates (B's own trunk
    # named as A's, B's route for A's number) must leave A's alone.
    for method, template in sorted(operations, key=lambda operation: "{" not in operation[1]):
        if template.endswith("/live"):
            for path in _paths_with(template, world):
                walked.append((method, path, _live_refusal(b, path)))
            continue
        if "{" not in template:
            status, answer = as_b.request(method, template, bodies.get((method, template)))
            walked.append((method, template, status))
            assert status < 500, f"{method} {template} answered {status} to B: {answer}"
            if method == "GET":
                leaked = [value for value in a_ids if value in json.dumps(answer)]
                assert leaked == [], f"GET {template} of B lists A's {leaked}"
            continue
        for path in _paths_with(template, world):
            status, answer = as_b.request(method, path, bodies.get((method, template)))
            walked.append((method, path, status))
            if template == "/v1/callers/{number}":
                # An erasure by number is B's own: it finds none of B's calls, and A's stay.
                assert status == 200 and answer["erased"] == 0, (path, answer)
                continue
            assert status == 404, f"{method} {path} answered {status} to B: {answer}"

    # Every route of the document was asked (the session's verbs through every id kind).
    asked = {(method, path) for method, path, _ in walked}
    assert ("POST", f"/v1/sessions/{world['session_id']}/end") in asked
    assert ("GET", f"/v1/dead-letters/{world['letter_id']}") in asked
    assert len(asked) >= 50, sorted(asked)

    # A's call went on as it was: not ended, not spoken in, no prompt or tool change, and every
    # other thing of A's is as A left it.
    after = as_a.session(world["session_id"])
    assert after["status"] == before["status"] == "listening"
    assert after["instructions"] == before["instructions"]
    kinds = {entry["kind"] for entry in as_a.call_log(world["session_id"])["entries"]}
    assert kinds == {entry["kind"] for entry in log_before}, kinds
    assert as_a.campaign(world["campaign_id"])["status"] == "paused"
    assert as_a.request("GET", f"/v1/trunks/{world['name']}")[1]["trunk"]["url"] == "sips:sip.example.com"
    agent = as_a.request("GET", f"/v1/agents/{world['agent']}")[1]["agent"]
    assert (agent["published_version"], len(agent["versions"]), agent["archived_at"]) == (1, 1, None)
    route = as_a.request("GET", f"/v1/routes/{world['route_id']}")[1]["route"]
    assert route["session"]["instructions"] == "A's line."
    assert as_a.request("GET", f"/v1/suppressions/{quote(world['number'], safe='+')}")[0] == 200
    assert _status(as_a, f"/v1/dead-letters/{world['letter_id']}") == 200
    for call_id in world["call_ids"]:
        assert (
            _status(as_a, f"/v1/calls/{call_id}") == 200 or _status(as_a, f"/v1/phone-calls/{call_id}") == 200
        )
    as_a.end(world["session_id"])


def _live_refusal(b: Stack, path: str) -> int:
    """B's live stream of A's call: opened with B's admin token, closed at once as unknown."""
    try:
        with connect(
            f"{b.live_url}{path}", additional_headers={"Authorization": f"Bearer {b.api_token}"}
        ) as socket:
            socket.recv(timeout=10)
    except InvalidStatus as refused:
        return refused.response.status_code
    except ConnectionClosed as closed:  # 4404: a session it does not know
        code = closed.rcvd.code if closed.rcvd is not None else None
        assert code == 4404, f"B's live stream of {path} was not closed as unknown: {closed!r}"
        return 404
    raise AssertionError(f"B's live stream of {path} sent A's call")
