"""Calls going out end to end (issue 26), through the simulated Live provider's dial plan: one
call dialled once and told apart as a person or a machine; a campaign of a few dozen contacts
with every outcome, retries and a suppressed number, never over `max_concurrent`; the same with
workers killed at random; and the refusals, each typed."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest

from pipeline.api.pages import page_cursor
from pipeline.platform.timestamps import is_rfc3339
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.test_app_webhooks import SECRET, Receiver
from tests.e2e.test_console import SCREENSHOTS
from tests.e2e.test_roles import _key, _post
from tests.support.browser import Browser
from tests.support.live import _sim, live_session
from tests.support.waiting import wait_for

SESSION = {"instructions": "You remind {name} of an appointment.", "provider": "live"}
TRUNK = {
    "name": "main",
    "url": "sips:sip.example.com",
    "username": "acme",
    "password": f"pw-{uuid.uuid4().hex}",
    "caller_number": "+12125550100",
}
VOICEMAIL = "Hi, you have reached Dana. Please leave a message after the tone."


@pytest.fixture(scope="module")
def dialing(services: Services, namespace: str) -> Iterator[Stack]:
    """Simulator, gateway and two workers; the deployment may place 40 calls at once."""
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-out",
        extra_env={"SWITCHBOARD_MAX_OUTBOUND": "40"},
        simulator_args=("--ringing-limit-ms", "4000"),
    ) as running:
        running.start(workers=2)
        client = Client(running.api_url, running.api_token)
        client.add_trunk(TRUNK)
        yield running


def _plan(stack: Stack, plan: dict[str, Any]) -> None:
    _sim(stack, "PUT", "/_sim/live/dial-plan", plan)


def _dials(stack: Stack) -> dict[str, Any]:
    return dict(_sim(stack, "GET", "/_sim/live/dials"))


def _entries(client: Client, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [entry["data"] for entry in client.call_log(session_id)["entries"] if entry["kind"] == kind]


def _number() -> str:
    """A valid San Francisco number (an exchange of 200 to 999: none starts with 0 or 1)."""
    return f"+1415{random.randrange(2 * 10**6, 10**7)}"


def test_one_call_to_a_person_is_dialled_once_and_the_agent_greets_them(dialing: Stack) -> None:
    client = Client(dialing.api_url, dialing.api_token)
    to = _number()
    _plan(dialing, {to: {"outcome": "human", "script": "live_callee", "ring_ms": 300}})
    placed = client.place_call(to, SESSION, vars={"name": "Dana"})
    call, session_id = placed["call"], placed["session"]["id"]
    assert (call["to"], call["status"]) == (to, "dialing")

    answered = wait_for(lambda: _entries(client, session_id, "call.answered"), "the verdict", timeout_s=30)
    assert answered[0]["answered_by"] == "human", answered
    assert [e["call"] for e in _entries(client, session_id, "call.ringing")] == [call["id"]]
    record = client.wait_for_status(session_id, timeout_s=60)
    assert record["status"] == "ended"
    shown = client.outbound_call(call["id"])
    assert (shown["status"], shown["outcome"], shown["answered_by"]) == ("ended", "completed", "human")
    [attempted] = _entries(client, session_id, "call.attempted")
    assert attempted["outcome"] == "completed"
    # Dialled once, with the call's id as the provider's idempotency key, through the trunk named.
    [dial] = [d for d in _dials(dialing)["dials"] if d["destination"] == to]
    assert (dial["idempotency_key"], dial["repeats"], dial["trunk_host"]) == (
        call["id"],
        0,
        "sip.example.com",
    )
    # The model was told to wait, then that a person answered; the vars were placed as data.
    assert record["outbound"]["outcome"] == "completed" and record["outbound"]["answered_by"] == "human"
    log = live_session(dialing, record["provider_call_id"])
    assert log["errors"] == []
    texts = [c["control"].get("content", "") for c in log["controls"]]
    assert any("A person answered" in text for text in texts)


def test_a_machine_is_hung_up_on_or_left_a_message_once_its_greeting_is_over(
    dialing: Stack, services: Services
) -> None:
    client = Client(dialing.api_url, dialing.api_token)
    hang_up, leave = _number(), _number()
    _plan(
        dialing,
        {
            hang_up: {"outcome": "voicemail", "greeting": VOICEMAIL, "ring_ms": 200},
            leave: {"outcome": "voicemail", "greeting": VOICEMAIL, "ring_ms": 200, "beep_ms": 300},
        },
    )
    first = client.place_call(hang_up, SESSION, vars={"name": "Dana"})
    record = client.wait_for_status(first["session"]["id"], timeout_s=60)
    assert record["end_reason"] == "answering_machine"
    assert client.outbound_call(first["call"]["id"])["outcome"] == "voicemail"
    [answered] = _entries(client, first["session"]["id"], "call.answered")
    assert answered["answered_by"] == "machine" and answered["evidence"]["rule"] == "phrase"

    # A campaign's machine gets its message, once, after the greeting; then the call hangs up.
    message = "This is Acme: your appointment is tomorrow at nine."
    campaign = client.create_campaign(
        {
            "name": "one message",
            "session": SESSION,
            "contacts": [{"to": leave, "vars": {"name": "Dana"}}],
            "voicemail": {"action": "leave_message", "message": message},
        }
    )
    shown = _run_to_completion(services, client, campaign["id"])
    assert shown["counts"]["by_outcome"] == {"voicemail": 1}
    [contact] = client.campaign_contacts(campaign["id"])["contacts"]
    [attempt] = contact["attempts"]
    record = client.session(attempt["session_id"])
    assert record["end_reason"] == "voicemail_left"
    [dial] = [d for d in _dials(dialing)["dials"] if d["destination"] == leave]
    assert message in (dial["message"] or "")


def test_a_dial_the_provider_refuses_fails_that_call_with_its_reason(dialing: Stack) -> None:
    """An organisation not enabled for outbound SIP: the call fails `dial_refused` with the
    provider's answer, and the next call goes out once it is enabled."""
    client = Client(dialing.api_url, dialing.api_token)
    _sim(dialing, "PUT", "/_sim/live/outbound", {"enabled": False})
    try:
        placed = client.place_call(_number(), SESSION, vars={"name": "Dana"})
        record = client.wait_for_status(placed["session"]["id"], timeout_s=60)
        assert (record["status"], record["end_reason"]) == ("failed", "dial_refused")
        shown = client.outbound_call(placed["call"]["id"])
        assert (shown["outcome"], shown["code"]) == ("failed", "dial_refused")
        assert "403" in json.dumps(record["incidents"])
    finally:
        _sim(dialing, "PUT", "/_sim/live/outbound", {"enabled": True})
    to = _number()
    _plan(dialing, {to: {"outcome": "busy", "after_ms": 100}})
    again = client.place_call(to, SESSION, vars={"name": "Dana"})
    client.wait_for_status(again["session"]["id"], timeout_s=60)
    assert client.outbound_call(again["call"]["id"])["outcome"] == "busy"


