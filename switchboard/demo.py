"""`switchboard demo`: one scripted three-turn call through every real process (with
`--phone`, a phone call through the SIP door: routed, rung, accepted, talked on, hung up; with
`--provider live`, the same on OpenAI's Live API: the model delegates the order lookup, and a
registered delegation handler answers it with one commentary; with `--campaign`, a small
campaign dialled through the simulated provider's dial plan, with every outcome, and its table)."""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from pipeline.platform.config import Settings
from switchboard.client import Client
from switchboard.services import check_reachable, resolve_services
from switchboard.stack import Stack

SCRIPTS = Path(__file__).resolve().parent.parent / "simulator" / "scripts"
SCRIPT = SCRIPTS / "spoken_call.json"
LIVE_SCRIPT = SCRIPTS / "live_lookup.json"
# What a Live session's delegations run (workers/tools/reference_delegations.py).
LIVE_HANDLER = "order_desk"
INSTRUCTIONS = (
    "You are Robin, the order desk of a small bookshop. Answer briefly and warmly; "
    "confirm order numbers back to the caller."
)
CALL_TIMEOUT_S = 60.0
# The simulated model thinks this long before each answer's first audio, as a real one might: so
# the heard latency the demo prints means something.
FIRST_AUDIO_MS = 450
PHONE_NUMBER = "+18005551212"
CALLER_NUMBER = "+14155550100"


def run_demo(
    settings: Settings, *, phone: bool = False, provider: str = "realtime", campaign: bool = False
) -> int:
    say = _printer()
    services = resolve_services(
        settings.database_url, settings.redis_url, settings.data_dir, log=lambda m: say(f"· {m}")
    )
    # A URL that names nothing reachable (no server, no such database) is one line, exit 2.
    check_reachable(services)
    say(f"· PostgreSQL: {_redact(services.database_url)}")
    say(f"· Redis: {services.redis_url}")
    try:
        from models.db import connect
        from models.migrate import migrate

        applied = migrate(connect(services.database_url))
        say(f"· migrations: {', '.join(applied) or 'up to date'}")
        simulator_args = (
            "--script",
            str(SCRIPT),
            "--live-script",
            str(LIVE_SCRIPT),
            "--first-audio-ms",
            str(FIRST_AUDIO_MS),
        )
        with Stack(
            services.database_url, services.redis_url, simulator_args=simulator_args, ends_its_calls=True
        ) as stack:
            say("· starting simulator, worker and gateway as separate processes …")
            stack.start(workers=1)
            say(f"· gateway API {stack.api_url}, live stream {stack.live_url}")
            client = Client(stack.api_url, stack.api_token, stack.live_url)
            if campaign:
                return _campaign(stack, client, say)
            spec: dict[str, Any] = {}
            if provider == "live":
                say(f"· provider: OpenAI's Live API (simulated); delegations go to {LIVE_HANDLER}")
                spec = {"provider": "live", "live": {"delegation": LIVE_HANDLER}}
            if phone:
                return _phone_call(stack, client, say, spec)
            if provider == "live":
                return _place_live_call(client, say, spec)
            return _place_call(client, say)
    finally:
        services.stop()


def _place_call(client: Client, say: Any) -> int:
    session = client.create_session(INSTRUCTIONS)
    session_id = session["id"]
    say(f"\n☎  session {session_id} created ({session['status']})")
    follower = client.follow_live(session_id, lambda message: _show_live(message, say))
    answer = client.connect(session_id)
    say(f"☎  connected: provider call {answer['call_id']} (SDP answer {len(answer['sdp'])} bytes)\n")
    record = client.wait_for_status(session_id, timeout_s=CALL_TIMEOUT_S)
    follower.join(5)
    record = client.session(session_id, events=True)
    say("\n── the call's durable record (PostgreSQL) " + "─" * 40)
    say(f"status       {record['status']} ({record['end_reason']})")
    say(f"usage        {json.dumps(record['usage'])}")
    say(f"events       {json.dumps(record['events'])}  applied_seq={record['applied_seq']}")
    say(f"incidents    {len(record['incidents'])}")
    say(f"heard        {_heard(record)}")
    say("transcript")
    for item in record["transcript"]:
        say(f"  {item['role']:>9}  {item['text']}")
    say("controls emitted, in apply order")
    for event in sorted(record["log"], key=lambda e: e["applied_order"] or 0):
        for item in event["controls"]:
            if item["kind"] == "control":
                control = item["control"]
                say(f"  {control['event_id']:>10}  {control['type']}  ← {event['kind']}")
    ok = record["status"] == "ended" and len(record["transcript"]) == 6
    say("\n" + ("demo passed: the call completed and every turn is durable" if ok else "demo FAILED"))
    return 0 if ok else 1


