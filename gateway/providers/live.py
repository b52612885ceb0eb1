"""The Live API (GPT-Live) at the gateway: its call control through the `openai` package, and
the address of its sideband. What the gateway does with the sideband's frames is the Live
wing's sans-I/O sideband (`pipeline.live.sideband`), driven by `gateway.sideband`; the turns
of a Live call's trace are `LiveCallTrace`'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import openai

from gateway import tracing
from gateway.providers.rest import (
    PROVIDER_HTTP_TIMEOUT_S,
    PROVIDER_RETRIES,
    CreatedCall,
    ProviderCallError,
    provider_errors,
)
from gateway.tracing import CallTrace
from pipeline.live.turns import LiveTurns, spoken_by
from pipeline.platform.config import Settings
from pipeline.platform.envelope import Trunk
from pipeline.session.timeline import Speaker


class OpenAILive:
    """The OpenAI Live API through the `openai` package: `live.create` (WebRTC),
    `live.sessions.accept|reject|refer|hangup` (by session id), and the sideband at
    `/live/sessions/{id}/attach?graceful_close=true` (so a session's end is a 1000 close, not
    a dropped connection taken for a lost sideband)."""

    def __init__(self, base_url: str, ws_url: str, api_key: str, model: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.ws_url = ws_url.rstrip("/")
        self._api_key = api_key
        self.model = model
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=self.base_url,
            websocket_base_url=self.ws_url,
            timeout=PROVIDER_HTTP_TIMEOUT_S,
            max_retries=PROVIDER_RETRIES,
        )

    async def create_call(self, sdp_offer: str, session: dict[str, Any]) -> CreatedCall:
        """Create a WebRTC Live session; its session id is the call's id from here on."""
        configuration = {"model": self.model, **session}
        async with provider_errors("POST /live/sessions"):
            created = await self._client.live.create(
                session=configuration,  # type: ignore[arg-type]
                transport={"type": "webrtc", "sdp": sdp_offer},
            )
        session_id = created.session.id
        if not session_id:
            raise ProviderCallError(200, "no session id in the answer")
        return CreatedCall(call_id=session_id, sdp_answer=created.transport.sdp)

    async def place_call(
        self, to: str, trunk: Trunk, session: dict[str, Any], *, idempotency_key: str
    ) -> str:
        """Create a Live session that dials out through the trunk (LIVE_PROTOCOL.md §2.2: no
        incoming webhook or accept; its progress comes on the sideband as `transport.*`). The
        SDK's create is WebRTC only, so this is its raw POST."""
        body = {
            "session": {"model": self.model, **session},
            "transport": {
                "type": "sip",
                "destination": to,
                "trunk": {
                    "provider_url": trunk.url,
                    "auth": {"type": "digest", "username": trunk.username, "password": trunk.password},
                    "caller_number": trunk.caller_number,
                },
            },
        }
        async with provider_errors("POST /live/sessions (sip)"):
            created = await self._client.post(
                "/live/sessions",
                body=body,
                cast_to=object,
                options={"headers": {"Idempotency-Key": idempotency_key}},
            )
        session_id = (created.get("session") or {}).get("id") if isinstance(created, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise ProviderCallError(200, "no session id in the answer")
        return session_id

    async def accept(self, call_id: str, session: dict[str, Any]) -> None:
        """Answer a Live phone call (by its session id) with this startup configuration."""
        configuration = {"type": "live", "model": self.model, **session}
        async with provider_errors(f"POST /live/sessions/{call_id}/accept"):
            await self._client.live.sessions.accept(call_id, session=configuration)  # type: ignore[arg-type]

    async def reject(self, call_id: str, status_code: int) -> None:
        async with provider_errors(f"POST /live/sessions/{call_id}/reject"):
            await self._client.live.sessions.reject(call_id, status_code=status_code)

    async def hangup(self, call_id: str) -> None:
        try:
            async with provider_errors(f"POST /live/sessions/{call_id}/hangup"):
                await self._client.live.sessions.hangup(call_id)
        except ProviderCallError as error:
            # 404: the session is over already, which is what a hangup wants.
            if error.status != 404:
                raise

    async def refer(self, call_id: str, target_uri: str) -> None:
        async with provider_errors(f"POST /live/sessions/{call_id}/refer"):
            await self._client.live.sessions.refer(call_id, target_uri=target_uri)

    def sideband_url(self, call_id: str) -> str:
        return f"{self.ws_url}/live/sessions/{quote(call_id, safe='')}/attach?graceful_close=true"

    def sideband_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"}

    async def close(self) -> None:
        await self._client.close()


def live_provider_from(settings: Settings) -> OpenAILive:
    """The Live API at the deployment's provider address (the simulator speaks it too)."""
    return OpenAILive(
        settings.provider_base_url, settings.provider_ws_url, settings.provider_key, settings.live_model
    )


@dataclass
class LiveCallTrace(CallTrace):
    """A Live sideband's spans: Live has no response and no turn boundary, so its turns are
    read off the transcript it writes down, as heard latency reads them (`pipeline.live.turns`):
    a turn opens with the caller's words and holds every event up to the caller's next words
    after the agent's answer, and ends with the last of them. No `chat` spans: Live reports
    usage in seconds of the session only, never tokens (LIVE_PROTOCOL.md §4)."""

    turns: LiveTurns = field(default_factory=LiveTurns)
    # When the last event under the open turn was numbered (ns since the epoch): where it ends.
    last_at: int | None = None
    # Who said the last piece written down under the open turn.
    last_speaker: Speaker | None = None

    def _before(self, kind: str, event: dict[str, Any]) -> None:
        step = self.turns.step(event)
        self.turns = step.turns
        if step.ends and self.turn is not None:
            self._end_turn(self.last_at)
        if step.opens:
            self._open_turn()
        speaker = spoken_by(event) if tracing.content and self.turn is not None else None
        if speaker is None:
            return
        lines = self.said if speaker is Speaker.CALLER else self.answered
        piece = str(event.get("text", ""))
        if lines and self.last_speaker is speaker:
            # The next piece of the same speaker's line (Live writes a line down in pieces, each
            # with its own leading space): one text, as the record keeps the line.
            lines[-1] += piece
        else:
            lines.append(piece)
        self.last_speaker = speaker

    def _after(self, kind: str, event: dict[str, Any]) -> None:
        if self.turn is not None:
            self.last_at = time.time_ns()

    def close(self) -> None:
        if self.turn is not None:
            self._end_turn(self.last_at)
        self.turns = LiveTurns()
        super().close()