def test_a_callee_who_asks_not_to_be_called_again_is_never_dialled_again(dialing: Stack) -> None:
    """The provider's Decisions hear "don't call me again": the number goes on the list, once,
    the agent says goodbye, and the next call to it is refused."""
    client = Client(dialing.api_url, dialing.api_token)
    to = _number()
    _plan(dialing, {to: {"outcome": "human", "script": "live_callee_opts_out", "ring_ms": 200}})
    placed = client.place_call(to, SESSION, vars={"name": "Dana"})
    record = client.wait_for_status(placed["session"]["id"], timeout_s=60)
    assert record["outbound"]["outcome"] == "completed"
    assert _entries(client, placed["session"]["id"], "call.opted_out") == [{"by": "model"}]
    listed = {entry["number"]: entry for entry in client.suppressions()["suppressions"]}
    assert listed[to]["source"] == "model" and listed[to]["session_id"] == placed["session"]["id"]
    status, answer = client.request(
        "POST", "/v1/calls", {"to": to, "session": SESSION, "vars": {"name": "D"}}
    )
    assert (status, answer["error"]["code"]) == (409, "suppressed")


def test_a_callee_who_presses_the_opt_out_key_is_suppressed_and_the_call_ends(dialing: Stack) -> None:
    client = Client(dialing.api_url, dialing.api_token)
    to = _number()
    _plan(dialing, {to: {"outcome": "human", "script": "live_callee_presses_opt_out", "ring_ms": 200}})
    placed = client.place_call(to, SESSION, vars={"name": "Dana"}, keys={"9": "opt_out"})
    record = client.wait_for_status(placed["session"]["id"], timeout_s=60)
    assert (record["status"], record["end_reason"]) == ("ended", "opted_out")
    assert _entries(client, placed["session"]["id"], "call.opted_out") == [{"by": "key"}]
    listed = {entry["number"]: entry for entry in client.suppressions()["suppressions"]}
    assert listed[to]["source"] == "opt_out"


