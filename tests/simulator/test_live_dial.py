"""Outbound SIP calls on the simulator's Live mode, over real sockets: the create and its rules
(LIVE_PROTOCOL.md §2.2), the dial plan, `transport.ringing|answered|failed` on the sideband
(§3.1) with the strict oracle passing, the model that waits for the host, and the dial record."""

from __future__ import annotations

import asyncio
import json
import select
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from openai.types.live.session_resource import SessionResource
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from simulator.live_dial import (
    AnsweredByMachine,
    AnsweredByPerson,
    DialPlan,
    NotAnswered,
    load_dial_plan,
    parse_dial_plan,
)
from simulator.live_oracle import live_wire_errors
from simulator.live_script import LiveCallerSays, LiveScript, LiveSwitches, LiveTiming
from simulator.script import CallerHangsUp, ModelSays
from simulator.server import Simulator
from tests.simulator.support import AUTH, EVENT_TIMEOUT_S, http, running

ROOT = Path(__file__).parents[2]
JSON = {**AUTH, "Content-Type": "application/json"}
QUICK = LiveTiming(fragment_ms=10, reply_after_ms=5, answer_wait_ms=1_500)
QUIET = LiveSwitches(reflect_audio=False)
REFLECTED_AUDIO = ("session.input_audio.append", "session.output_audio.delta")
TRUNK = {
    "provider_url": "sips:sip.example.com:5061",
    "auth": {"type": "digest", "username": "acme", "password": "s3cret"},
    "caller_number": "+14155550100",
}
CONFIG = {
    "model": "gpt-live-1",
    "instructions": "Wait until told who answered.",
    "delegation": {"type": "client"},
}
PERSON = "+15550000001"
GREETING = "Hi, you've reached Sam. Leave a message."
MESSAGE = "This is Acme confirming your appointment."
# A bound on a start that failed, not a speed: about 1 s idle (the openai types' import), and
# several times that on a loaded 2-core machine running the suite in parallel.
STARTUP_TIMEOUT_S = 30


def _outbound(destination: str, **trunk: Any) -> dict[str, Any]:
    return {
        "session": CONFIG,
        "transport": {"type": "sip", "destination": destination, "trunk": {**TRUNK, **trunk}},
    }


