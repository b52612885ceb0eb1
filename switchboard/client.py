"""A small client of the gateway's HTTP API and live stream (for the CLI, demo and tests)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

# A placeholder offer: the simulator answers any SDP; a real caller's browser sends its own.
DEMO_SDP_OFFER = (
    "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=switchboard\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
)
TERMINAL = ("ended", "failed")


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


class Client:
    def __init__(self, api_url: str, token: str, live_url: str | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        # The live stream is on the API's port unless a proxy says otherwise.
        self.live_url = live_url or "ws" + self.api_url.removeprefix("http")
        self.token = token

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 30,
    ) -> tuple[int, Any]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        request = urllib.request.Request(
            f"{self.api_url}{path}",
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                **(headers or {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.status, _decode(response.read(), response.headers.get("content-type", ""))
        except urllib.error.HTTPError as error:
            return error.code, _decode(error.read(), error.headers.get("content-type", ""))

    def _ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        status, answer = self.request(method, path, body, **kwargs)
        if status >= 400:
            raise ApiError(status, answer)
        return answer

    def create_session(self, instructions: str, **spec: Any) -> dict[str, Any]:
        return dict(self._ok("POST", "/v1/sessions", {"instructions": instructions, **spec}))

    def connect(self, session_id: str, sdp: str = DEMO_SDP_OFFER) -> dict[str, Any]:
        return dict(
            self._ok(
                "POST",
                f"/v1/sessions/{session_id}/connect",
                {"sdp": sdp},
                headers={"Accept": "application/json"},
            )
        )

    def end(self, session_id: str, reason: str = "app_ended") -> dict[str, Any]:
        return dict(self._ok("POST", f"/v1/sessions/{session_id}/end", {"reason": reason}))

    def caller_text(self, session_id: str, text: str) -> dict[str, Any]:
        """Text typed into the call as the caller's message."""
        return dict(self._ok("POST", f"/v1/sessions/{session_id}/caller/text", {"text": text}))

    def agent_say(self, session_id: str, text: str) -> dict[str, Any]:
        """The agent says these words."""
        return dict(self._ok("POST", f"/v1/sessions/{session_id}/agent/say", {"text": text}))

    def agent_reply(self, session_id: str, instructions: str) -> dict[str, Any]:
        """The agent replies now, steered by these instructions."""
        return dict(
            self._ok("POST", f"/v1/sessions/{session_id}/agent/reply", {"instructions": instructions})
        )

    def set_prompt(self, session_id: str, name: str, text: str) -> dict[str, Any]:
        """Set one named block of the session's instructions (empty text removes it)."""
        return dict(
            self._ok("PUT", f"/v1/sessions/{session_id}/prompt/{quote(name, safe='')}", {"text": text})
        )

    def set_tools(self, session_id: str, tools: list[str]) -> dict[str, Any]:
        """Offer these registered tools from now on."""
        return dict(self._ok("PUT", f"/v1/sessions/{session_id}/tools", {"tools": tools}))

    def hold(self, session_id: str) -> dict[str, Any]:
        return dict(self._ok("POST", f"/v1/sessions/{session_id}/hold"))

    def unhold(self, session_id: str) -> dict[str, Any]:
        return dict(self._ok("POST", f"/v1/sessions/{session_id}/unhold"))

    def attention(self, session_id: str, reason: str, wait_s: float) -> dict[str, Any]:
        """Hold the caller for a person, for at most `wait_s`."""
        body = {"reason": reason, "wait_s": wait_s}
        return dict(self._ok("POST", f"/v1/sessions/{session_id}/attention", body))

    def supervise(self, session_id: str, by: dict[str, str], verb: dict[str, Any]) -> dict[str, Any]:
        """One of a supervisor's verbs: say, whisper, take_over, release, end, transfer."""
        return dict(self._ok("POST", f"/v1/sessions/{session_id}/supervisor", {"by": by, "verb": verb}))

    def call_log(self, session_id: str, after: int = 0) -> dict[str, Any]:
        """The call's story as ordered entries (those after entry `after`)."""
        return dict(self._ok("GET", f"/v1/sessions/{session_id}/log?after={after}"))

    def add_route(self, number: str, session: dict[str, Any], **terms: Any) -> dict[str, Any]:
        """Route calls to `number` (or a prefix ending in `*`) to an agent with this session."""
        return dict(self._ok("POST", "/v1/routes", {"number": number, "session": session, **terms})["route"])

    def routes(self, cursor: str = "", limit: int = 100) -> dict[str, Any]:
        """A page of routes in number order; its `next` is the cursor of the page after."""
        return dict(self._ok("GET", _paged("/v1/routes", cursor, limit)))

    def remove_route(self, route_id: str) -> dict[str, Any]:
        return dict(self._ok("DELETE", f"/v1/routes/{quote(route_id, safe='')}"))

    def phone_call(self, call_id: str) -> dict[str, Any]:
        """What became of a phone call: its session, or why it was turned away."""
        return dict(self._ok("GET", f"/v1/phone-calls/{quote(call_id, safe='')}"))

    def place_call(self, to: str, session: dict[str, Any], **call: Any) -> dict[str, Any]:
        return dict(self._ok("POST", "/v1/calls", {"to": to, "session": session, **call}))

    def outbound_call(self, call_id: str) -> dict[str, Any]:
        return dict(self._ok("GET", f"/v1/calls/{quote(call_id, safe='')}"))

    def trunks(self, cursor: str = "", limit: int = 100) -> dict[str, Any]:
        """A page of trunks in name order; its `next` is the cursor of the page after."""
        return dict(self._ok("GET", _paged("/v1/trunks", cursor, limit)))

    def add_trunk(self, trunk: dict[str, Any]) -> dict[str, Any]:
        return dict(self._ok("POST", "/v1/trunks", trunk))

    def remove_trunk(self, name: str) -> dict[str, Any]:
        return dict(self._ok("DELETE", f"/v1/trunks/{quote(name, safe='')}"))

    def list_sessions(self, *, status: str = "", limit: int = 100, cursor: str = "") -> dict[str, Any]:
        """A page of sessions, newest first; its `next` is the cursor of the page after."""
        query = urlencode({name: value for name, value in (("status", status), ("cursor", cursor)) if value})
        return dict(self._ok("GET", f"/v1/sessions?limit={limit}" + (f"&{query}" if query else "")))

    def suppressions(self, cursor: str = "", limit: int = 100) -> dict[str, Any]:
        """A page of suppressed numbers in number order; its `next` is the cursor of the page after."""
        return dict(self._ok("GET", _paged("/v1/suppressions", cursor, limit)))

    def suppress(self, number: str, reason: str = "") -> dict[str, Any]:
        return dict(self._ok("POST", "/v1/suppressions", {"number": number, "reason": reason}))

    def unsuppress(self, number: str) -> dict[str, Any]:
        return dict(self._ok("DELETE", f"/v1/suppressions/{quote(number, safe='')}"))

    def create_campaign(self, spec: dict[str, Any]) -> dict[str, Any]:
        return dict(self._ok("POST", "/v1/campaigns", spec))

    def campaigns(self, cursor: str = "", limit: int = 100) -> dict[str, Any]:
        """A page of campaigns, newest first; its `next` is the cursor of the page after."""
        return dict(self._ok("GET", _paged("/v1/campaigns", cursor, limit)))

    def campaign(self, campaign_id: str) -> dict[str, Any]:
        return dict(self._ok("GET", f"/v1/campaigns/{quote(campaign_id, safe='')}"))

    def campaign_contacts(self, campaign_id: str, cursor: str = "", limit: int = 100) -> dict[str, Any]:
        """A page of a campaign's contacts in its order; its `next` is the cursor of the page after."""
        path = f"/v1/campaigns/{quote(campaign_id, safe='')}/contacts"
        return dict(self._ok("GET", _paged(path, cursor, limit)))

    def add_campaign_contacts(self, campaign_id: str, contacts: list[dict[str, Any]]) -> dict[str, Any]:
        """More contacts as a JSON page (at most 1,000); the answer says how many the campaign
        has and which were refused, and why."""
        path = f"/v1/campaigns/{quote(campaign_id, safe='')}/contacts"
        return dict(self._ok("POST", path, {"contacts": contacts}))

    def add_campaign_contacts_csv(self, campaign_id: str, csv: str, first_line: int = 2) -> dict[str, Any]:
        """More contacts as a CSV page (with its header); refused rows are numbered from
        `first_line` of the file they came from."""
        path = f"/v1/campaigns/{quote(campaign_id, safe='')}/contacts?first_line={first_line}"
        return dict(self._ok("POST", path, csv.encode(), headers={"Content-Type": "text/csv"}))

    def campaign_verb(self, campaign_id: str, verb: str) -> dict[str, Any]:
        return dict(self._ok("POST", f"/v1/campaigns/{quote(campaign_id, safe='')}/{verb}"))

    def interrupt(self, session_id: str) -> dict[str, Any]:
        return dict(self._ok("POST", f"/v1/sessions/{session_id}/interrupt"))

    def compact(self, session_id: str) -> tuple[int, dict[str, Any]]:
        """Force a compaction and wait for its outcome (200), or for "still running" (202)."""
        # The gateway waits up to 70 s for the maintenance response; wait a little longer.
        status, body = self.request("POST", f"/v1/sessions/{session_id}/compact", timeout_s=80)
        if status >= 400:
            raise ApiError(status, body)
        return status, dict(body)

    def erase_session(self, session_id: str) -> dict[str, Any]:
        """Erase an ended session's content (admin): what was removed, `already_erased` on a repeat."""
        return dict(self._ok("DELETE", f"/v1/sessions/{quote(session_id, safe='')}", timeout_s=90))

    def erase_caller(self, number: str) -> dict[str, Any]:
        """Erase every ended session of a caller's (or callee's) E.164 number (admin)."""
        return dict(self._ok("DELETE", f"/v1/callers/{quote(number, safe='+')}", timeout_s=90))

    def session(self, session_id: str, *, events: bool = False) -> dict[str, Any]:
        return dict(self._ok("GET", f"/v1/sessions/{session_id}{'?events=1' if events else ''}"))

    def wait_for_status(
        self, session_id: str, statuses: tuple[str, ...] = TERMINAL, timeout_s: float = 60
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        # Each look is a worker round trip: start quick, then back off to a second.
        interval = 0.05
        while True:
            try:
                record = self.session(session_id)
            except ApiError as error:
                # 503: the read was lost (a Redis restart) or no worker answered in time; ask again.
                if error.status != 503 or time.monotonic() > deadline:
                    raise
                continue
            if record["status"] in statuses or time.monotonic() > deadline:
                return record
            time.sleep(interval)
            interval = min(interval * 1.5, 1.0)

    def follow_live(self, session_id: str, on_message: Callable[[dict[str, Any]], None]) -> threading.Thread:
        """Print-as-it-happens: a thread that hands every live message to `on_message`."""
        assert self.live_url is not None
        url = f"{self.live_url}/v1/sessions/{session_id}/live"
        opened = threading.Event()

        def run() -> None:
            with connect(url, additional_headers={"Authorization": f"Bearer {self.token}"}) as socket:
                opened.set()
                try:
                    for raw in socket:
                        message = json.loads(raw)
                        on_message(message)
                        if message.get("type") == "session.closed":
                            return
                except ConnectionClosed:
                    return

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        opened.wait(5)
        return thread


def _decode(body: bytes, content_type: str) -> Any:
    if "json" in content_type:
        return json.loads(body or b"null")
    return body.decode(errors="replace")


def _paged(path: str, cursor: str, limit: int) -> str:
    """A list's path asking for one page: `limit` items after `cursor` (the `next` of the page
    before; none for the first)."""
    return f"{path}?{urlencode({'limit': limit, **({'cursor': cursor} if cursor else {})})}"