def test_calls_that_do_not_connect_end_with_their_outcome(dialing: Stack) -> None:
    client = Client(dialing.api_url, dialing.api_token)
    busy, unanswered, refused = _number(), _number(), _number()
    _plan(
        dialing,
        {
            busy: {"outcome": "busy", "after_ms": 200},
            unanswered: {"outcome": "no_answer", "after_ms": 300},
            refused: {"outcome": "failed", "after_ms": 100, "code": "provider_invite_failed"},
        },
    )
    outcomes = {}
    for to in (busy, unanswered, refused):
        placed = client.place_call(to, SESSION, vars={"name": "Dana"})
        client.wait_for_status(placed["session"]["id"], timeout_s=60)
        shown = client.outbound_call(placed["call"]["id"])
        outcomes[to] = (shown["outcome"], shown["code"])
    assert outcomes == {
        busy: ("busy", "busy"),
        unanswered: ("no_answer", "no_answer"),
        refused: ("failed", "provider_invite_failed"),
    }


def test_calls_are_refused_with_typed_errors(dialing: Stack, services: Services) -> None:
    client = Client(dialing.api_url, dialing.api_token)
    to = _number()
    body = {"to": to, "session": SESSION, "vars": {"name": "Dana"}}
    assert Client(dialing.api_url, "not-a-key").request("POST", "/v1/calls", body)[0] == 401
    status, answer = client.request("POST", "/v1/calls", {**body, "session": {"instructions": "Hi."}})
    assert (status, answer["error"]["code"]) == (409, "not_supported_on_realtime"), answer
    for bad in (
        {**body, "to": "sip:alice@example.com"},
        {**body, "to": "4155550123"},
        {**body, "vars": {"name": ["not", "text"]}},
        {**body, "extra": 1},
        {"to": to, "session": SESSION},  # {name} is filled by nothing
    ):
        status, answer = client.request("POST", "/v1/calls", bad)
        assert status == 422, (bad, answer)
    status, answer = client.request("POST", "/v1/calls", {**body, "trunk": "nope"})
    assert (status, answer["error"]["code"]) == (404, "trunk_not_found")
    client.suppress(to, "asked")
    status, answer = client.request("POST", "/v1/calls", body)
    assert (status, answer["error"]["code"]) == (409, "suppressed")
    # A trunk's password is never answered; a viewer may read, not dial; only an admin takes a
    # number off the do-not-call list.
    listed = json.dumps(client.trunks())
    assert "password" not in listed and TRUNK["password"] not in listed
    watcher = Client(dialing.api_url, _key(dialing, services, "wallboard", "viewer")["key"])
    assert watcher.request("POST", "/v1/calls", body)[0] == 403
    assert watcher.request("GET", "/v1/trunks")[0] == 403
    assert watcher.request("GET", "/v1/suppressions")[0] == 200
    app = Client(dialing.api_url, _key(dialing, services, "dialer-app", "app")["key"])
    assert app.request("DELETE", f"/v1/suppressions/{to}")[0] == 403
    assert client.request("GET", "/v1/calls/call_nope")[0] == 404
    # The same call asked twice at once: two calls, each dialled once (an app that wants one
    # dial for a retried request sends an Idempotency-Key: below).
    again = _number()
    _plan(dialing, {again: {"outcome": "busy", "after_ms": 100}})
    twice = {**body, "to": again}
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: client.request("POST", "/v1/calls", twice), range(2)))
    assert [status for status, _ in answers] == [201, 201]
    ids = {answer["call"]["id"] for _, answer in answers}
    for _, answer in answers:
        client.wait_for_status(answer["session"]["id"], timeout_s=60)
    dials = [d for d in _dials(dialing)["dials"] if d["destination"] == again]
    assert sorted(d["idempotency_key"] for d in dials) == sorted(ids)


