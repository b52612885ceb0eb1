"""Live calls end to end (issue 16): the simulated provider speaks OpenAI's Live API, the
gateway holds the Live sideband, the workers answer the model's delegations through a registered
handler on tool_runs, and every control validates strictly against `openai.types.live`."""

from __future__ import annotations

from typing import Any

from simulator.recording import parse_recording, recording_lines
from switchboard.client import Client
from switchboard.export import session_recording
from switchboard.stack import Stack
from tests.e2e.conftest import set_script
from tests.support.heard import assert_heard, heard_counted
from tests.support.live import (
    QUICK_TIMING,
    controls_of,
    drop_live_sideband,
    live_session,
    ring_live,
    set_live_script,
)
from tests.support.phone import ring
from tests.support.waiting import wait_for

ASK = "Could you check where my order 4417 is?"
ORDER_DESK = "You are Acme's order desk."
# How long the simulated model takes before it speaks: a realistic wait, in one test only.
FIRST_AUDIO_MS = 300


def _webrtc_call(client: Client, **spec: Any) -> tuple[str, str]:
    session = client.create_session("You are the order desk.", provider="live", **spec)
    connected = client.connect(session["id"])
    return session["id"], connected["call_id"]


def test_a_webrtc_live_call_delegates_once_and_is_answered_once(stack: Stack, client: Client) -> None:
    """A Live session created through the API: the caller's words are written down, the
    delegation is answered with one commentary from the handler, and the caller's hangup ends
    the call; the call log reads like a Realtime call's. With the model taking FIRST_AUDIO_MS
    before it speaks, the agent's answers say what the caller heard, on the call's timeline, and
    the gateway's histogram counted each of them once."""
    set_live_script(
        stack,
        {
            "timing": {**QUICK_TIMING, "first_audio_ms": FIRST_AUDIO_MS},
            "caller": [
                {"say": "Hi there.", "after_ms": 100},
                {"say": ASK, "after_ms": 100, "delegate": True},
                {"hangup": True, "after_ms": 300},
            ],
            "model": [{"say": "Hello! How can I help?"}],
        },
    )
    counted_before = heard_counted(client, "live")
    session_id, call_id = _webrtc_call(client, live={"delegation": "echo_task"})
    assert call_id.startswith("live_u7_")
    record = client.wait_for_status(session_id, timeout_s=30)
    assert (record["status"], record["end_reason"], record["ended_by"]) == (
        "ended",
        "caller_hung_up",
        "caller",
    )

    log = live_session(stack, call_id)
    assert log["errors"] == []
    controls = controls_of(log)
    assert [c["type"] for c in controls] == [
        "session.update",
        "session.thinking.append",
        "session.commentary.append",
    ]
    [delegation] = [e["event"] for e in log["events"] if e["event"]["type"] == "session.delegation.created"]
    commentary = controls[2]
    assert commentary["delegation_id"] == delegation["delegation"]["id"]
    # The first task of a call takes the caller's words from its start.
    assert commentary["content"] == f"You asked: Hi there. {ASK}"
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("echo_task", "succeeded")]
    caller_words = " ".join(i["text"] for i in record["transcript"] if i["role"] == "user")
    assert " ".join(caller_words.split()) == f"Hi there. {ASK}"
    assert record["provider"] == "live" and record["compaction"]["by"] == "provider"
    assert record["usage"]["seconds"] > 0

    story = client.call_log(session_id)["entries"]
    kinds = [entry["kind"] for entry in story]
    assert kinds[0] == "call.started" and kinds[-1] == "call.ended"
    assert {"turn.user", "turn.agent", "tool.call", "tool.result"} <= set(kinds)
    said = [entry["data"]["text"] for entry in story if entry["kind"] == "turn.user"]
    assert said == [f"Hi there. {ASK}"] or said == ["Hi there.", ASK]
    waits = assert_heard(story, record, FIRST_AUDIO_MS)
    # The model answered the greeting itself: none of that wait was Switchboard's.
    greeted = next(e["data"] for e in story if e["kind"] == "turn.agent")
    assert greeted["text"] == "Hello! How can I help?" and greeted["heard"]["switchboard_ms"] == 0
    assert heard_counted(client, "live") == counted_before + len(waits)

    # Exported, the call is a Live recording: its deltas are the ones the provider sent.
    recording, unsaid = session_recording(client.session(session_id, events=True))
    assert unsaid == [] and parse_recording(recording_lines(recording)) == recording
    assert recording.header.session == {
        "provider": "live",
        "live": {"delegation": "echo_task", "acknowledgement_delay_ms": 400},
        "instructions": "You are the order desk.",
        "tools": [],
        "limits": {"max_session_seconds": 3600},
        # The model it was served by, so that a replay runs on it.
        "model": "gpt-live-1.1",
    }
    sent = [e["event"] for e in log["events"] if e["event"]["type"] == "session.input_transcript.delta"]
    exported = [
        line.event for line in recording.events if line.event["type"] == "session.input_transcript.delta"
    ]
    assert exported == sent
    assert [line.t_ms for line in recording.events] == sorted(line.t_ms for line in recording.events)
    assert recording.close is not None and recording.close.close.code == 1000


