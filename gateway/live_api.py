"""The Live API (GPT-Live) at the gateway: its call control through the `openai` package, its
sideband, and what the gateway does with each of the sideband's frames (LIVE_PROTOCOL.md §2,
§5.2).

A Live frame is classified by `pipeline.live.classify_live_frame`. Durable events are numbered
and queued as on Realtime. Transcript deltas are fanned out to listeners at once and buffered
on the sideband's socket, then written down as durable `switchboard.live_transcript` events
(`pipeline.live.buffer_fragment`), because Live sends no final transcript: the words exist
nowhere else. The buffer is flushed, besides its own rules, just before a delegation is
enqueued (so the words before its offset are logged before it), as soon as the caller's
fragment covering a delegation's offset arrives (so its settle window rarely runs out), before
`session.closed` and when the sideband closes, and after `FLUSH_AFTER_MS` of wall time
(checked on every frame and every `FLUSH_CHECK_S`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import quote

import openai

from gateway.provider import PROVIDER_HTTP_TIMEOUT_S, PROVIDER_RETRIES, CreatedCall, ProviderCallError
from gateway.provider import _provider_errors as provider_errors
from gateway.sink import EventSink
from gateway.sockets import CallSocket
from gateway.watch import WatchHub
from pipeline.config import Settings
from pipeline.errors import BadInput
from pipeline.live.frames import (
    TranscriptBuffer,
    buffer_fragment,
    classify_live_frame,
    flush_transcript,
    fragment_of,
    is_flush_due,
)
from pipeline.timeline import Speaker
from pipeline.wire import FrameKind

logger = logging.getLogger(__name__)

# How often a Live sideband's buffered words are checked for being due without a frame to
# check them on (a quiet line, with reflected audio off).
FLUSH_CHECK_S = 0.25
# A Live call ended by Switchboard sends `session.close`; the provider answers `session.closed`
# (with the final usage) and closes the sideband itself. It is closed from here after this.
LIVE_CLOSE_WAIT_S = 3.0

_ROLE = {Speaker.CALLER: "user", Speaker.AGENT: "assistant"}


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


class LiveSocket(CallSocket):
    """The sideband of a Live session: a `CallSocket` that also holds the words heard but not yet
    written down, and the delegation offsets whose covering words have not arrived."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buffer = TranscriptBuffer()
        # How far the caller's words have come on the timeline, as this socket saw them.
        self.heard_until_ms = 0
        self.awaiting: list[int] = []


class LiveFrames:
    """What the gateway does with a Live sideband's frames (see the module's docstring)."""

    def __init__(self, sink: EventSink, hub: WatchHub) -> None:
        self._sink = sink
        self._hub = hub

    def on_frame(self, socket: LiveSocket, frame: str | bytes, received_at: float) -> None:
        try:
            classified = classify_live_frame(frame)
        except BadInput as error:
            preview = frame[:200] if isinstance(frame, str) else frame[:200].decode(errors="replace")
            logger.warning("bad Live frame on %s: %s", socket.session_id, error)
            self._sink.submit_incident(
                socket.session_id, error.code, str(error), {"frame_preview": preview, "bytes": len(frame)}
            )
            return
        if classified.is_transcript:
            self._heard(socket, classified.event, received_at)
            return
        if classified.kind in (FrameKind.STREAMED, FrameKind.IGNORED):
            # Reflected audio arrives all through a call: the clock the buffer is flushed by.
            self.flush_if_due(socket, received_at)
            return
        event = classified.event
        if classified.type in ("session.delegation.created", "session.closed"):
            # The words before a delegation are logged before it; the call's last words before
            # its end.
            self.flush(socket, received_at)
        if classified.type == "session.delegation.created":
            offset = int(event["offset_ms"])
            if socket.heard_until_ms <= offset:
                socket.awaiting.append(offset)
        self._sink.submit_event(socket.session_id, socket.generation, event, received_at)

    def _heard(self, socket: LiveSocket, event: dict[str, Any], received_at: float) -> None:
        fragment = fragment_of(event)
        coalesced = buffer_fragment(socket.buffer, fragment, now=received_at)
        if coalesced.repeated:
            # Delivered again: its words are buffered or written down already, and listeners
            # have them.
            return
        socket.buffer = coalesced.buffer
        piece = coalesced.buffer.fragments[0] if coalesced.buffer.fragments else None
        item_id = piece.event_id if piece is not None else coalesced.written[-1]["fragments"][0]["event_id"]
        self._hub.delta(socket.session_id, _ROLE[fragment.speaker], item_id, fragment.text)
        self._write(socket, coalesced.written, received_at)
        if fragment.speaker is Speaker.CALLER:
            socket.heard_until_ms = max(socket.heard_until_ms, fragment.end_ms)
            if any(fragment.end_ms > offset for offset in socket.awaiting):
                # The words a waiting delegation's task needs: written down now, not in a second.
                socket.awaiting = [offset for offset in socket.awaiting if fragment.end_ms <= offset]
                self.flush(socket, received_at)
                return
        self.flush_if_due(socket, received_at)

    def flush(self, socket: LiveSocket, received_at: float) -> None:
        """Write down whatever the socket holds."""
        flushed = flush_transcript(socket.buffer)
        socket.buffer = flushed.buffer
        self._write(socket, flushed.written, received_at)

    def flush_if_due(self, socket: LiveSocket, now: float) -> None:
        if is_flush_due(socket.buffer, now=now):
            self.flush(socket, now)

    async def keep_flushing(self, socket: LiveSocket) -> None:
        """While the sideband is open, flush its words when they are due (a quiet line sends no
        frame to check them on)."""
        while socket.task is None or not socket.task.done():
            await asyncio.sleep(FLUSH_CHECK_S)
            self.flush_if_due(socket, time.time())

    def _write(self, socket: LiveSocket, written: tuple[dict[str, Any], ...], received_at: float) -> None:
        for event in written:
            self._sink.submit_event(socket.session_id, socket.generation, event, received_at)
            role = "user" if event["speaker"] == Speaker.CALLER else "assistant"
            self._hub.final(socket.session_id, role, event["fragments"][0]["event_id"], event["text"])