def test_a_suppressed_number_is_never_dialled_in_any_spelling_and_a_number_that_is_none_is_refused(
    dialing: Stack, services: Services
) -> None:
    """Issue 44: with +442071234567 on the list, a call to +4402071234567 (the same number, the
    UK trunk prefix written inside) is 409 `suppressed` and never dialled; +490301234567 listed
    stops +49301234567 likewise, and a campaign's contact written either way ends `suppressed`;
    +1415 and +99912345678 are 422 wherever a number is taken, never dialled; the list shows and
    removes a number by any spelling, and a call placed once it is removed dials its E.164 form."""
    client = Client(dialing.api_url, dialing.api_token)
    sent = {"session": SESSION, "vars": {"name": "Dana"}}
    for listed, dialled in (("+442071234567", "+4402071234567"), ("+490301234567", "+49301234567")):
        assert client.suppress(listed, "asked")["number"] == listed.replace("+490", "+49")
        status, answer = client.request("POST", "/v1/calls", {**sent, "to": dialled})
        assert (status, answer["error"]["code"]) == (409, "suppressed"), answer
    for nonsense in ("+1415", "+99912345678"):
        status, answer = client.request("POST", "/v1/calls", {**sent, "to": nonsense})
        assert (status, answer["error"]["code"]) == (422, "malformed_request"), answer
        assert "phone number" in answer["error"]["message"]
        status, answer = client.request("POST", "/v1/suppressions", {"number": nonsense})
        assert (status, answer["error"]["code"]) == (422, "malformed_request"), answer
        status, answer = client.request("GET", f"/v1/suppressions/{_q(nonsense)}")
        assert (status, answer["error"]["code"]) == (422, "malformed_number"), answer
    status, shown = client.request("GET", f"/v1/suppressions/{_q('+44 (0)20 7123 4567')}")
    assert (status, shown["suppression"]["number"]) == (200, "+442071234567")

    campaign = client.create_campaign(
        {
            "name": "spellings",
            "session": SESSION,
            "contacts": [{"to": "+44 020 7123 4567", "vars": {"name": "Ada"}}],
        }
    )
    _run_to_completion(services, client, campaign["id"])
    [contact] = client.campaign_contacts(campaign["id"])["contacts"]
    assert (contact["to"], contact["outcome"], contact["attempts"]) == ("+442071234567", "suppressed", [])

    status, removed = client.request("DELETE", f"/v1/suppressions/{_q('+49 030 1234567')}")
    assert (status, removed["number"]) == (200, "+49301234567")
    _plan(dialing, {"+49301234567": {"outcome": "busy", "after_ms": 100}})
    placed = client.place_call("+490301234567", SESSION, vars={"name": "Dana"})
    assert placed["call"]["to"] == "+49301234567"
    client.wait_for_status(placed["session"]["id"], timeout_s=60)
    dials = [d["destination"] for d in _dials(dialing)["dials"]]
    assert dials.count("+49301234567") == 1
    never = {"+442071234567", "+4402071234567", "+490301234567", "+1415", "+99912345678"}
    assert not never & set(dials)


def test_a_call_retried_with_its_idempotency_key_is_dialled_once(dialing: Stack) -> None:
    """Two POST /v1/calls with one Idempotency-Key at once, then a retry: one call, one dial
    under the call's id, and the retry answered the first answer (the same call id)."""
    client = Client(dialing.api_url, dialing.api_token)
    to = _number()
    _plan(dialing, {to: {"outcome": "busy", "after_ms": 100}})
    body = {"to": to, "session": SESSION, "vars": {"name": "Dana"}}
    key = {"Idempotency-Key": f"dial-{uuid.uuid4().hex}"}
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: client.request("POST", "/v1/calls", body, headers=key), range(2)))
    placed = [answer for status, answer in answers if status == 201]
    assert placed and all(status in (201, 409) for status, _ in answers), answers
    assert len({answer["call"]["id"] for answer in placed}) == 1
    retried = _post(
        dialing, dialing.api_token, "/v1/calls", json.dumps(body).encode(), key["Idempotency-Key"]
    )
    assert retried[:2] == (201, placed[0]) and retried[2]["idempotent-replayed"] == "true"
    assert retried[2]["location"] == f"/v1/calls/{placed[0]['call']['id']}"
    client.wait_for_status(placed[0]["session"]["id"], timeout_s=60)
    dials = [d for d in _dials(dialing)["dials"] if d["destination"] == to]
    assert [(d["idempotency_key"], d["repeats"]) for d in dials] == [(placed[0]["call"]["id"], 0)]


