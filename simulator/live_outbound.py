"""An outbound SIP call on the simulated Live API: the session that dials, rings and is answered.

The session exists from its create (`POST /v1/live/sessions` with a SIP transport, §2.2); the
dial starts when its first sideband attaches, or `DIAL_WITHOUT_SIDEBAND_MS` after the create if
none does. Progress arrives on the sideband (§3.1): `transport.ringing` at once, then, as the
dial plan says of the number (`simulator.live_dial`):

- a person: `transport.answered` after `ring_ms`, then the callee speaks the plan's script as
  an inbound call's caller does (transcript deltas, delegations, key presses, hangup);
- a voicemail machine: `transport.answered` after `ring_ms`, the greeting a word a fragment,
  `beep_ms` of silence, then the machine records what the model says until it hangs up
  (`record_ms` after the beep, `session.closed` with `remote_hangup`);
- busy, no answer, a provider failure: `transport.failed {error: {type: "call_error", code,
  message}}` after `after_ms`, then `session.closed` with `remote_hangup`.

A call still ringing at the ringing limit fails `no_answer`. A hangup while ringing ends the
dial (`canceled`). With the `outbound_waits_for_host` switch the model says nothing until the
host first appends instructions or commentary (`simulator.live_session`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

from simulator.call import IdMint
from simulator.live_dial import (
    DIAL_WITHOUT_SIDEBAND_MS,
    AnsweredByMachine,
    Answerer,
    DialLedger,
    DialRecord,
    DialResult,
    NotAnswered,
)
from simulator.live_script import LiveCallerSays, LiveScript
from simulator.live_session import CloseReason, LiveSession

DialState = Literal["waiting", "ringing", "answered", "failed"]

# What `transport.failed` says for each code the simulator knows; another code (a plan's own)
# gets the generic one.
FAILURE_MESSAGES = {
    "busy": "The callee is busy.",
    "no_answer": "The callee did not answer.",
}
GENERIC_FAILURE_MESSAGE = "The provider rejected the call."


class OutboundSession(LiveSession):
    """A Live session that places a phone call to `record.destination` and is what the plan's
    `answerer` makes of it; its end is written to `record` and counted in `ledger`."""

    is_outbound = True

    def __init__(
        self,
        session_id: str,
        *,
        script: LiveScript,
        mint: IdMint,
        config: dict[str, Any],
        answerer: Answerer,
        record: DialRecord,
        ledger: DialLedger,
        ringing_limit_ms: int,
        strict: bool = True,
    ) -> None:
        super().__init__(session_id, transport="sip", script=script, mint=mint, config=config, strict=strict)
        # Not an incoming call waiting for an accept: created, and attachable at once.
        self.log.status = "created"
        self.answerer = answerer
        self.record = record
        self._ledger = ledger
        self._ringing_limit_ms = ringing_limit_ms
        self.dial_state: DialState = "waiting"
        self._holds_for_host = script.switches.outbound_waits_for_host
        # Whether a voicemail machine is keeping what the model says as the message.
        self._machine_records = False

    @property
    def is_answered(self) -> bool:
        """Whether someone (or something) picked up and the call is going on."""
        return self.dial_state == "answered" and not self.has_ended

    def start(self) -> None:
        """Begin the session's clock, and dial in `DIAL_WITHOUT_SIDEBAND_MS` if no sideband
        has attached by then."""
        super().start()
        self._spawn(self._dial_without_sideband())

    async def close(self, reason: CloseReason, client_event_id: str | None = None) -> None:
        """End the session, and the dial with it (written before `session.closed` leaves, so a
        host that sees the close finds the record complete)."""
        if not self.has_ended:
            self._end_dial(reason)
        await super().close(reason, client_event_id)

    def _end_dial(self, reason: CloseReason) -> None:
        if self.record.outcome is None:
            self.record.outcome = "canceled"
        self.record.ended_at = time.time()
        self.record.close_reason = reason
        self._ledger.ended(self.record)

    async def _dial_without_sideband(self) -> None:
        await asyncio.sleep(DIAL_WITHOUT_SIDEBAND_MS / 1000)
        if not self._has_begun:
            self._has_begun = True
            self._begin()

    def _begin(self) -> None:
        self._spawn(self._speak_model())
        self._spawn(self._report_usage())
        self._spawn(self._dial())

    async def _dial(self) -> None:
        self.dial_state = "ringing"
        self.record.dialed_at = time.time()
        self._emit({"type": "transport.ringing", "session_id": self.session_id})
        answerer = self.answerer
        rings_ms = answerer.after_ms if isinstance(answerer, NotAnswered) else answerer.ring_ms
        if rings_ms > self._ringing_limit_ms:
            await asyncio.sleep(self._ringing_limit_ms / 1000)
            await self._fail("no_answer", "no_answer")
            return
        await asyncio.sleep(rings_ms / 1000)
        if isinstance(answerer, NotAnswered):
            await self._fail(answerer.outcome, answerer.failure_code)
            return
        self.dial_state = "answered"
        self.record.answered_at = time.time()
        self.record.outcome = answerer.outcome
        self._emit({"type": "transport.answered", "session_id": self.session_id})
        if isinstance(answerer, AnsweredByMachine):
            await self._answer_as_machine(answerer)
        else:
            await self._run_caller()

    async def _fail(self, result: DialResult, code: str) -> None:
        self.dial_state = "failed"
        self.record.outcome = result
        self.record.failure_code = code
        message = FAILURE_MESSAGES.get(code, GENERIC_FAILURE_MESSAGE)
        self._emit(
            {
                "type": "transport.failed",
                "session_id": self.session_id,
                "error": {"type": "call_error", "code": code, "message": message},
            }
        )
        await self.close("remote_hangup")

    async def _answer_as_machine(self, machine: AnsweredByMachine) -> None:
        # A greeting is not a line the model answers on its own: the simulated model has no
        # words for a machine, so what it leaves is what the host has it say (commentary).
        await self._say(0, LiveCallerSays(say=machine.greeting), answerable=False)
        # Kept from the greeting's end: what the model says over the beep is kept too, so a
        # test sees everything the model said to the machine.
        self._machine_records = True
        self.record.message = ""
        await asyncio.sleep((machine.beep_ms + machine.record_ms) / 1000)
        await self.close("remote_hangup")

    def _model_said(self, text: str) -> None:
        if not self._machine_records:
            return
        kept = self.record.message or ""
        # An utterance's first fragment has no leading space; two utterances are two sentences.
        if kept and not text.startswith(" "):
            text = f" {text}"
        self.record.message = kept + text
