"""The operator's verbs and the app's commands on a Live call, end to end: each becomes the Live
control it maps to (LIVE_PROTOCOL.md §5.3) — whisper and prompt changes `instructions.append`,
hold a mute, say a commentary, end `session.close`, transfer the provider's `refer` — and a
delegation answered while the line is held is said once it is given back. And the usage budget:
Live's seconds, a notice at 80 %, the end at 100 %."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pipeline.operator.line import NOBODY_CAME
from switchboard.client import Client
from switchboard.stack import Stack
from tests.support.live import controls_of, live_session, ring_live, set_live_script
from tests.support.waiting import wait_for

DANA = {"id": "sup_dana", "name": "Dana"}
# The caller stays on the line (silent) until the test ends the call.
STAYS = {"caller": [{"hangup": True, "after_ms": 30_000}], "model": []}


def _webrtc(client: Client, **spec: Any) -> tuple[str, str]:
    session = client.create_session("You are the order desk.", provider="live", **spec)
    call_id = client.connect(session["id"])["call_id"]
    wait_for(lambda: client.session(session["id"])["status"] == "listening", "the call to listen")
    return session["id"], call_id


def _kinds(stack: Stack, call_id: str) -> list[str]:
    return [c["type"] for c in controls_of(live_session(stack, call_id))]


def test_an_answer_decided_while_the_line_is_held_is_said_once_it_is_given_back(
    stack: Stack, client: Client
) -> None:
    ask = "Please wait 800 ms and check order 4417."
    set_live_script(
        stack,
        {
            "caller": [{"say": ask, "after_ms": 100, "delegate": True}, {"hangup": True, "after_ms": 300}],
            "model": [],
        },
    )
    session = client.create_session(
        "You are the order desk.", provider="live", live={"delegation": "wait_task"}
    )
    call_id = client.connect(session["id"])["call_id"]
    wait_for(
        lambda: [s["status"] for s in client.session(session["id"])["tool_steps"]] == ["running"],
        "the handler to run",
    )
    assert client.hold(session["id"]) == {"session_id": session["id"], "status": "held", "changed": True}
    wait_for(
        lambda: [s["status"] for s in client.session(session["id"])["tool_steps"]] == ["succeeded"],
        "the handler's outcome",
    )
    log = live_session(stack, call_id)
    assert _kinds(stack, call_id) == ["session.update", "session.thinking.append", "session.input_audio.mute"]
    assert "session.input_audio.muted" in [e["event"]["type"] for e in log["events"]]
    assert client.session(session["id"])["line"]["held"] is True

    assert client.unhold(session["id"])["status"] == "free"
    record = client.wait_for_status(session["id"], timeout_s=30)
    assert record["end_reason"] == "caller_hung_up"
    assert _kinds(stack, call_id) == [
        "session.update",
        "session.thinking.append",
        "session.input_audio.mute",
        "session.input_audio.unmute",
        "session.commentary.append",
    ]
    entries = [e["kind"] for e in client.call_log(session["id"])["entries"]]
    assert entries.count("call.line") == 2


def test_say_reply_prompt_attention_and_end_become_their_live_controls(stack: Stack, client: Client) -> None:
    set_live_script(stack, STAYS)
    session_id, call_id = _webrtc(client)

    assert (
        client.supervise(session_id, DANA, {"type": "say", "text": "A colleague is here."})["status"]
        == "speaking"
    )
    assert client.agent_say(session_id, "Thanks for waiting.")["status"] == "speaking"
    assert client.agent_reply(session_id, "Mention the holiday hours.")["status"] == "replying"
    changed = client.set_prompt(session_id, "policy", "Never promise refunds.")
    assert (changed["status"], changed["changed"]) == ("changed", True)
    assert client.set_prompt(session_id, "policy", "Never promise refunds.")["status"] == "unchanged"
    assert client.attention(session_id, "a manager is needed", 0.5)["status"] == "waiting"
    wait_for(lambda: client.session(session_id)["line"]["attention"] is None, "nobody to come")
    assert client.supervise(session_id, DANA, {"type": "end"})["status"] == "ending"
    record = client.wait_for_status(session_id, timeout_s=30)
    assert (record["end_reason"], record["ended_by"]) == ("supervisor_ended", "supervisor")

    log = live_session(stack, call_id)
    assert log["errors"] == [] and log["close_reason"] == "close_requested"
    controls = controls_of(log)
    assert [(c["type"], c.get("delegation_id", "-")) for c in controls] == [
        ("session.update", "-"),
        ("session.commentary.append", None),
        ("session.commentary.append", None),
        ("session.instructions.append", None),
        ("session.instructions.append", None),
        ("session.input_audio.mute", "-"),
        ("session.input_audio.unmute", "-"),
        ("session.instructions.append", None),
        ("session.close", "-"),
    ]
    assert [c["content"] for c in controls[1:3]] == ["A colleague is here.", "Thanks for waiting."]
    assert controls[3]["content"] == "Mention the holiday hours."
    assert "Never promise refunds." in controls[4]["content"]
    assert controls[7]["content"] == NOBODY_CAME.format(reason="a manager is needed", wait_s=0.5)
    kinds = [e["kind"] for e in client.call_log(session_id)["entries"]]
    for kind in (
        "supervisor.said",
        "prompt.changed",
        "attention.requested",
        "attention.answered",
        "supervisor.ended",
    ):
        assert kind in kinds, kinds


def test_a_live_phone_call_is_transferred_by_refer_and_a_webrtc_one_is_refused(
    stack: Stack, client: Client
) -> None:
    set_live_script(stack, STAYS)
    client.add_route(
        "+18005557201",
        {"instructions": "Be brief.", "provider": "live"},
        transfer_targets=["tel:+14155550123"],
    )
    live_id = ring_live(stack, "+18005557201")
    session_id = wait_for(
        lambda: (
            client.phone_call(live_id)["session_id"]
            if client.request("GET", f"/v1/phone-calls/{live_id}")[0] == 200
            else None
        ),
        "the call's session",
    )
    wait_for(lambda: client.session(session_id)["status"] == "listening", "the call to listen")
    answer = client.supervise(session_id, DANA, {"type": "transfer", "to": "tel:+14155550123"})
    assert answer["status"] == "transferring"
    record = client.wait_for_status(session_id, timeout_s=30)
    assert (record["status"], record["end_reason"]) == ("ended", "transferred")
    assert live_session(stack, live_id)["referred_to"] == "tel:+14155550123"
    transferred = [
        e["data"] for e in client.call_log(session_id)["entries"] if e["kind"] == "call.transferred"
    ]
    assert transferred == [{"to": "tel:+14155550123", "ok": True, "error": None}]

    webrtc_id, _ = _webrtc(client)
    status, body = client.request(
        "POST",
        f"/v1/sessions/{webrtc_id}/supervisor",
        {"by": DANA, "verb": {"type": "transfer", "to": "tel:+1"}},
    )
    assert (status, body["error"]["code"]) == (409, "not_a_phone_call")
    client.end(webrtc_id)


def test_a_live_budget_of_active_seconds_warns_at_80_percent_and_ends_the_call(
    stack: Stack, client: Client
) -> None:
    set_live_script(stack, {**STAYS, "switches": {"usage_interval_ms": 250}})
    session_id, call_id = _webrtc(client, limits={"usage_budget_seconds": 5})
    record = client.wait_for_status(session_id, timeout_s=30)
    assert (record["end_reason"], record["ended_by"]) == ("usage_budget_reached", "platform")
    assert record["usage"]["active_seconds"] >= 5
    controls = controls_of(live_session(stack, call_id))
    assert [c["type"] for c in controls] == ["session.update", "session.instructions.append", "session.close"]
    assert "usage budget" in controls[1]["content"]


def test_the_same_verb_twice_at_once_acts_once_on_live(stack: Stack, client: Client) -> None:
    """Two holds at once mute once (the other is told nothing changed); two ends at once close
    once (the other is told the call was over); an unknown session is 404."""
    set_live_script(stack, STAYS)
    session_id, call_id = _webrtc(client)
    with ThreadPoolExecutor(2) as pool:
        held = list(pool.map(lambda _: client.hold(session_id), range(2)))
    assert sorted(answer["changed"] for answer in held) == [False, True]
    with ThreadPoolExecutor(2) as pool:
        ended = list(pool.map(lambda _: client.request("POST", f"/v1/sessions/{session_id}/end"), range(2)))
    assert sorted(status for status, _ in ended) == [202, 409]
    client.wait_for_status(session_id, timeout_s=30)
    assert _kinds(stack, call_id) == ["session.update", "session.input_audio.mute", "session.close"]
    status, body = client.request("POST", "/v1/sessions/sess_nobody/hold")
    assert (status, body["error"]["code"]) == (404, "session_not_found")