def test_a_list_paged_while_numbers_are_added_yields_each_once_in_order(dialing: Stack) -> None:
    """The do-not-call list, three at a time, while numbers are added before and after the page
    being read: every number there from the start comes once, in number order; a page range by
    creation time; a cursor this list never gave, a limit out of bounds and a time range on
    contacts (they keep no creation time) are 422."""
    client = Client(dialing.api_url, dialing.api_token)
    # An exchange above 200, so the number just below the first (+1646{run}0000 - 1) is valid too.
    run = random.randrange(201, 1_000)
    mine = [f"+1646{run}{index:04d}" for index in range(0, 7_000, 1_000)]
    for number in mine:
        client.suppress(number, "paged")
    seen: list[str] = []
    behind: list[str] = []
    ahead: list[str] = []
    page = client.suppressions(limit=3)
    while True:
        seen += [entry["number"] for entry in page["suppressions"]]
        if page["next"] is None:
            break
        # One number before the end of the page just read (behind the cursor: never seen) and
        # one after it (seen, in its place).
        last = int(seen[-1][1:])
        if client.suppress(f"+{last - 1}", "added while paging")["new"]:
            behind.append(f"+{last - 1}")
        ahead.append(f"+{last + 1}")
        client.suppress(ahead[-1], "added while paging")
        page = client.suppressions(cursor=page["next"], limit=3)
    assert seen == sorted(set(seen)), "each number once, in number order"
    assert [number for number in seen if number in mine] == mine
    assert set(ahead) <= set(seen) and not set(behind) & set(seen)
    created = sorted(
        entry["created_at"]
        for entry in client.suppressions(limit=1_000)["suppressions"]
        if entry["number"] in mine
    )
    after = {
        e["number"] for e in _listed(client, f"/v1/suppressions?limit=1000&created_after={_q(created[0])}")
    }
    before = {
        e["number"] for e in _listed(client, f"/v1/suppressions?limit=1000&created_before={_q(created[0])}")
    }
    assert set(mine) <= after and not set(mine) & before
    campaign = client.campaigns(limit=1)
    assert set(campaign) == {"campaigns", "next"}
    for path in (
        "/v1/suppressions?cursor=not-a-cursor",
        f"/v1/routes?cursor={page_cursor('suppressions', mine[0])}",
        "/v1/trunks?limit=501",
        "/v1/dead-letters?created_after=yesterday",
        "/v1/campaigns/camp_x/contacts?created_after=2026-01-01T00:00:00Z",
    ):
        status, answer = client.request("GET", path)
        assert (status, answer["error"]["code"]) == (422, "malformed_request"), path


def test_each_creation_says_where_it_is_and_a_body_not_json_creates_nothing(dialing: Stack) -> None:
    """201s carry the created resource's Location, a replay under the same Idempotency-Key the
    same; a 200 (the number was suppressed already) carries none; a text/plain body is 415."""
    token = dialing.api_token
    number = _number()
    body = json.dumps({"number": number, "reason": "asked"}).encode()
    refused = _post(dialing, token, "/v1/suppressions", body, None, "text/plain")
    assert (refused[0], refused[1]["error"]["code"]) == (415, "unsupported_media_type")
    assert number not in {
        e["number"] for e in Client(dialing.api_url, token).suppressions(limit=1_000)["suppressions"]
    }
    key = f"suppress-{uuid.uuid4().hex}"
    first = _post(dialing, token, "/v1/suppressions", body, key)
    replayed = _post(dialing, token, "/v1/suppressions", body, key)
    assert first[0] == replayed[0] == 201 and replayed[2]["idempotent-replayed"] == "true"
    assert first[2]["location"] == replayed[2]["location"] == f"/v1/suppressions/{number}"
    again = _post(dialing, token, "/v1/suppressions", body, None)
    assert again[0] == 200 and "location" not in again[2]
    trunk = json.dumps({**TRUNK, "name": f"spare-{uuid.uuid4().hex[:8]}"}).encode()
    added = _post(dialing, token, "/v1/trunks", trunk, None)
    assert added[0] == 201
    assert added[2]["location"] == f"/v1/trunks/{quote(added[1]['trunk']['name'])}"
    route = json.dumps({"number": _number(), "session": {"instructions": "You answer the desk."}}).encode()
    routed = _post(dialing, token, "/v1/routes", route, None)
    assert routed[0] == 201 and routed[2]["location"] == f"/v1/routes/{routed[1]['route']['id']}"
    # Each Location reads back what was created, as its list shows it (a trunk never with its
    # password); once removed, it is a typed 404.
    client = Client(dialing.api_url, token)
    status, shown = client.request("GET", first[2]["location"])
    assert status == 200 and shown["suppression"] == next(
        entry for entry in client.suppressions(limit=1_000)["suppressions"] if entry["number"] == number
    )
    assert (shown["suppression"]["reason"], is_rfc3339(shown["suppression"]["created_at"])) == ("asked", True)
    status, shown = client.request("GET", added[2]["location"])
    assert (status, shown["trunk"]) == (200, added[1]["trunk"])
    assert "password" not in shown["trunk"] and is_rfc3339(shown["trunk"]["created_at"])
    status, shown = client.request("GET", routed[2]["location"])
    assert status == 200 and shown["route"]["number"] == routed[1]["route"]["number"]
    assert shown["route"]["calls"] == {"answered": 0, "live": 0, "refused": 0}
    for location, code in (
        (added[2]["location"], "trunk_not_found"),
        (routed[2]["location"], "route_not_found"),
    ):
        assert client.request("DELETE", location)[0] == 200
        status, gone = client.request("GET", location)
        assert (status, gone["error"]["code"]) == (404, code)
    status, never = client.request("GET", f"/v1/suppressions/{_q(_number())}")
    assert (status, never["error"]["code"]) == (404, "suppression_not_found")