def test_caller_words_delivered_twice_are_written_down_once(stack: Stack, client: Client) -> None:
    """Every caller delta comes a second time, same event id, after its words were written
    down (a provider that delivers twice): the record and the delegation's task hold them once."""
    set_live_script(
        stack,
        {
            "caller": [
                {"say": "Hi there.", "after_ms": 100},
                {"say": ASK, "after_ms": 1_500, "delegate": True},
                {"hangup": True, "after_ms": 2_000},
            ],
            "model": [{"say": "Hello! How can I help?"}],
            "switches": {"redeliver_caller_deltas_after_ms": 1_200},
        },
    )
    session_id, call_id = _webrtc_call(client, live={"delegation": "echo_task"})
    record = client.wait_for_status(session_id, timeout_s=30)
    assert record["status"] == "ended"

    log = live_session(stack, call_id)
    assert log["errors"] == []
    sent = [e["event"] for e in log["events"] if e["event"]["type"] == "session.input_transcript.delta"]
    ids = [event["event_id"] for event in sent]
    # The redelivery really happened: each delta's id went out twice.
    assert len(ids) == 2 * len(set(ids)) > 0
    caller_words = " ".join(i["text"] for i in record["transcript"] if i["role"] == "user")
    assert " ".join(caller_words.split()) == f"Hi there. {ASK}"
    commentary = [c for c in controls_of(log) if c["type"] == "session.commentary.append"]
    assert [c["content"] for c in commentary] == [f"You asked: Hi there. {ASK}"]


DANA = {"id": "sup_dana", "name": "Dana"}


def _phone_session(client: Client, session_id: str) -> str:
    """The Switchboard session of a Live phone call, once the door has recorded it."""

    def found() -> str | None:
        status, body = client.request("GET", f"/v1/phone-calls/{session_id}")
        return str(body["session_id"]) if status == 200 and body.get("session_id") else None

    return str(wait_for(found, "the call's record"))


def test_a_live_phone_call_is_admitted_by_webhook_delegates_hears_a_whisper_and_hangs_up(
    stack: Stack, client: Client
) -> None:
    """`live.transport.incoming` through the SIP door: the call is accepted once by its session
    id with the route's Live session, its sideband attached; a delegation is answered with one
    commentary, a supervisor's whisper is appended as instructions, and the caller's hangup ends
    it. Its call log has the entry kinds of a Realtime call."""
    set_live_script(
        stack,
        {
            "caller": [
                {"say": "Hello.", "after_ms": 100},
                {"say": ASK, "after_ms": 100, "delegate": True},
                {"say": "Thanks.", "after_ms": 1_200},
                {"hangup": True, "after_ms": 1_000},
            ],
            "model": [{"say": "Hi, how can I help?"}, {"say": "You're welcome."}],
        },
    )
    route = client.add_route(
        "+18005557001",
        {
            "instructions": "You are Acme's order desk.",
            "provider": "live",
            "live": {"delegation": "order_desk"},
        },
        max_calls=3,
    )
    live_id = ring_live(stack, "+18005557001", **{"from": "+14155550111"})
    session_id = _phone_session(client, live_id)
    wait_for(lambda: client.session(session_id)["status"] == "listening", "the call to listen")
    wait_for(
        lambda: any(s["status"] == "succeeded" for s in client.session(session_id)["tool_steps"]),
        "the delegation to be answered",
    )
    assert client.supervise(session_id, DANA, {"type": "whisper", "text": "Offer express shipping."}) == {
        "session_id": session_id,
        "status": "noted",
    }
    record = client.wait_for_status(session_id, timeout_s=30)
    assert (record["status"], record["end_reason"]) == ("ended", "caller_hung_up")

    log = live_session(stack, live_id)
    assert log["errors"] == [] and len(log["accepts"]) == 1
    assert log["config"]["delegation"] == {"type": "client", "acknowledgement_delay_ms": 400}
    assert [d["status"] for d in log["deliveries"]] == [200]
    controls = controls_of(log)
    commentaries = [c for c in controls if c["type"] == "session.commentary.append"]
    assert len(commentaries) == 1 and commentaries[0]["content"].startswith("Order 4417 is")
    [whisper] = [c for c in controls if c["type"] == "session.instructions.append"]
    assert whisper["delegation_id"] is None and "Offer express shipping." in whisper["content"]
    call = client.phone_call(live_id)
    assert (call["action"], call["outcome"], call["route_id"]) == ("accept", "accepted", route["id"])

    story = client.call_log(session_id)["entries"]
    kinds = [entry["kind"] for entry in story]
    assert story[0]["data"] | {"medium": "sip", "caller": "+14155550111"} == story[0]["data"]
    assert kinds[-1] == "call.ended" and kinds.count("call.ended") == 1
    assert set(kinds) == {
        "call.started",
        "turn.user",
        "turn.agent",
        "tool.call",
        "tool.result",
        "supervisor.whispered",
        "call.ended",
    }
    assert set(kinds) == set(_realtime_twin_kinds(stack, client))


