"""A secret is given once and answered back to no key (issue 44): a route's or a campaign's
webhook secret, its event stream's broker password and a trunk's password are in none of the
answers that create, list or show them — to the admin who set them either."""

from __future__ import annotations

import json
import uuid

from switchboard.client import Client
from switchboard.stack import Stack

SECRET = "whsec_" + "c3dpdGNoYm9hcmQtd2ViaG9vay1zZWNyZXQ="
PASSWORD = f"broker-{uuid.uuid4().hex}"
TRUNK_PASSWORD = f"trunk-{uuid.uuid4().hex}"


def test_no_answer_holds_a_secret_that_was_given(stack: Stack) -> None:
    client = Client(stack.api_url, stack.api_token)
    session = {
        "instructions": "You are the night desk.",
        "webhook": {"url": "https://app.example.com/hooks", "secret": SECRET},
        "events": {"url": f"amqp://app:{PASSWORD}@127.0.0.1:5672//"},
    }
    number = f"+1212555{uuid.uuid4().int % 10_000:04d}"
    answers = [client.request("POST", "/v1/routes", {"number": number, "session": session})]
    route_id = answers[0][1]["route"]["id"]
    answers += [client.request("GET", "/v1/routes"), client.request("GET", f"/v1/routes/{route_id}")]
    trunk = {
        "name": f"secrets-{uuid.uuid4().hex[:6]}",
        "url": "sips:sip.example.com",
        "username": "acme",
        "password": TRUNK_PASSWORD,
        "caller_number": "+12125550100",
    }
    answers += [client.request("POST", "/v1/trunks", trunk), client.request("GET", "/v1/trunks")]
    answers += [client.request("GET", f"/v1/trunks/{trunk['name']}")]
    live = {**session, "provider": "live"}
    campaign = {
        "name": "secrets",
        "session": live,
        "trunk": trunk["name"],
        "contacts": [{"to": "+14155550123"}],
        "paused": True,
    }
    created = client.request("POST", "/v1/campaigns", campaign)
    answers += [created, client.request("GET", "/v1/campaigns")]
    answers += [client.request("GET", f"/v1/campaigns/{created[1]['id']}")]

    assert [status for status, _ in answers] == [201, 200, 200, 201, 200, 200, 201, 200, 200], answers
    shown = json.dumps([answer for _, answer in answers])
    # They were read: the route, trunk and campaign are in the answers, their URLs shown.
    assert route_id in shown and trunk["name"] in shown and "https://app.example.com/hooks" in shown
    assert SECRET not in shown and SECRET.removeprefix("whsec_") not in shown
    assert PASSWORD not in shown and TRUNK_PASSWORD not in shown