def _listed(client: Client, path: str) -> list[dict[str, Any]]:
    status, answer = client.request("GET", path)
    assert status == 200, answer
    return list(answer["suppressions"])


def _q(text: str) -> str:
    return quote(text, safe="")


def _cli(stack: Stack, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", *arguments, "--api", stack.api_url],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _closed_window() -> str:
    """`--window` for one weekday three days from now in New York, so a campaign made in a test
    is created and takes its contacts, and dials nobody."""
    day = (datetime.now(ZoneInfo("America/New_York")) + timedelta(days=3)).strftime("%a").lower()
    return f"{day},09:00-10:00"


def test_the_cli_makes_a_campaign_of_a_csv_s_good_rows_in_pages_the_api_takes_and_names_each_refused_row(
    dialing: Stack, tmp_path: Path
) -> None:
    """Issue 44: a CSV whose first 1,200 rows are refused, then 1,500 rows of about 1.6 KB each
    (a thousand of them are over the API's 1 MiB body bound): the campaign is made with all
    1,500, sent in pages the API takes, and each refused row is printed with its line and why.
    A file of refused rows only makes no campaign, exits 1 and says so, row by row."""
    client = Client(dialing.api_url, dialing.api_token)
    notes = ",".join(f"note{index}" for index in range(8))
    rows = [f"to,name,{notes}"]
    rows += ["+1415,Short" + "," * 8 if index % 2 else "555-0100,Local" + "," * 8 for index in range(1_200)]
    long_values = ",".join(chr(ord("a") + index) * 190 for index in range(8))
    rows += [f"+1212{2_000_000 + index},Contact {index},{long_values}" for index in range(1_500)]
    listed = tmp_path / "contacts.csv"
    listed.write_text("\n".join(rows) + "\n")
    assert len(listed.read_bytes()) > 2 * 1024 * 1024
    name = f"paged-{uuid.uuid4().hex[:8]}"

    made = _cli(
        dialing,
        "campaigns",
        "create",
        "--name",
        name,
        "--contacts",
        str(listed),
        "--instructions",
        "Remind {name} of tomorrow.",
        "--window",
        _closed_window(),
        "--timezone",
        "America/New_York",
    )

    assert made.returncode == 0, made.stderr[-2_000:]
    campaign = json.loads(made.stdout)
    try:
        assert (campaign["name"], campaign["contacts"], campaign["status"]) == (name, 1_500, "running")
        refused = campaign["refused_rows"]
        assert [row["line"] for row in refused] == list(range(2, 1_202))
        assert refused[0]["reason"].startswith("'555-0100' is not an E.164 number")
        assert refused[1]["reason"] == "'+1415' is not a valid phone number: too short for a number of +1"
        assert f"{listed}:2: refused: '555-0100' is not an E.164 number" in made.stderr
        assert f"{listed}:1201: refused: '+1415' is not a valid phone number" in made.stderr
        first = client.campaign_contacts(campaign["id"], limit=1)["contacts"][0]
        assert (first["to"], first["state"]) == ("+12122000000", "waiting")
    finally:
        client.campaign_verb(campaign["id"], "cancel")

    only_refused = tmp_path / "refused.csv"
    only_refused.write_text("to,name\n+1415,Short\n+99912345678,Nowhere\n")
    none = _cli(
        dialing,
        "campaigns",
        "create",
        "--name",
        f"{name}-none",
        "--contacts",
        str(only_refused),
        "--instructions",
        "Hi.",
    )
    assert none.returncode == 1 and none.stdout == ""
    assert f"{only_refused}:2: refused: '+1415' is not a valid phone number" in none.stderr
    assert f"{only_refused}:3: refused: '+99912345678' is not a phone number" in none.stderr
    assert "no campaign was created: every one of the 2 rows" in none.stderr
    assert f"{name}-none" not in {shown["name"] for shown in client.campaigns(limit=100)["campaigns"]}


def test_a_campaign_with_every_outcome_completes_as_its_policy_says(
    dialing: Stack, services: Services
) -> None:
    """Thirty contacts: people, machines, busy lines, unanswered and failing numbers, one on the
    do-not-call list; retries for busy and unanswered; never more than four at once."""
    client = Client(dialing.api_url, dialing.api_token)
    contacts, plan, truth = _contacts(30)
    _plan(dialing, plan)
    suppressed = contacts[-1]["to"]
    client.suppress(suppressed, "asked last time")
    receiver = Receiver()
    campaign = client.create_campaign(
        {
            "name": "reminders",
            "session": {**SESSION, "webhook": {"url": receiver.url, "secret": SECRET}},
            "contacts": contacts,
            "max_concurrent": 4,
            "retry": {"busy": {"attempts": 2, "after_s": 60}, "no_answer": {"attempts": 2, "after_s": 60}},
            "voicemail": {"action": "hangup"},
        }
    )
    campaign_id = campaign["id"]
    # Retries wait a minute; the test moves the contacts' next dial to now instead of waiting.
    shown = _run_to_completion(services, client, campaign_id)
    _check_campaign(dialing, client, campaign_id, shown, truth, suppressed, max_concurrent=4)
    # The app was told of each call's outcome once, and of the campaign's end once, signed.
    calls = sum(len(contact["attempts"]) for contact in _all_contacts(client, campaign_id))
    attempted = wait_for(
        lambda: (lambda got: got if len(got) >= calls else None)(receiver.taken("call.attempted")),
        "every call.attempted",
        timeout_s=30,
    )
    assert len({delivery["id"] for delivery in attempted}) == calls == len(attempted)
    [completed] = wait_for(lambda: receiver.taken("campaign.completed"), "campaign.completed", timeout_s=30)
    assert completed["data"]["campaign_id"] == campaign_id
    assert completed["data"]["counts"]["by_outcome"] == dict(Counter(truth.values()))
    assert not [d for d in receiver.deliveries if "bad_signature" in d]


def test_a_campaign_with_workers_killed_at_random_dials_nobody_twice_and_skips_nobody(
    dialing: Stack, services: Services
) -> None:
    client = Client(dialing.api_url, dialing.api_token)
    contacts, plan, truth = _contacts(24)
    _plan(dialing, plan)
    suppressed = contacts[-1]["to"]
    client.suppress(suppressed, "asked last time")
    campaign = client.create_campaign(
        {
            "name": "under fire",
            "session": SESSION,
            "contacts": contacts,
            "max_concurrent": 5,
            "retry": {"busy": {"attempts": 2, "after_s": 60}, "no_answer": {"attempts": 2, "after_s": 60}},
        }
    )
    stop = threading.Event()
    kills: list[int] = []

    def killer() -> None:
        while not stop.wait(random.uniform(1.0, 2.5)):
            if not dialing.workers:
                continue
            victim = random.choice(dialing.workers)
            victim.popen.send_signal(signal.SIGKILL)
            victim.popen.wait()
            dialing.workers.remove(victim)
            kills.append(victim.popen.pid)
            dialing.add_worker()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        shown = _run_to_completion(services, client, campaign["id"], timeout_s=240)
    finally:
        stop.set()
        thread.join()
    assert len(kills) >= 3, "the killer must really have killed workers"
    _check_campaign(dialing, client, campaign["id"], shown, truth, suppressed, max_concurrent=5)


def test_the_console_shows_a_campaign_s_progress_and_each_contact(dialing: Stack, services: Services) -> None:
    """The campaigns page lists it with its progress; its page shows each contact's outcome and
    links its calls; once it is over, its buttons are disabled."""
    client = Client(dialing.api_url, dialing.api_token)
    contacts, plan, _truth = _contacts(5)
    _plan(dialing, plan)
    campaign = client.create_campaign(
        {"name": "console <b>check</b>", "session": SESSION, "contacts": contacts, "max_concurrent": 5}
    )
    _run_to_completion(services, client, campaign["id"])
    browser = Browser()
    try:
        browser.goto(f"{dialing.api_url}/console#/campaigns")
        browser.eval(
            f"document.getElementById('key').value = {json.dumps(dialing.api_token)};"
            "document.getElementById('key-form').requestSubmit(); true"
        )
        row = f"document.querySelector('tr[data-campaign=\"{campaign['id']}\"]')"
        browser.wait_for(f"{row} !== null")
        text = browser.eval(f"{row}.textContent")
        # A name is text, never markup.
        assert "console <b>check</b>" in text and "5 / 5 done" in text and "completed" in text
        browser.goto(f"{dialing.api_url}/console#/campaign/{campaign['id']}")
        browser.wait_for("document.querySelectorAll('#contacts tr').length === 5")
        shown = browser.eval("document.getElementById('contacts').textContent")
        for contact in contacts:
            assert contact["to"] in shown
        assert browser.eval("document.getElementById('pause').disabled") is True
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        browser.screenshot(SCREENSHOTS / "console-campaign.png")
    finally:
        browser.close()


# ── helpers ─────────────────────────────────────────────────────────────────────────────


def _contacts(count: int) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, str]]:
    """`count` contacts with their dial plan and what each should come to."""
    kinds = ["human", "voicemail", "busy", "no_answer", "failed"]
    contacts, plan, truth = [], {}, {}
    for index in range(count):
        to = _number()
        kind = kinds[index % len(kinds)]
        contacts.append({"to": to, "vars": {"name": f"Contact {index}"}})
        if kind == "human":
            plan[to] = {"outcome": "human", "script": "live_callee", "ring_ms": 200}
            truth[to] = "completed"
        elif kind == "voicemail":
            plan[to] = {"outcome": "voicemail", "greeting": VOICEMAIL, "ring_ms": 200}
            truth[to] = "voicemail"
        else:
            plan[to] = {"outcome": kind, "after_ms": 200}
            truth[to] = kind
    truth[contacts[-1]["to"]] = "suppressed"
    return contacts, plan, truth