def _heard(record: dict[str, Any]) -> str:
    """What the caller waited for the agent's answers, in words."""
    heard = record["heard_latency"]
    if not heard["turns"]:
        return "no answer was measured"
    return f"p50 {heard['p50_ms']} ms, p95 {heard['p95_ms']} ms over {heard['turns']} answers"


def _place_live_call(client: Client, say: Any, spec: dict[str, Any]) -> int:
    """A Live call over WebRTC: the model holds the conversation and delegates the lookup; the
    handler's answer goes back as commentary."""
    session = client.create_session(INSTRUCTIONS, **spec)
    session_id = session["id"]
    say(f"\n☎  Live session {session_id} created ({session['status']})")
    follower = client.follow_live(session_id, lambda message: _show_live(message, say))
    answer = client.connect(session_id)
    say(f"☎  connected: Live session {answer['call_id']} (SDP answer {len(answer['sdp'])} bytes)\n")
    record = client.wait_for_status(session_id, timeout_s=CALL_TIMEOUT_S)
    follower.join(5)
    say("\n── the call log " + "─" * 60)
    for entry in client.call_log(session_id)["entries"]:
        say(f"  {entry['seq']:>3}  {entry['kind']:<14} {json.dumps(entry['data'])[:90]}")
    say("\n── the call's durable record (PostgreSQL) " + "─" * 40)
    say(f"status       {record['status']} ({record['end_reason']})")
    say(f"usage        {record['usage']['seconds']:g} s (active {record['usage']['active_seconds']:g} s)")
    say(f"compaction   by the {record['compaction']['by']}")
    say(f"heard        {_heard(record)}")
    for step in record["tool_steps"]:
        say(f"delegation   {step['call_id']} → {step['tool']} {step['version']}: {step['status']}")
    ok = (
        record["status"] == "ended"
        and [step["status"] for step in record["tool_steps"]] == ["succeeded"]
        and any(item["role"] == "user" for item in record["transcript"])
    )
    say(
        "\n"
        + ("demo passed: the delegation was answered once and the call is durable" if ok else "demo FAILED")
    )
    return 0 if ok else 1


def _phone_call(stack: Stack, client: Client, say: Any, spec: dict[str, Any] | None = None) -> int:
    """A phone call from ring to hangup: a route for the number, the simulated provider's
    signed webhook, the accept, the call, and its call log (on Live, announced with
    `live.transport.incoming` and answered by the Live session's id)."""
    live = (spec or {}).get("provider") == "live"
    route = client.add_route(PHONE_NUMBER, {"instructions": INSTRUCTIONS, **(spec or {})}, max_calls=10)
    say(f"\n☎  route {route['id']}: {PHONE_NUMBER} → the order desk")
    place = {
        "to": PHONE_NUMBER,
        "from": CALLER_NUMBER,
        "webhook_url": stack.webhook_url,
        "secret": stack.webhook_secret,
    }
    base = stack.simulator_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{base}/_sim/live/sip/calls" if live else f"{base}/_sim/sip/calls",
        data=json.dumps(place).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        placed = json.loads(response.read())
    call_id = placed["session_id"] if live else placed["call_id"]
    say(f"☎  {CALLER_NUMBER} dials {PHONE_NUMBER}: provider call {call_id}, webhook delivered signed")
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while time.monotonic() < deadline:
        status, answered = client.request("GET", f"/v1/phone-calls/{call_id}")
        if status == 200 and answered.get("session_id"):
            break
        time.sleep(0.05)
    else:
        say("demo FAILED: the call was never answered")
        return 1
    session_id = answered["session_id"]
    say(f"☎  accepted once ({answered['action']}) with session {session_id}\n")
    follower = client.follow_live(session_id, lambda message: _show_live(message, say))
    record = client.wait_for_status(session_id, timeout_s=CALL_TIMEOUT_S)
    follower.join(5)
    say("\n── the call log " + "─" * 60)
    for entry in client.call_log(session_id)["entries"]:
        say(f"  {entry['seq']:>3}  {entry['kind']:<14} {json.dumps(entry['data'])[:90]}")
    ok = record["status"] == "ended" and record["ended_by"] == "caller"
    say("\n" + ("demo passed: the phone call was answered, talked on and hung up" if ok else "demo FAILED"))
    return 0 if ok else 1


