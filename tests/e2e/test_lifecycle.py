"""Admission timing and the live stream, through the real processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dramatiq
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from gateway.app import Gateway
from gateway.providers.realtime import SimulatedRealtime
from pipeline.admission import ADMISSION_TIMER
from pipeline.platform.config import Settings
from pipeline.platform.names import ADMISSION_QUEUE
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import SCRIPTS, set_script
from workers.broker import make_broker


def test_an_admission_timer_fails_a_session_that_never_connected(
    stack: Stack, client: Client, services: Services
) -> None:
    """The admission timeout, delivered as a delayed message, fails a session still waiting
    to connect, with a durable incident; connecting afterwards is refused. Each state answers one
    code, whichever layer refuses (the gateway reading the record for typed text, the worker in
    the call's order for the agent's words, the admission for connect): session_not_connected
    before, session_ended with the end reason after; the call log ends with that reason too."""
    session = client.create_session("Be brief.")
    for verb, body in (("caller/text", {"text": "hello?"}), ("agent/say", {"text": "Hello."})):
        status, answer = client.request("POST", f"/v1/sessions/{session['id']}/{verb}", body)
        assert (status, answer["error"]["code"], answer["error"]["status"]) == (
            409,
            "session_not_connected",
            "created",
        ), verb
    broker = make_broker(services.redis_url, namespace=stack.namespace)
    broker.declare_queue(ADMISSION_QUEUE)
    timer: dramatiq.Message[Any] = dramatiq.Message(
        queue_name=ADMISSION_QUEUE,
        actor_name="session_timer",
        args=(),
        kwargs={"session_id": session["id"], "name": ADMISSION_TIMER},
        options={},
    )
    broker.enqueue(timer, delay=100)

    record = client.wait_for_status(session["id"], timeout_s=30)
    assert (record["status"], record["end_reason"]) == ("failed", "admission_timeout")
    assert [incident["code"] for incident in record["incidents"]] == ["admission_timeout"]
    asked = (
        ("connect", {"sdp": "v=0"}),
        ("caller/text", {"text": "hello?"}),
        ("agent/say", {"text": "Hello."}),
        ("end", {}),
    )
    for verb, body in asked:
        status, answer = client.request("POST", f"/v1/sessions/{session['id']}/{verb}", body)
        error = answer["error"]
        assert (status, error["code"], error["status"], error["end_reason"]) == (
            409,
            "session_ended",
            "failed",
            "admission_timeout",
        ), verb
    ended = client.call_log(session["id"])["entries"][-1]
    assert (ended["kind"], ended["data"]["reason"]) == ("call.ended", record["end_reason"])
    broker.close()


def test_the_live_stream_carries_transcripts_and_controls_and_needs_the_token(
    stack: Stack, client: Client
) -> None:
    """A subscriber sees growing transcript deltas, each final, each control as sent and the
    close; a subscriber without the token is refused with 401."""
    set_script(stack, SCRIPTS / "spoken_call.json")
    session = client.create_session("You are the order desk.")
    url = f"{stack.live_url}/v1/sessions/{session['id']}/live"
    try:
        connect(url)
    except InvalidStatus as refused:
        assert refused.response.status_code == 401
    else:
        raise AssertionError("a live stream without a token was accepted")

    messages: list[dict[str, Any]] = []
    with connect(url, additional_headers={"Authorization": f"Bearer {stack.api_token}"}) as live:
        client.connect(session["id"])
        for raw in live:
            messages.append(json.loads(raw))
            if messages[-1]["type"] == "session.closed":
                break

    kinds = [message["type"] for message in messages]
    assert kinds[-1] == "session.closed"
    finals = [(m["role"], m["text"]) for m in messages if m["type"] == "transcript.final"]
    assert finals[0] == ("user", "Hi, I'd like to check on an order.")
    assert len(finals) == 6
    for final in (m for m in messages if m["type"] == "transcript.final"):
        deltas = [
            m["delta"]
            for m in messages
            if m["type"] == "transcript.delta" and m["item_id"] == final["item_id"]
        ]
        assert len(deltas) > 1, final
        assert "".join(deltas) == final["text"]
    controls = [m["control"]["type"] for m in messages if m["type"] == "control"]
    assert controls == ["session.update", "response.create", "response.create", "response.create"]


def test_a_live_token_opens_its_own_session_stream_and_nothing_else(stack: Stack, client: Client) -> None:
    """The live token that creation returns opens that session's stream from a URL (as a
    browser would, without the API token); the API token in the URL, another session's token
    and a forged token are refused with 401."""
    set_script(stack, {"name": "silent", "caller": [], "model": []})
    session = client.create_session("Be brief.")
    other = client.create_session("Be brief.")
    base = f"{stack.live_url}/v1/sessions/{session['id']}/live"
    token = session["live"]["token"]
    assert session["live"]["path"] == f"/v1/sessions/{session['id']}/live?token={token}"
    refused = [
        f"{base}?token={stack.api_token}",
        f"{base}?token={other['live']['token']}",
        f"{base}?token={token[:-2]}xx",
    ]
    for url in refused:
        _assert_unauthorized(url)
    with connect(f"{stack.live_url}{session['live']['path']}") as live:
        client.connect(session["id"])
        client.end(session["id"])
        closing = [json.loads(raw) for raw in live]
    assert closing[-1] == {"type": "session.closed", "reason": "app_ended"}
    assert live.close_code == 1000
    fresh = client._ok("POST", f"/v1/sessions/{other['id']}/live-token")
    with connect(f"{stack.live_url}{fresh['path']}") as live:
        client.end(other["id"])
        ending = [json.loads(live.recv(timeout=30)), json.loads(live.recv(timeout=30))]
    # The call log's last entry reaches the listener before the stream closes.
    assert [m["type"] for m in ending] == ["log.entry", "session.closed"]
    assert ending[0]["kind"] == "call.ended"


def _close_code(url: str, headers: dict[str, str]) -> int | None:
    """The code a live stream is closed with before it sends anything."""
    with connect(url, additional_headers=headers) as live:
        try:
            live.recv(timeout=15)
        except ConnectionClosed:
            pass
    return live.close_code


def test_the_live_stream_of_an_unknown_or_ended_session_closes_with_a_code(
    stack: Stack, client: Client
) -> None:
    """An unknown session closes with 4404, an ended one with 4410; neither is held open."""
    headers = {"Authorization": f"Bearer {stack.api_token}"}
    assert _close_code(f"{stack.live_url}/v1/sessions/sess_nobody/live", headers) == 4404
    session = client.create_session("Be brief.")
    client.end(session["id"])
    client.wait_for_status(session["id"], timeout_s=30)
    assert _close_code(f"{stack.live_url}/v1/sessions/{session['id']}/live", headers) == 4410
    status, answer = client.request("POST", f"/v1/sessions/{session['id']}/live-token")
    assert (status, answer["error"]["code"]) == (409, "session_ended")


def _sessions_list(stack: Stack, *flags: str) -> dict[str, Any]:
    """`switchboard sessions list FLAGS` against the stack's gateway: its JSON answer."""
    finished = subprocess.run(
        [sys.executable, "-m", "switchboard", "sessions", "list", "--api", stack.api_url, *flags],
        env={**os.environ, "SWITCHBOARD_API_TOKEN": stack.api_token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    return dict(json.loads(finished.stdout))


def test_sessions_list_pages_through_the_gateway_with_a_cursor(stack: Stack, client: Client) -> None:
    """`sessions list --limit 2` answers the newest two and a `next`; `--cursor NEXT` the two
    after them; `--status` keeps only that status."""
    created = [client.create_session("Be brief.")["id"] for _ in range(3)]
    status = client.session(created[0])["status"]

    first = _sessions_list(stack, "--limit", "2")
    second = _sessions_list(stack, "--limit", "2", "--cursor", first["next"])
    filtered = _sessions_list(stack, "--status", status, "--limit", "500")

    assert [session["id"] for session in first["sessions"]] == created[:0:-1]
    assert second["sessions"][0]["id"] == created[0]
    assert {session["status"] for session in filtered["sessions"]} == {status}
    assert set(created) <= {session["id"] for session in filtered["sessions"]}


def _switchboard_call(stack: Stack, *flags: str) -> subprocess.Popen[str]:
    """`switchboard call FLAGS` against the stack's gateway, its output read line by line."""
    return subprocess.Popen(
        [sys.executable, "-m", "switchboard", "call", "--api", stack.api_url, *flags],
        env={**os.environ, "SWITCHBOARD_API_TOKEN": stack.api_token},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _session_id(line: str) -> str:
    """The id in `session sess_… created` (or `… ended (reason)`)."""
    return line.split()[1]


def test_switchboard_call_prints_the_transcript_until_the_caller_hangs_up(
    stack: Stack, client: Client, tmp_path: Path
) -> None:
    """`switchboard call` connects with the offer in `--sdp FILE`, prints each turn as it is
    spoken and returns 0 once the caller has hung up."""
    set_script(stack, SCRIPTS / "spoken_call.json")
    offer = tmp_path / "offer.sdp"
    offer.write_text("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n")
    call = _switchboard_call(stack, "--sdp", str(offer))
    output, _ = call.communicate(timeout=120)
    lines = output.splitlines()
    assert call.returncode == 0, output
    session_id = _session_id(lines[0])
    assert lines[0] == f"session {session_id} created"
    spoken = [line.strip() for line in lines if "▸" in line]
    assert spoken[0] == "caller ▸ Hi, I'd like to check on an order."
    assert spoken[-1] == "agent ▸ You're welcome. Have a great day!"
    assert len(spoken) == 6
    record = client.session(session_id)
    assert (record["status"], record["ended_by"]) == ("ended", "caller")
    assert lines[-1] == f"session {session_id} ended ({record['end_reason']})"


def test_switchboard_call_stays_up_until_ctrl_c_ends_it(stack: Stack, client: Client) -> None:
    """With no SDP in hand (`switchboard call` makes the offer up) and on the script that never
    hangs up (the README's), the call is up after the caller's last words until Ctrl-C, which
    ends it through the API and returns 0."""
    set_script(stack, SCRIPTS / "stays_on_line.json")
    call = _switchboard_call(stack)
    assert call.stdout is not None
    try:
        lines: list[str] = []
        for line in call.stdout:
            lines.append(line.rstrip("\n"))
            if "agent ▸ Thanks. Order 4417 shipped" in line:
                break
        session_id = _session_id(lines[0])
        # The caller has said all it will; the call is still up.
        assert client.session(session_id)["status"] in ("listening", "responding", "connected")
        call.send_signal(signal.SIGINT)
        rest, _ = call.communicate(timeout=60)
    finally:
        call.kill()
    lines += rest.splitlines()
    assert call.returncode == 0, "\n".join(lines)
    record = client.session(session_id)
    assert (record["status"], record["end_reason"]) == ("ended", "app_ended")
    assert lines[-3:] == [
        "ending the call …",
        "closed: app_ended",
        f"session {session_id} ended (app_ended)",
    ]


def _refused_handshakes(client: Client) -> dict[str, float]:
    """The gateway's count of refused live-stream handshakes, by reason."""
    status, body = client.request("GET", "/metrics")
    assert status == 200
    text = body if isinstance(body, str) else body.decode()
    return {
        sample.labels["reason"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "switchboard_live_handshakes_refused"
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def test_a_refused_live_handshake_is_counted_and_logged_once_never_as_an_error(
    stack: Stack, client: Client
) -> None:
    """Two handshakes without a valid credential (401) and one with a 9 KiB header (431): the
    gateway's log gets one INFO line for each, naming the reason and the path (not the token),
    and no ERROR; the counter goes up by reason. (Every 401 logged a uvicorn ERROR: anyone
    could fill the error log.)"""
    before = _refused_handshakes(client)
    start = len(stack.gateway.lines)
    base = f"{stack.live_url}/v1/sessions/sess_refused/live"
    for url in (base, f"{base}?token=forged-token"):
        _assert_unauthorized(url)
    port = int(stack.gateway.ready["http"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        raw.sendall(
            b"GET /v1/sessions/sess_refused/live HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\nX-Big: " + b"y" * 9 * 1024 + b"\r\n\r\n"
        )
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]

    def logged() -> list[str]:
        return [line for line in stack.gateway.lines[start:] if "sess_refused" in line]

    assert wait_until(lambda: len(logged()) >= 3, timeout_s=10), logged()
    new = stack.gateway.lines[start:]
    assert [line for line in new if " ERROR " in line] == []
    refusals = logged()
    assert len(refusals) == 3, refusals
    assert all(" INFO live stream handshake refused (" in line for line in refusals), refusals
    assert sorted(line.split("refused (")[1].split(")")[0] for line in refusals) == [
        "headers_too_large",
        "unauthorized",
        "unauthorized",
    ]
    assert not any("forged-token" in line for line in new)
    after = _refused_handshakes(client)
    gained = {reason: after[reason] - before.get(reason, 0.0) for reason in after}
    assert gained == {"unauthorized": 2.0, "headers_too_large": 1.0}


def _assert_unauthorized(url: str) -> None:
    """The live stream at `url` refuses the handshake 401."""
    try:
        connect(url)
    except InvalidStatus as refusal:
        assert refusal.response.status_code == 401, url
    else:
        raise AssertionError(f"{url} was accepted")


class _LeavingListener:
    """The part of a Starlette WebSocket a gateway's listener uses: records what it is sent,
    and leaves when told (or is closed by the gateway)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self._gone = asyncio.Event()

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def close(self, code: int) -> None:
        self._gone.set()

    def leave(self) -> None:
        self._gone.set()

    async def receive(self) -> dict[str, Any]:
        await self._gone.wait()
        return {"type": "websocket.disconnect"}


def _kept_for(gateway: Gateway, session_id: str) -> dict[str, Any]:
    """What a gateway keeps of a session it does not hold, for the people who watched it."""
    kept = {
        "log copy": gateway.watchers.logged(session_id),
        "read lock": session_id in gateway.watched._log_reads,
        "poke": session_id in gateway.watched._log_pokes,
        "follower": session_id in gateway.watched._log_followers,
        "end watcher": session_id in gateway.watched._end_watchers,
    }
    return {name: value for name, value in kept.items() if value}


def test_a_gateway_keeps_nothing_of_a_call_it_did_not_hold_once_its_listeners_leave(
    stack: Stack, client: Client, services: Services
) -> None:
    """Listeners on a second gateway follow a call held by the stack's gateway. When they all
    leave, the second keeps nothing of it (it kept the call log copied so far, for good); and a
    listener who joins there after the end (which that gateway announced) leaves nothing
    behind (each such listener left a read lock)."""
    set_script(stack, {"name": "silent", "caller": [], "model": []})
    session = client.create_session("Be brief.")
    client.connect(session["id"])
    session_id = session["id"]

    async def scenario() -> tuple[list[_LeavingListener], _LeavingListener, dict[str, Any], dict[str, Any]]:
        settings = Settings(
            gateway_id=f"gw-listen-{uuid.uuid4().hex[:6]}",
            gateway_port=0,
            gateway_host="127.0.0.1",
            broker_namespace=stack.namespace,
            api_token=stack.api_token,
            metrics=False,
        )
        broker = make_broker(services.redis_url, namespace=stack.namespace)
        simulator = stack.simulator_url
        provider = SimulatedRealtime(
            simulator.removesuffix("/v1"), stack.env["SWITCHBOARD_PROVIDER_WS_URL"], "sk", "m"
        )
        gateway = Gateway(settings, services.redis_url, broker, provider)
        await gateway.start()
        try:
            listeners = [_LeavingListener() for _ in range(3)]
            serving = [asyncio.create_task(gateway.watched.listen(session_id, each)) for each in listeners]
            await _until_async(lambda: all(each.sent for each in listeners), 30)
            for each in listeners:
                each.leave()
            await asyncio.gather(*serving)
            await _until_async(lambda: not _kept_for(gateway, session_id), 15)
            after_leaving = _kept_for(gateway, session_id)

            staying = _LeavingListener()
            stays = asyncio.create_task(gateway.watched.listen(session_id, staying))
            await _until_async(lambda: bool(staying.sent), 30)
            await asyncio.to_thread(client.end, session_id)
            await asyncio.wait_for(stays, 30)
            await _until_async(lambda: not _kept_for(gateway, session_id), 15)
            late = _LeavingListener()
            await asyncio.wait_for(gateway.watched.listen(session_id, late), 30)
            await _until_async(lambda: not _kept_for(gateway, session_id), 15)
            after_the_end = _kept_for(gateway, session_id)
            return listeners, late, after_leaving, after_the_end
        finally:
            await gateway.stop()

    listeners, late, after_leaving, after_the_end = asyncio.run(scenario())
    # What they were sent is the call log (its first entry, the call's start), so the copy was real.
    assert all(each.sent[0]["kind"] == "call.started" for each in listeners), listeners[0].sent
    assert after_leaving == {}
    assert late.sent[-1]["type"] == "session.closed"
    assert any(entry.get("kind") == "call.ended" for entry in late.sent)
    assert after_the_end == {}


async def _until_async(predicate: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