def _run_to_completion(
    services: Services, client: Client, campaign_id: str, timeout_s: float = 180
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        shown = client.campaign(campaign_id)
        if shown["status"] == "completed":
            return shown
        # A retry is due a minute after its attempt: bring it forward, as the clock would.
        _due_now(services.database_url, campaign_id)
        time.sleep(0.5)
    raise AssertionError(f"campaign {campaign_id} did not complete: {client.campaign(campaign_id)}")


def _due_now(database_url: str, campaign_id: str) -> None:
    import psycopg2

    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "UPDATE campaign_contacts SET next_at = now() WHERE campaign_id = %s AND state = 'waiting'"
            " AND next_at > now()",
            (campaign_id,),
        )
        cursor.execute(
            "UPDATE campaigns SET next_tick_at = now() WHERE id = %s AND status = 'running'", (campaign_id,)
        )


def _all_contacts(client: Client, campaign_id: str) -> list[dict[str, Any]]:
    contacts: list[dict[str, Any]] = []
    cursor = ""
    while True:
        page = client.campaign_contacts(campaign_id, cursor=cursor, limit=10)
        contacts += page["contacts"]
        if page["next"] is None:
            return contacts
        cursor = page["next"]


def _check_campaign(
    stack: Stack,
    client: Client,
    campaign_id: str,
    shown: dict[str, Any],
    truth: dict[str, str],
    suppressed: str,
    *,
    max_concurrent: int,
) -> None:
    contacts = _all_contacts(client, campaign_id)
    assert len(contacts) == len(truth)
    came_to = {contact["to"]: contact["outcome"] for contact in contacts}
    assert came_to == truth
    # Each contact was dialled as often as its policy allows: twice for busy and unanswered.
    allowed = {"completed": 1, "voicemail": 1, "failed": 1, "busy": 2, "no_answer": 2, "suppressed": 0}
    attempts = {contact["to"]: len(contact["attempts"]) for contact in contacts}
    assert attempts == {to: allowed[outcome] for to, outcome in truth.items()}
    dials = [d for d in _dials(stack)["dials"] if d["destination"] in truth]
    per_number = Counter(d["destination"] for d in dials)
    assert per_number == Counter({to: n for to, n in attempts.items() if n}), "each attempt dialled once"
    assert suppressed not in per_number
    assert _concurrent(dials) <= max_concurrent
    assert shown["counts"]["by_outcome"] == dict(Counter(truth.values()))


def _concurrent(dials: list[dict[str, Any]]) -> int:
    """The most of these dials that were between their create and their end at once."""
    moments = [(d["created_at"], 1) for d in dials] + [(d["ended_at"] or float("inf"), -1) for d in dials]
    most = current = 0
    for _, change in sorted(moments, key=lambda moment: (moment[0], moment[1])):
        current += change
        most = max(most, current)
    return most