# The demo campaign's contacts, and what the simulated provider's dial plan makes of each.
DEMO_CONTACTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("+14155550101", "Sam", {"outcome": "human", "script": "live_callee", "ring_ms": 400}),
    ("+14155550102", "Ana", {"outcome": "human", "script": "live_callee", "ring_ms": 800}),
    (
        "+14155550103",
        "Lee",
        {
            "outcome": "voicemail",
            "greeting": "Hi, you've reached Lee. Leave a message after the tone.",
            "ring_ms": 600,
        },
    ),
    ("+14155550104", "Kim", {"outcome": "busy", "after_ms": 500}),
    ("+14155550105", "Joe", {"outcome": "no_answer", "after_ms": 1_500}),
    ("+14155550106", "Eve", {"outcome": "failed", "after_ms": 300, "code": "provider_invite_failed"}),
    ("+14155550107", "Max", {"outcome": "human", "script": "live_callee"}),
)
# Asked never to be called again, so the campaign never dials it.
DEMO_SUPPRESSED = "+14155550107"
DEMO_TRUNK = {
    "name": "demo",
    "url": "sips:sip.example.com",
    "username": "acme",
    "password": "not-a-real-password",
    "caller_number": "+12125550100",
}


def _campaign(stack: Stack, client: Client, say: Any) -> int:
    """A campaign of seven contacts through a trunk, three at a time: people, a machine, a busy
    line, no answer, a refused dial and a number on the do-not-call list; then its table."""
    plan = {to: entry for to, _, entry in DEMO_CONTACTS}
    base = stack.simulator_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{base}/_sim/live/dial-plan",
        data=json.dumps(plan).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10):
        pass
    client.add_trunk(DEMO_TRUNK)
    say(f"\n☎  trunk {DEMO_TRUNK['name']} ({DEMO_TRUNK['url']}, calls from {DEMO_TRUNK['caller_number']})")
    client.suppress(DEMO_SUPPRESSED, "asked not to be called")
    say(f"☎  {DEMO_SUPPRESSED} is on the do-not-call list")
    created = client.create_campaign(
        {
            "name": "appointment reminders",
            "session": {
                "instructions": "You are Acme Dental. Remind {name} of tomorrow's appointment.",
                "provider": "live",
            },
            "contacts": [{"to": to, "vars": {"name": name}} for to, name, _ in DEMO_CONTACTS],
            "max_concurrent": 3,
            "voicemail": {
                "action": "leave_message",
                "message": "This is Acme Dental: see you tomorrow at ten.",
            },
        }
    )
    campaign_id = created["id"]
    say(f"☎  campaign {campaign_id}: {created['contacts']} contacts, 3 at a time\n")
    deadline = time.monotonic() + 3 * CALL_TIMEOUT_S
    shown = created
    while time.monotonic() < deadline:
        shown = client.campaign(campaign_id)
        if shown["status"] == "completed":
            break
        states = shown["counts"]["by_state"]
        waiting, calling, done = states["waiting"], states["calling"], states["done"]
        say(f"  {shown['status']:<9} waiting {waiting}, calling {calling}, done {done}")
        time.sleep(2)
    say("\n── the campaign's contacts " + "─" * 50)
    say(f"  {'to':<14} {'outcome':<11} {'attempts':>8}  answered by")
    contacts = client.campaign_contacts(campaign_id)["contacts"]
    for contact in contacts:
        answered_by = ""
        if contact["attempts"]:
            record = client.session(contact["attempts"][-1]["session_id"])
            answered_by = (record.get("outbound") or {}).get("answered_by") or ""
        outcome = contact["outcome"] or contact["state"]
        say(f"  {contact['to']:<14} {outcome:<11} {len(contact['attempts']):>8}  {answered_by}")
    outcomes = {contact["outcome"] for contact in contacts}
    ok = shown["status"] == "completed" and outcomes == {
        "completed",
        "voicemail",
        "busy",
        "no_answer",
        "failed",
        "suppressed",
    }
    say("\n" + ("demo passed: every contact came to its outcome, each dialled once" if ok else "demo FAILED"))
    return 0 if ok else 1


def _show_live(message: dict[str, Any], say: Any) -> None:
    kind = message.get("type")
    if kind == "transcript.final":
        say(f"  {message['role']:>9} ▸ {message['text']}")
    elif kind == "control":
        control = message["control"]
        detail = ""
        if control["type"] == "response.create":
            detail = f" (max_output_tokens={control['response'].get('max_output_tokens')})"
        elif control["type"] == "session.commentary.append":
            detail = f" ▸ {control['content']}"
        say(f"  {'control':>9} ◂ {control['type']} {control['event_id']}{detail}")
    elif kind == "session.closed":
        say(f"  {'session':>9} ■ closed: {message['reason']}")


def _printer() -> Any:
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, flush=True)
            sys.stdout.flush()

    return say


def _redact(url: str) -> str:
    return url.split("@", 1)[-1] if "@" in url else url