def _realtime_twin_kinds(stack: Stack, client: Client) -> list[str]:
    """The call log kinds of the same call on Realtime: a phone call that asks for its order (a
    tool call), hears a supervisor's whisper and hangs up."""
    set_script(
        stack,
        {
            "name": "twin",
            "timing": {"delta_interval_ms": 10, "chars_per_delta": 12, "speech_ms": 100},
            "caller": [
                {"say": "Hello.", "after_ms": 100},
                {"say": ASK, "after_ms": 100},
                {"say": "Thanks.", "after_ms": 1_200},
                {"hangup": True, "after_ms": 1_000},
            ],
            "model": [
                {"say": "Hi, how can I help?"},
                {"function_call": {"name": "lookup_order", "arguments": {"order_id": "4417"}}},
                {"say": "It ships Friday."},
                {"say": "Noted."},
                {"say": "You're welcome."},
            ],
        },
    )
    client.add_route(
        "+18005557002", {"instructions": "You are Acme's order desk.", "tools": ["lookup_order"]}
    )
    call_id = ring(stack, "+18005557002")
    session_id = _phone_session(client, call_id)
    wait_for(
        lambda: any(s["status"] == "succeeded" for s in client.session(session_id)["tool_steps"]),
        "the tool call to be answered",
    )
    client.supervise(session_id, DANA, {"type": "whisper", "text": "Offer express shipping."})
    client.wait_for_status(session_id, timeout_s=30)
    return [entry["kind"] for entry in client.call_log(session_id)["entries"]]


def test_a_sideband_reattach_reconfirms_the_pending_delegation_and_answers_it_once(
    stack: Stack, client: Client
) -> None:
    """The sideband drops while a delegation's handler runs: the gateway attaches again (a new
    generation), Switchboard asks the model to have the caller re-confirm what the gap may have
    swallowed, naming the request still being worked on (LIVE_PROTOCOL.md §5.5), and the
    delegation is answered exactly once, on the new sideband."""
    wait_ask = "Please wait 1500 ms and check order 4417."
    set_live_script(
        stack,
        {
            "caller": [
                {"say": wait_ask, "after_ms": 100, "delegate": True},
                {"hangup": True, "after_ms": 300},
            ],
            "model": [],
        },
    )
    session_id, call_id = _webrtc_call(client, live={"delegation": "wait_task"})
    wait_for(
        lambda: [s["status"] for s in client.session(session_id)["tool_steps"]] == ["running"],
        "the handler to run",
    )
    drop_live_sideband(stack, call_id)
    record = client.wait_for_status(session_id, timeout_s=30)
    assert (record["status"], record["end_reason"]) == ("ended", "caller_hung_up")

    log = live_session(stack, call_id)
    assert log["errors"] == [] and len(log["attaches"]) == 2
    controls = controls_of(log)
    on_second = [entry["control"] for entry in log["controls"] if entry["sideband"] == 2]
    reconfirm, answer = on_second[0], on_second[1]
    assert reconfirm["type"] == "session.instructions.append" and reconfirm["delegation_id"] is None
    assert "confirm the request" in reconfirm["content"] and wait_ask in reconfirm["content"]
    commentaries = [c for c in controls if c["type"] == "session.commentary.append"]
    assert commentaries == [answer]
    assert answer["content"].startswith("Done after") and answer["content"].endswith(wait_ask)
    assert [i["code"] for i in record["incidents"]] == ["sideband_lost"]
    assert record["generation"] == 2
