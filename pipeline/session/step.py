"""`Step`: what a transition decided — the next state, the controls to send, the effects to
carry out in the same transaction."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.call.capabilities import Refusal
from pipeline.call.errors import SwitchboardError
from pipeline.call.keypad import DigitsSpec
from pipeline.call.limits import MAXIMUM_INCIDENT_CODE_CHARS
from pipeline.call.messages import ControlModel
from pipeline.session.state import SessionState
from pipeline.session.timers import Timer, timer_name
from pipeline.session.wire import storable


class _Effect(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PersistTranscript(_Effect):
    """Store one final transcript (user or assistant) durably; with `continues`, as more words
    of the line already stored under `item_id` (a Live speaker's line written down in pieces)."""

    role: Literal["user", "assistant"]
    text: str
    item_id: str
    response_id: str | None = None
    continues: bool = False


class RecordIncident(_Effect):
    """Store a durable incident; errors also go to Sentry.

    An incident is often about bad input, so it quotes what PostgreSQL may refuse (a raw U+0000,
    a lone surrogate, JSON nested without end): its fields are made storable as it is built,
    so the record of a refusal can never be refused in turn."""

    code: str = Field(max_length=MAXIMUM_INCIDENT_CODE_CHARS)
    summary: str
    severity: Literal["error", "warning"] = "error"
    context: dict[str, Any] = Field(default_factory=dict)

    @field_validator("code", mode="before")
    @classmethod
    def _storable_code(cls, value: Any) -> Any:
        return storable(value)[:MAXIMUM_INCIDENT_CODE_CHARS] if isinstance(value, str) else value

    @field_validator("summary", mode="before")
    @classmethod
    def _storable_summary(cls, value: Any) -> Any:
        return storable(value) if isinstance(value, str) else value

    @field_validator("context", mode="before")
    @classmethod
    def _storable_context(cls, value: Any) -> Any:
        return storable(value) if isinstance(value, dict) else value


class OpenSideband(_Effect):
    """Ask the owning gateway to open the sideband of this provider call."""

    call_id: str


class CloseCall(_Effect):
    """Ask the owning gateway to close the sideband and, if asked, hang the call up."""

    reason: str
    hangup: bool
    # The call to hang up when it is not the session's own (one created after the session
    # failed); None means the session's call.
    call_id: str | None = None


class PlaceCall(_Effect):
    """Have a gateway dial the session's call going out (`state.outbound`): once, whatever
    redelivers this decision (the dial is claimed by the call's id before the provider is asked)."""


class OutboundEnded(_Effect):
    """A call going out is over: its attempt's outcome is recorded and, for a campaign's
    contact, whether it is dialled again (`pipeline.outbound.retry`)."""

    id: str
    outcome: Literal["completed", "voicemail", "no_answer", "busy", "failed", "cancelled"]
    answered_by: Literal["human", "machine", "unknown"] | None = None
    code: str | None = None


class Suppress(_Effect):
    """Put `number` on the deployment's do-not-call list (a callee who opted out), once."""

    number: str
    source: Literal["opt_out", "model"]


class CollectDigits(_Effect):
    """Tell the owning gateway's boundary to keep the caller's key presses for collection
    `number` (`digits`), or to stop keeping them and forget any it holds (`digits` None)."""

    number: int
    digits: DigitsSpec | None


class RequestToolStep(_Effect):
    """Create the durable tool step of a function call, or of a Live delegation (requested →
    running)."""

    call_id: str
    item_id: str
    # A Live delegation belongs to no response.
    response_id: str | None
    name: str
    arguments: str
    # The version of what runs, when it is not one of the session's tools (a delegation handler).
    version: str | None = None


class RefuseToolStep(_Effect):
    """Record a function call (or a Live delegation) that was refused, as a terminal refused step."""

    call_id: str
    item_id: str
    response_id: str | None
    name: str
    arguments: str
    code: str
    message: str
    status: Literal["refused", "unavailable"] = "refused"
    version: str | None = None


class RunTool(_Effect):
    """Run the tool body on the tool_runs queue, outside the row lock."""

    call_id: str
    name: str
    arguments: str


class InterruptToolStep(_Effect):
    """Finish a running tool step as interrupted, with the real reason."""

    call_id: str
    code: str
    message: str


class CancelTool(_Effect):
    """Ask the running tool body to stop (it is cooperative)."""

    call_id: str
    reason: str


class ScheduleTimer(_Effect):
    """Deliver a named timer to this session after a delay (a delayed message, and a durable
    row the sweeper fires from if the message is lost)."""

    name: str
    delay_ms: int
    # No delayed message: the sweeper fires the timer from its row, a few seconds late. For a
    # timer that is nearly always cancelled first and can afford the lateness, this saves a
    # Redis round trip when it is scheduled and a locked transaction when it would fire.
    swept_only: bool = False


class CancelTimer(_Effect):
    """The named timer is no longer needed: its row goes, and its delayed message, when it
    comes, finds nothing to fire (and logs nothing)."""

    name: str


def schedule_timer(timer: Timer, delay_ms: int, *, swept_only: bool = False) -> ScheduleTimer:
    """Schedule a timer by its durable name (`pipeline.session.timers`)."""
    return ScheduleTimer(name=timer_name(timer), delay_ms=delay_ms, swept_only=swept_only)


def cancel_timer(timer: Timer) -> CancelTimer:
    """Cancel a timer by its durable name (`pipeline.session.timers`)."""
    return CancelTimer(name=timer_name(timer))


class StartCompaction(_Effect):
    """Record a compaction that started (its maintenance response was asked for)."""

    number: int
    forced: bool
    trigger_input_tokens: int
    items_before: int


class SaveCompactionSummary(_Effect):
    """Persist the maintenance response's final text: the summary, before anything is pruned.
    If it cannot be stored, the compaction is abandoned (never the call)."""

    number: int
    response_id: str
    summary: str


class FinishCompaction(_Effect):
    """Record how a compaction ended: completed (pruned and summarized) or abandoned, and why."""

    number: int
    status: Literal["completed", "abandoned"]
    reason: str | None = None
    items_deleted: int = 0
    items_after: int = 0


class LogEntry(_Effect):
    """An entry of the call log that no other effect implies (a prompt changed, the line held, a
    person acting): nothing is carried out, the call log's projection reads it."""

    kind: str
    data: dict[str, Any] = Field(default_factory=dict)


class TransferCall(_Effect):
    """Ask the owning gateway to transfer the phone call to `to` (the provider's `refer`)."""

    to: str


class NotifyApp(_Effect):
    """Tell the app that owns the call (its webhook), once the transaction commits."""

    kind: str
    # With the session and the kind, what makes this notification one of its own (its id).
    key: str
    data: dict[str, Any] = Field(default_factory=dict)


class AnswerRequest(_Effect):
    """Answer the API request a gateway is waiting on."""

    request_id: str
    gateway_id: str
    status: int = 200
    body: dict[str, Any] = Field(default_factory=dict)


Effect = (
    PersistTranscript
    | RecordIncident
    | OpenSideband
    | CloseCall
    | ScheduleTimer
    | CancelTimer
    | RequestToolStep
    | RefuseToolStep
    | RunTool
    | CancelTool
    | InterruptToolStep
    | StartCompaction
    | SaveCompactionSummary
    | FinishCompaction
    | AnswerRequest
    | LogEntry
    | TransferCall
    | CollectDigits
    | PlaceCall
    | OutboundEnded
    | Suppress
    | NotifyApp
)
# A control of any wing: each wing's own models say its shape (and forbid what it lacks), so a
# step carries them as they were made, and `control_wire` sends each as its own model dumps it.
Control = ControlModel


class Step(BaseModel):
    """The outcome of one transition."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: SessionState
    controls: tuple[Control, ...] = ()
    effects: tuple[Effect, ...] = ()

    def then(self, other: Step) -> Step:
        """This step followed by `other` (whose state wins)."""
        return Step(
            state=other.state,
            controls=self.controls + other.controls,
            effects=self.effects + other.effects,
        )


def answering(
    step: Step, request_id: str | None, gateway_id: str | None, status: int, body: dict[str, Any]
) -> Step:
    """`step`, answering the API request that asked for it, when one did (an input replayed
    or made without a request id answers nobody)."""
    if request_id is None or gateway_id is None:
        return step
    answer = AnswerRequest(request_id=request_id, gateway_id=gateway_id, status=status, body=body)
    return step.then(Step(state=step.state, effects=(answer,)))


def refused(
    state: SessionState, request_id: str | None, gateway_id: str | None, status: int, code: str, message: str
) -> Step:
    """Nothing changes, and the request that asked is told why (a typed error)."""
    body = {"error": {"code": code, "message": message}}
    return answering(unchanged(state), request_id, gateway_id, status, body)


def refused_for(
    state: SessionState, request_id: str | None, gateway_id: str | None, error: SwitchboardError
) -> Step:
    """Nothing changes, and the request that asked is told why: 409, the error's body (its code,
    message and details, as `pipeline.session.refusals` words a session's state)."""
    return answering(unchanged(state), request_id, gateway_id, 409, error.body())


def refused_by(state: SessionState, request_id: str | None, gateway_id: str | None, refusal: Refusal) -> Step:
    """Nothing changes, and the request that asked is told the provider's refusal."""
    return refused(state, request_id, gateway_id, refusal.status, refusal.code, refusal.message)


def unchanged(state: SessionState) -> Step:
    return Step(state=state)