async def _create(
    simulator: Simulator, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    status, _, raw = await http(
        simulator.http_url,
        "POST",
        "/v1/live/sessions",
        json.dumps(body).encode(),
        {**JSON, **(headers or {})},
    )
    return status, json.loads(raw)


async def _dial(simulator: Simulator, destination: str) -> str:
    status, answer = await _create(simulator, _outbound(destination))
    assert status == 200, answer
    session_id: str = answer["session"]["id"]
    return session_id


async def _control(simulator: Simulator, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    raw_body = b"" if body is None else json.dumps(body).encode()
    status, _, raw = await http(simulator.http_url.removesuffix("/v1"), method, path, raw_body)
    return status, json.loads(raw)


async def _dials(simulator: Simulator) -> dict[str, Any]:
    status, ledger = await _control(simulator, "GET", "/_sim/live/dials")
    assert status == 200
    return dict(ledger)


class Host:
    """The host's end of an outbound call's sideband: read events in order, wait for one."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.seen: list[dict[str, Any]] = []

    async def send(self, command: dict[str, Any]) -> None:
        await self.socket.send(json.dumps(command))

    async def next(self) -> dict[str, Any]:
        event: dict[str, Any] = json.loads(await asyncio.wait_for(self.socket.recv(), EVENT_TIMEOUT_S))
        self.seen.append(event)
        return event

    async def until(self, event_type: str, **matching: Any) -> dict[str, Any]:
        """The first event of `event_type` (with these fields) from here on."""
        while True:
            event = await self.next()
            if event["type"] == event_type and all(event.get(k) == v for k, v in matching.items()):
                return event

    async def to_the_end(self) -> None:
        """Read until the sideband closes."""
        try:
            while True:
                await self.next()
        except ConnectionClosed:
            return

    def kinds(self) -> list[str]:
        """The types of the events seen, reflected audio left out."""
        return [event["type"] for event in self.seen if event["type"] not in REFLECTED_AUDIO]

    def said(self, event_type: str) -> str:
        return "".join(event["delta"] for event in self.seen if event["type"] == event_type)


@asynccontextmanager
async def _attached(simulator: Simulator, session_id: str) -> AsyncIterator[Host]:
    url = f"{simulator.ws_url}/live/sessions/{session_id}/attach?graceful_close=true"
    async with connect(url, additional_headers=AUTH) as socket:
        yield Host(socket)


def _script(*caller: Any, model: tuple[str, ...] = (), **switches: Any) -> LiveScript:
    return LiveScript(
        timing=QUICK,
        switches=LiveSwitches(reflect_audio=False, **switches),
        caller=list(caller),
        model=[ModelSays(say=line) for line in model],
    )


def _plan(tmp_path: Path, entries: dict[str, Any], **scripts: LiveScript) -> DialPlan:
    """A dial plan whose people follow these scripts, written beside it as NAME.json."""
    for name, script in scripts.items():
        (tmp_path / f"{name}.json").write_text(script.model_dump_json())
    return parse_dial_plan(json.dumps(entries), base=tmp_path)


def _assert_clean(simulator: Simulator, session_id: str, host: Host) -> None:
    assert simulator.live.sessions[session_id].log.errors == []
    assert all(live_wire_errors(event, direction="server") == [] for event in host.seen)


def test_a_person_answers_after_ringing_and_talks_as_the_plans_script_says(tmp_path: Path) -> None:
    """Ringing at once, answered after `ring_ms`, then the callee's lines as an inbound caller's
    (the model answering, with the wait switch off) and its hangup: `remote_hangup`."""

    async def scenario() -> None:
        callee = _script(
            LiveCallerSays(say="Hello, Sam speaking.", after_ms=10),
            CallerHangsUp(hangup=True, after_ms=10),
            model=("Hi Sam, this is Acme.",),
            outbound_waits_for_host=False,
        )
        plan = _plan(
            tmp_path, {PERSON: {"outcome": "human", "script": "callee", "ring_ms": 80}}, callee=callee
        )
        async with running(Simulator(live_script=_script(), dial_plan=plan)) as simulator:
            status, answer = await _create(simulator, _outbound(PERSON))
            session_id = answer["session"]["id"]
            async with _attached(simulator, session_id) as host:
                ringing = await host.until("transport.ringing")
                answered = await host.until("transport.answered")
                await host.to_the_end()
            _assert_clean(simulator, session_id, host)
            record = (await _dials(simulator))["dials"][0]

        assert status == 200
        assert answer["transport"] == {"type": "sip", "destination": PERSON}
        assert "trunk" not in json.dumps(answer) and "s3cret" not in json.dumps(answer)
        SessionResource.model_validate(answer["session"], strict=True)
        assert answer["session"]["id"].startswith("live_u7_")
        assert answer["session"]["instructions"] == CONFIG["instructions"]
        assert ringing == {
            "type": "transport.ringing",
            "event_id": ringing["event_id"],
            "session_id": session_id,
        }
        assert answered == {
            "type": "transport.answered",
            "event_id": answered["event_id"],
            "session_id": session_id,
        }
        assert 0.08 <= record["answered_at"] - record["dialed_at"] < 1.0  # ring_ms
        kinds = host.kinds()
        assert kinds[:3] == ["transport.ringing", "transport.answered", "session.input_transcript.delta"]
        assert kinds[-1] == "session.closed" and host.seen[-1]["reason"] == "remote_hangup"
        assert host.said("session.input_transcript.delta") == "Hello, Sam speaking."
        assert host.said("session.output_transcript.delta") == "Hi Sam, this is Acme."
        assert (record["session_id"], record["destination"], record["outcome"]) == (
            session_id,
            PERSON,
            "human",
        )
        assert (record["caller_number"], record["trunk_host"]) == ("+14155550100", "sip.example.com")
        assert record["created_at"] <= record["dialed_at"] < record["answered_at"] < record["ended_at"]
        assert (record["close_reason"], record["message"], record["repeats"]) == ("remote_hangup", None, 0)

    asyncio.run(scenario())


def test_the_outbound_model_waits_for_the_hosts_first_append_then_answers_the_callee() -> None:
    """The model says nothing to the callee until the host appends instructions; then it
    answers the line it heard and left unanswered, and a later commentary is spoken too. (The
    number is not in the plan: a person following the current Live script answers.)"""

    async def scenario() -> None:
        # A number the plan lacks: a person following the current Live script answers.
        callee = _script(LiveCallerSays(say="Hello? Who is this?", after_ms=10), model=("Hi, this is Acme.",))
        async with running(Simulator(live_script=callee)) as simulator:
            _, plan = await _control(
                simulator, "PUT", "/_sim/live/dial-plan", {"+1999*": {"outcome": "busy", "after_ms": 0}}
            )
            session_id = await _dial(simulator, PERSON)
            async with _attached(simulator, session_id) as host:
                await host.until("session.input_transcript.delta", delta=" this?")
                await asyncio.sleep(0.2)  # the model would have answered in 5 ms
                heard_only = host.kinds()
                await host.send(
                    {
                        "type": "session.instructions.append",
                        "event_id": "k1",
                        "delegation_id": None,
                        "content": "A person answered: greet them.",
                    }
                )
                await host.until("session.instructions.appended", client_event_id="k1")
                answer = ""
                while answer != "Hi, this is Acme.":
                    answer += (await host.until("session.output_transcript.delta"))["delta"]
                await host.send(
                    {
                        "type": "session.commentary.append",
                        "event_id": "k2",
                        "delegation_id": None,
                        "content": MESSAGE,
                    }
                )
                said = ""
                while said != MESSAGE:
                    said += (await host.until("session.output_transcript.delta"))["delta"]
            _assert_clean(simulator, session_id, host)
            record = (await _dials(simulator))["dials"][0]

        assert plan == {"dial_plan": ["+1999*"]}
        assert "session.output_transcript.delta" not in heard_only
        assert heard_only[:2] == ["transport.ringing", "transport.answered"]
        assert (record["planned"], record["outcome"]) == ("human", "human")
        assert record["answered_at"] - record["dialed_at"] >= 1.0  # the default ring_ms

    asyncio.run(scenario())


def test_a_line_heard_while_waiting_for_the_host_is_delegated_once_the_host_appends(tmp_path: Path) -> None:
    """A delegating callee line heard while the model waits delegates nothing; the host's first
    append lets the model delegate it, at the offset of the line's covering word."""

    async def scenario() -> None:
        callee = _script(LiveCallerSays(say="Where is order 4417?", after_ms=10, delegate=True))
        plan = _plan(
            tmp_path, {PERSON: {"outcome": "human", "script": "callee", "ring_ms": 20}}, callee=callee
        )
        async with running(Simulator(live_script=_script(), dial_plan=plan)) as simulator:
            session_id = await _dial(simulator, PERSON)
            async with _attached(simulator, session_id) as host:
                covering = await host.until("session.input_transcript.delta", delta=" 4417?")
                await asyncio.sleep(0.1)
                heard_only = host.kinds()
                await host.send(
                    {
                        "type": "session.commentary.append",
                        "event_id": "k1",
                        "delegation_id": None,
                        "content": "Hello, this is Acme.",
                    }
                )
                delegated = await host.until("session.delegation.created")
            _assert_clean(simulator, session_id, host)

        assert "session.delegation.created" not in heard_only
        assert "session.output_transcript.delta" not in heard_only
        assert delegated["offset_ms"] == covering["start_ms"]
        assert host.kinds().index("session.commentary.appended") < host.kinds().index(
            "session.delegation.created"
        )

    asyncio.run(scenario())


def test_a_voicemail_greets_beeps_and_keeps_what_the_model_said_after_the_greeting(tmp_path: Path) -> None:
    """A machine answers, says its greeting a word a fragment, and after the beep keeps the
    model's words as the dial's `message` until it hangs up `record_ms` later (`remote_hangup`)."""

    async def scenario() -> None:
        plan = _plan(
            tmp_path,
            {
                "+1555*": {
                    "outcome": "voicemail",
                    "greeting": GREETING,
                    "ring_ms": 30,
                    "beep_ms": 60,
                    "record_ms": 400,
                }
            },
        )
        async with running(Simulator(live_script=_script(), dial_plan=plan)) as simulator:
            session_id = await _dial(simulator, "+15551234567")
            async with _attached(simulator, session_id) as host:
                await host.until("session.input_transcript.delta", delta=" message.")
                await host.send(
                    {
                        "type": "session.commentary.append",
                        "event_id": "k1",
                        "delegation_id": None,
                        "content": MESSAGE,
                    }
                )
                await host.to_the_end()
            _assert_clean(simulator, session_id, host)
            record = (await _dials(simulator))["dials"][0]

        kinds = host.kinds()
        greeting = [event for event in host.seen if event["type"] == "session.input_transcript.delta"]
        assert kinds[:2] == ["transport.ringing", "transport.answered"]
        assert [event["delta"] for event in greeting] == [
            word if index == 0 else f" {word}" for index, word in enumerate(GREETING.split())
        ]
        assert all(event["end_ms"] - event["start_ms"] == QUICK.fragment_ms for event in greeting)
        assert host.said("session.output_transcript.delta") == MESSAGE
        assert kinds.index("session.commentary.appended") < kinds.index("session.output_transcript.delta")
        assert host.seen[-1]["type"] == "session.closed" and host.seen[-1]["reason"] == "remote_hangup"
        # The greeting's words, beep_ms and record_ms after the answer.
        spoken_s = len(GREETING.split()) * QUICK.fragment_ms / 1000
        assert spoken_s + 0.06 + 0.4 <= record["ended_at"] - record["answered_at"] < 2.0
        assert (record["outcome"], record["message"], record["close_reason"]) == (
            "voicemail",
            MESSAGE,
            "remote_hangup",
        )

    asyncio.run(scenario())


def test_an_unanswered_call_fails_with_its_code_and_the_session_closes() -> None:
    """Busy, no answer and a provider failure each say `transport.failed` after `after_ms` with
    their code (a failure's own, else `provider_invite_failed`), then `session.closed`."""

    plan = DialPlan(
        {
            "+15550000010": NotAnswered(outcome="busy", after_ms=20),
            "+15550000011": NotAnswered(outcome="no_answer", after_ms=20),
            "+15550000012": NotAnswered(outcome="failed", after_ms=20, code="forbidden"),
            "+15550000013": NotAnswered(outcome="failed", after_ms=20),
        }
    )
    expected = {
        "+15550000010": ("busy", "busy"),
        "+15550000011": ("no_answer", "no_answer"),
        "+15550000012": ("failed", "forbidden"),
        "+15550000013": ("failed", "provider_invite_failed"),
    }

    async def scenario() -> None:
        async with running(Simulator(live_script=_script(), dial_plan=plan)) as simulator:
            for destination, (_, code) in expected.items():
                session_id = await _dial(simulator, destination)
                async with _attached(simulator, session_id) as host:
                    await host.to_the_end()
                _assert_clean(simulator, session_id, host)
                ringing, failed, closed = host.seen
                assert [ringing["type"], failed["type"], closed["type"]] == [
                    "transport.ringing",
                    "transport.failed",
                    "session.closed",
                ]
                assert failed["session_id"] == session_id
                assert failed["error"]["type"] == "call_error" and failed["error"]["code"] == code
                assert failed["error"]["message"]
                assert closed["reason"] == "remote_hangup"
            records = (await _dials(simulator))["dials"]

        assert [(r["outcome"], r["failure_code"]) for r in records] == list(expected.values())
        assert all(r["answered_at"] is None and r["ended_at"] is not None for r in records)

    asyncio.run(scenario())


def test_a_plan_resolves_an_exact_number_before_the_longest_prefix_before_the_catch_all() -> None:
    """Exact beats prefix, a longer prefix beats a shorter one, `*` takes the rest; a plan
    without a catch-all covers nothing else."""
    busy = {"outcome": "busy", "after_ms": 1}
    plan = parse_dial_plan(
        json.dumps(
            {
                "+15551234567": {"outcome": "human", "script": "live_callee"},
                "+1555*": {"outcome": "voicemail", "greeting": "Leave a message."},
                "+1*": {"outcome": "no_answer", "after_ms": 1},
                "*": busy,
            }
        )
    )
    assert isinstance(plan.resolve("+15551234567"), AnsweredByPerson)
    assert isinstance(plan.resolve("+15551234568"), AnsweredByMachine)
    assert plan.resolve("+16505550100") == NotAnswered(outcome="no_answer", after_ms=1)
    assert plan.resolve("+447700900123") == NotAnswered(outcome="busy", after_ms=1)
    assert parse_dial_plan(json.dumps({"+1*": busy})).resolve("+447700900123") is None
    assert plan.script(AnsweredByPerson(outcome="human", script="live_callee")).name == "live-callee"


def test_a_bad_dial_plan_is_refused_with_a_clear_message() -> None:
    """`PUT /_sim/live/dial-plan` refuses a bad key, an unknown field, a missing script and a
    code on a busy entry, each with a message that names it; the plan in force stays."""

    async def scenario() -> None:
        async with running(Simulator(live_script=_script())) as simulator:
            good = await _control(
                simulator, "PUT", "/_sim/live/dial-plan", {"*": {"outcome": "busy", "after_ms": 5}}
            )
            bad = [
                await _control(simulator, "PUT", "/_sim/live/dial-plan", plan)
                for plan in (
                    {"5551234": {"outcome": "busy", "after_ms": 5}},
                    {"*": {"outcome": "busy", "after_ms": 5, "ring_ms": 3}},
                    {"*": {"outcome": "human", "script": "no_such_script"}},
                    {"*": {"outcome": "busy", "after_ms": 5, "code": "x"}},
                )
            ]
            kept = await _control(simulator, "GET", "/_sim/live/dial-plan")

        assert good == (200, {"dial_plan": ["*"]})
        assert [status for status, _ in bad] == [400, 400, 400, 400]
        messages = [body["error"]["details"][0]["msg"] for _, body in bad]
        assert "'5551234' is not an E.164 number" in messages[0]
        assert messages[1] == "Extra inputs are not permitted"
        assert "no_such_script" in messages[2]
        assert '"code" belongs to a "failed" entry' in messages[3]
        assert kept == (200, {"*": {"outcome": "busy", "after_ms": 5, "code": None}})

    asyncio.run(scenario())


def test_a_call_still_ringing_at_the_ringing_limit_fails_no_answer() -> None:
    """A person who would answer after the limit never does: `transport.failed` `no_answer` at
    the limit (a small one here), then `session.closed`."""

    async def scenario() -> None:
        plan = DialPlan({PERSON: AnsweredByPerson(outcome="human", script="live_callee", ring_ms=60_000)})
        plan = parse_dial_plan(plan.model_dump_json())
        async with running(
            Simulator(live_script=_script(), dial_plan=plan, ringing_limit_ms=150)
        ) as simulator:
            session_id = await _dial(simulator, PERSON)
            async with _attached(simulator, session_id) as host:
                await host.until("transport.ringing")
                failed = await host.until("transport.failed")
                await host.to_the_end()
            _assert_clean(simulator, session_id, host)
            record = (await _dials(simulator))["dials"][0]

        assert failed["error"]["code"] == "no_answer"
        assert 0.15 <= record["ended_at"] - record["dialed_at"] < 1.0
        assert host.kinds() == ["transport.ringing", "transport.failed", "session.closed"]
        assert (record["planned"], record["outcome"], record["answered_at"]) == ("human", "no_answer", None)

    asyncio.run(scenario())


def test_outbound_creates_are_checked_strictly_and_refusals_are_counted() -> None:
    """Unknown keys, a SIP URI destination, a loopback or private trunk host, plaintext SIP, bad
    digest credentials and a bad caller number are each refused 400 with the param named; none
    dials, and the dial record counts them."""
    person = _outbound(PERSON)
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({**person, "record": True}, "unknown_parameter", "record"),
        (_outbound(PERSON, region="us"), "unknown_parameter", "transport.trunk.region"),
        ({**person, "session": {**CONFIG, "voice": "marin"}}, "unknown_parameter", "session.voice"),
        (_outbound("sip:+15550000001@example.com"), "invalid_value", "transport.destination"),
        (_outbound("+0155500001"), "invalid_value", "transport.destination"),
        (
            _outbound(PERSON, provider_url="sips:127.0.0.1:5061"),
            "invalid_value",
            "transport.trunk.provider_url",
        ),
        (_outbound(PERSON, provider_url="sips:localhost"), "invalid_value", "transport.trunk.provider_url"),
        (_outbound(PERSON, provider_url="sips:[::1]"), "invalid_value", "transport.trunk.provider_url"),
        (
            _outbound(PERSON, provider_url="sips:192.168.1.20"),
            "invalid_value",
            "transport.trunk.provider_url",
        ),
        (_outbound(PERSON, provider_url="sips:169.254.0.9"), "invalid_value", "transport.trunk.provider_url"),
        (
            _outbound(PERSON, provider_url="sip:sip.example.com"),
            "invalid_value",
            "transport.trunk.provider_url",
        ),
        (
            _outbound(PERSON, auth={"type": "basic", "username": "a", "password": "b"}),
            "invalid_value",
            "transport.trunk.auth.type",
        ),
        (
            _outbound(PERSON, auth={"type": "digest", "username": "", "password": "b"}),
            "invalid_value",
            "transport.trunk.auth.username",
        ),
        (
            _outbound(PERSON, auth={"type": "digest", "username": "a", "password": ""}),
            "invalid_value",
            "transport.trunk.auth.password",
        ),
        (
            _outbound(PERSON, auth={"type": "digest", "username": "a"}),
            "missing_required_parameter",
            "transport.trunk.auth.password",
        ),
        (_outbound(PERSON, caller_number="4155550100"), "invalid_value", "transport.trunk.caller_number"),
    ]

    async def scenario() -> None:
        async with running(Simulator(live_script=_script())) as simulator:
            answers = [await _create(simulator, body) for body, _, _ in cases]
            ledger = await _dials(simulator)

        for (status, answer), (_, code, param) in zip(answers, cases, strict=True):
            assert status == 400, (param, answer)
            assert answer["error"]["type"] == "invalid_request_error"
            assert (answer["error"]["code"], answer["error"]["param"]) == (code, param)
        messages = {answer["error"]["param"]: answer["error"]["message"] for _, answer in answers[3:10]}
        assert answers[3][1]["error"]["message"] == "SIP URI destinations are not supported."
        assert messages["transport.trunk.provider_url"] == "Private or loopback trunk hosts are rejected."
        assert answers[10][1]["error"]["message"].startswith(
            "Invalid value for 'transport.trunk.provider_url'"
        )
        assert (ledger["dials"], ledger["refused"]) == ([], len(cases))

    asyncio.run(scenario())


def test_an_organization_without_outbound_calling_is_refused_403_until_the_switch_is_on() -> None:
    """With outbound calling off every outbound create is 403 `outbound_sip_not_enabled` (a
    WebRTC create still works); `PUT /_sim/live/outbound` turns it on."""

    async def scenario() -> None:
        async with running(Simulator(live_script=_script(), outbound_enabled=False)) as simulator:
            refused = await _create(simulator, _outbound(PERSON))
            webrtc = await _create(
                simulator, {"session": CONFIG, "transport": {"type": "webrtc", "sdp": "v=0\r\n"}}
            )
            switch_bad = await _control(simulator, "PUT", "/_sim/live/outbound", {"enabled": "yes"})
            switched = await _control(simulator, "PUT", "/_sim/live/outbound", {"enabled": True})
            placed = await _create(simulator, _outbound(PERSON))
            ledger = await _dials(simulator)

        assert refused == (
            403,
            {
                "error": {
                    "type": "invalid_request_error",
                    "code": "outbound_sip_not_enabled",
                    "message": "Outbound SIP calling must be enabled for your organization.",
                    "param": None,
                }
            },
        )
        assert webrtc[0] == 200
        assert switch_bad[0] == 400
        assert switched == (200, {"enabled": True, "ringing_limit_ms": 180_000})
        assert placed[0] == 200
        assert (len(ledger["dials"]), ledger["refused"]) == (1, 1)

    asyncio.run(scenario())


def test_an_idempotency_key_seen_before_answers_the_same_body_and_dials_once() -> None:
    """The same `Idempotency-Key` and body again answers the first answer and dials nothing
    (one dial, one repeat); the key with another body is refused."""

    async def scenario() -> None:
        async with running(Simulator(live_script=_script())) as simulator:
            key = {"Idempotency-Key": "campaign-7-contact-42"}
            first = await _create(simulator, _outbound(PERSON), key)
            again = await _create(simulator, _outbound(PERSON), key)
            other = await _create(simulator, _outbound("+15550000002"), key)
            unkeyed = await _create(simulator, _outbound(PERSON))
            ledger = await _dials(simulator)
            sessions = list(simulator.live.sessions)

        assert first[0] == again[0] == 200 and first[1] == again[1]
        assert other[0] == 400 and other[1]["error"]["code"] == "idempotency_key_reused"
        assert unkeyed[1]["session"]["id"] != first[1]["session"]["id"]
        assert sessions == [first[1]["session"]["id"], unkeyed[1]["session"]["id"]]
        keyed, plain = ledger["dials"]
        assert (keyed["idempotency_key"], keyed["repeats"]) == ("campaign-7-contact-42", 1)
        assert (plain["idempotency_key"], plain["repeats"]) == (None, 0)
        assert ledger["refused"] == 1

    asyncio.run(scenario())


def test_max_concurrent_counts_the_most_dials_between_create_and_end_at_once() -> None:
    """Two overlapping calls, then a third after both ended: `max_concurrent` is 2, and the
    concurrency series rises and falls back to 0."""

    async def scenario() -> None:
        plan = DialPlan({"+1555*": NotAnswered(outcome="busy", after_ms=100)})
        async with running(Simulator(live_script=_script(), dial_plan=plan)) as simulator:

            async def call(destination: str) -> None:
                session_id = await _dial(simulator, destination)
                async with _attached(simulator, session_id) as host:
                    await host.to_the_end()

            await asyncio.gather(call("+15550000001"), call("+15550000002"))
            await call("+15550000003")
            ledger = await _dials(simulator)

        assert len(ledger["dials"]) == 3
        assert ledger["max_concurrent"] == 2
        counts = [n for _, n in ledger["concurrency"]]
        assert max(counts) == 2 and counts[-1] == 0 and counts.count(1) >= 2
        times = [t for t, _ in ledger["concurrency"]]
        assert times == sorted(times)

    asyncio.run(scenario())


def test_a_hangup_while_ringing_ends_the_dial() -> None:
    """`POST /hangup` while the number rings closes the session (`close_requested`); the call
    is never answered and the dial ends `canceled`."""

    async def scenario() -> None:
        plan = DialPlan({PERSON: NotAnswered(outcome="no_answer", after_ms=10_000)})
        async with running(Simulator(live_script=_script(), dial_plan=plan)) as simulator:
            session_id = await _dial(simulator, PERSON)
            async with _attached(simulator, session_id) as host:
                await host.until("transport.ringing")
                status, _, _ = await http(
                    simulator.http_url, "POST", f"/v1/live/sessions/{session_id}/hangup", b"", AUTH
                )
                await host.to_the_end()
            _assert_clean(simulator, session_id, host)
            record = (await _dials(simulator))["dials"][0]

        assert status == 200
        assert host.kinds() == ["transport.ringing", "session.closed"]
        assert host.seen[-1]["reason"] == "close_requested"
        assert (record["outcome"], record["answered_at"], record["close_reason"]) == (
            "canceled",
            None,
            "close_requested",
        )

    asyncio.run(scenario())


def test_an_outbound_call_is_not_accepted_or_rejected_and_is_referred_only_once_answered() -> None:
    """Accept and reject belong to incoming calls; a refer waits until someone has answered."""

    async def scenario() -> None:
        plan = DialPlan({PERSON: NotAnswered(outcome="no_answer", after_ms=10_000)})
        async with running(Simulator(live_script=_script(), dial_plan=plan)) as simulator:
            session_id = await _dial(simulator, PERSON)
            path = f"/v1/live/sessions/{session_id}"
            accept = await http(
                simulator.http_url,
                "POST",
                f"{path}/accept",
                b'{"session": {"type": "live", "model": "gpt-live-1"}}',
                JSON,
            )
            reject = await http(simulator.http_url, "POST", f"{path}/reject", b'{"status_code": 486}', JSON)
            refer = await http(
                simulator.http_url, "POST", f"{path}/refer", b'{"target_uri": "tel:+14155550123"}', JSON
            )

        for status, _, raw in (accept, reject, refer):
            assert status == 400 and json.loads(raw)["error"]["code"] == "invalid_request"

    asyncio.run(scenario())


def test_a_call_no_sideband_attaches_to_is_dialled_two_seconds_after_its_create() -> None:
    """Without a sideband the dial still starts, 2 s after the create, and runs to its end."""

    async def scenario() -> None:
        plan = DialPlan({PERSON: NotAnswered(outcome="busy", after_ms=0)})
        async with running(Simulator(live_script=_script(), dial_plan=plan)) as simulator:
            await _dial(simulator, PERSON)
            for _ in range(60):
                record = (await _dials(simulator))["dials"][0]
                if record["ended_at"] is not None:
                    break
                await asyncio.sleep(0.05)

        assert record["outcome"] == "busy"
        assert 1.9 <= record["dialed_at"] - record["created_at"] < 2.5

    asyncio.run(scenario())


def test_the_command_line_takes_a_dial_plan_file_and_the_outbound_switches(tmp_path: Path) -> None:
    """`--dial-plan FILE` (its scripts found beside it), `--outbound-disabled` and
    `--ringing-limit-ms` reach the running simulator."""
    (tmp_path / "callee.json").write_text(_script(LiveCallerSays(say="Hello?")).model_dump_json())
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"*": {"outcome": "human", "script": "callee"}}))
    assert load_dial_plan(plan_file).script(AnsweredByPerson(outcome="human", script="callee")).caller

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simulator",
            "--http-port",
            "0",
            "--ws-port",
            "0",
            "--dial-plan",
            str(plan_file),
            "--outbound-disabled",
            "--ringing-limit-ms",
            "500",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        readable, _, _ = select.select([process.stdout], [], [], STARTUP_TIMEOUT_S)
        assert readable, "the simulator never announced readiness"
        base = process.stdout.readline().split("http=")[1].split()[0].removesuffix("/v1")
        with urllib.request.urlopen(f"{base}/_sim/live/outbound") as answer:
            outbound = json.loads(answer.read())
        with urllib.request.urlopen(f"{base}/_sim/live/dial-plan") as answer:
            plan = json.loads(answer.read())
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=STARTUP_TIMEOUT_S) == 0
    finally:
        process.kill()
        process.wait()
    assert outbound == {"enabled": False, "ringing_limit_ms": 500}
    assert plan == {"*": {"outcome": "human", "script": "callee", "ring_ms": 1000, "answer_after_ms": 0}}


@pytest.mark.parametrize("greeting", ["", "   "])
def test_a_voicemail_entry_needs_a_greeting_with_words(greeting: str) -> None:
    """A machine that says nothing is a plan mistake, refused when the plan is read."""
    with pytest.raises(ValueError, match="greeting"):
        parse_dial_plan(json.dumps({"*": {"outcome": "voicemail", "greeting": greeting}}))
