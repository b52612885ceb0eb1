"""`SessionState`: everything a worker needs to decide, rebuilt from the session row."""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from pipeline.call.keypad import KeypadAsk, KeypadEntry
from pipeline.call.limits import (
    DEFAULT_COMPACTION_INPUT_TOKENS,
    DEFAULT_MAXIMUM_OUTPUT_TOKENS,
    DEFAULT_USAGE_BUDGET_TOKENS,
    MAXIMUM_SESSION_SECONDS,
)
from pipeline.phone.sip import PhoneLine
from pipeline.privacy.policy import PrivacyPolicy, Storage
from pipeline.session.timeline import TranscriptFragment

# The block a session's own instructions are, until the app names others.
FIRST_BLOCK = "instructions"


class Phase(StrEnum):
    """A session is in one of these phases.

    CREATED     the row exists; nobody has asked to connect yet
    ADMITTING   a connect is under way: the provider call is being created, the sideband opened
    CONNECTED   the sideband is up and the session configuration was sent
    LISTENING   the provider confirmed the configuration; waiting for the caller
    RESPONDING  a host-driven response is owed or in progress
    ENDED       finished normally (absorbing)
    FAILED      finished by a failure (absorbing)
    """

    CREATED = "created"
    ADMITTING = "admitting"
    CONNECTED = "connected"
    LISTENING = "listening"
    RESPONDING = "responding"
    ENDED = "ended"
    FAILED = "failed"


class Provider(StrEnum):
    """The provider protocol a session speaks.

    REALTIME  OpenAI's Realtime API (the default): Switchboard asks for every response
    LIVE      OpenAI's Live API (GPT-Live): the model holds the conversation and delegates
              tasks to Switchboard, which answers each with commentary
    """

    REALTIME = "realtime"
    LIVE = "live"


TERMINAL_PHASES = frozenset({Phase.ENDED, Phase.FAILED})
# The phases of a call in progress: connected, the sideband up (or being re-opened).
IN_CALL = frozenset({Phase.CONNECTED, Phase.LISTENING, Phase.RESPONDING})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Limits(_Frozen):
    """Per-session limits, fixed at creation."""

    max_output_tokens: int | Literal["inf"] = DEFAULT_MAXIMUM_OUTPUT_TOKENS
    max_session_seconds: int = MAXIMUM_SESSION_SECONDS
    # The previous response's provider-reported input tokens that start a compaction.
    compaction_input_tokens: int = DEFAULT_COMPACTION_INPUT_TOKENS
    # Provider-reported total tokens the session may use: a notice at 80 %, the end at 100 %.
    usage_budget_tokens: int = DEFAULT_USAGE_BUDGET_TOKENS
    # Live: the active seconds the session may use, likewise (None: only the ceiling bounds it).
    usage_budget_seconds: int | None = None


class ResponseContext(_Frozen):
    """What a response is created with, captured when the caller's input arrives and reused
    for every response of that turn (a tool continuation, a limit report)."""

    instructions: str
    max_output_tokens: int | Literal["inf"]
    input_item_id: str
    # "none" for a turn the app or a person directs (the agent says given words): no tool runs.
    tool_choice: Literal["auto", "none"] = "auto"
    # A supervisor's `say`: the one response that may be asked for while the line is held or a
    # person holds it (the person speaks through it, in the agent's voice).
    by_supervisor: bool = False


class UnaskedResponse(_Frozen):
    """A response the host did not ask for (a client's own `response.create`, a provider that
    answers on its own), while it runs: the caller's line spoken before it began is its to answer,
    so the host does not ask for a second answer."""

    id: str
    # The caller's speech_started count when it began: a line whose speech began later is not
    # what it answers.
    speech_seen: int


class Turn(_Frozen):
    """One host-driven response cycle: asked for, started, finished."""

    context: ResponseContext
    response_id: str | None = None
    # The provider refused our response.create because another response was active: the
    # request is made again when that response finishes.
    refused: bool = False
    # Which of the session's requests for a response this turn waits on (its response deadline
    # timer carries the number, so a timer armed for an earlier request changes nothing).
    asked: int = 0
    # The generation whose sideband that request went to, if that sideband was asked open
    # before it: then it is not lost in a gap, since the gateway holds an opening sideband's
    # controls until it opens (0: not known so, as in a state stored before this was kept —
    # asked again on a re-attach, as always).
    asked_generation: int = 0
    # Switchboard cancelled the turn's response (a barge-in): a provider answering that no
    # response is active means no response.done is coming for it.
    cancel_sent: bool = False


class ToolCall(_Frozen):
    """A function call in flight in a turn."""

    call_id: str
    item_id: str
    response_id: str
    name: str
    # The function_call_output the provider gets, set when the outcome is in (bounded).
    output: str | None = None


# Call ids remembered across turns: far more than a call's events can arrive late by.
SEEN_CALLS_KEPT = 64


class ToolChain(_Frozen):
    """The function calls of the current turn: at most one runs at a time (every call of the
    response, when the session's model calls tools in parallel), at most a limit run per turn,
    and every one the model made gets exactly one output."""

    # The call in flight (the response's first, with parallel calls): None when none is.
    pending: ToolCall | None = None
    # With parallel tool calls, the response's calls after `pending`, in the order they came;
    # empty one at a time, as in a state stored before calls ran in parallel.
    parallel: tuple[ToolCall, ...] = ()
    calls: int = 0
    # The call ids taken up, this turn and before it (the latest SEEN_CALLS_KEPT): the same
    # call arriving again, even after its turn ended, is not taken up and answered twice.
    seen: tuple[str, ...] = ()
    limit_refused: bool = False
    # False once the caller moved on (barge-in, new input, cancellation): the outcome is still
    # delivered, but no response is driven from it.
    continuation_allowed: bool = True
    # The response that made the call has finished; the outcome decides what comes next.
    response_completed: bool = False

    def next_turn(self) -> ToolChain:
        """An empty chain for the next turn, remembering which calls were taken up."""
        return ToolChain(seen=self.seen[-SEEN_CALLS_KEPT:])

    @property
    def in_flight(self) -> tuple[ToolCall, ...]:
        """The calls taken up and not yet answered to the provider, in the order they came."""
        if self.pending is None:
            return ()
        return (self.pending, *self.parallel)

    @property
    def outcomes_in(self) -> bool:
        """Whether every call in flight has its output (True when none is)."""
        return all(call.output is not None for call in self.in_flight)


class Compaction(_Frozen):
    """The one compaction cycle in flight: a maintenance response asked for, its summary
    persisted, then the prune and the summary item."""

    number: int
    forced: bool
    trigger_input_tokens: int
    items_before: int
    # Set by the maintenance response's response.created (None while it is only asked for).
    response_id: str | None = None
    # The maintenance response's final text, once it is persisted: nothing is pruned without it.
    summary: str | None = None
    # A forced compaction answers the API request that asked for it when the cycle ends.
    request_id: str | None = None
    reply_to: str | None = None


class Person(_Frozen):
    """Someone at the contact centre: a supervisor who speaks, whispers or holds the line."""

    id: str
    name: str = ""


class Attention(_Frozen):
    """The caller waits for a person: asked once at a time, answered exactly once (a person
    took the line, nobody did within `wait_s`, the line was given back, or the call ended)."""

    number: int
    reason: str
    wait_s: float


class Heard(_Frozen):
    """A piece of what the callee said, as it was written down, on the call's timeline."""

    text: str
    start_ms: int
    end_ms: int


# What a call going out came to (`pipeline.outbound.outcomes` says what each means).
CallOutcome = Literal["completed", "voicemail", "no_answer", "busy", "failed", "cancelled"]


class OutboundCall(_Frozen):
    """A call Switchboard places (`POST /v1/calls`, or a campaign's dial): to whom and through
    which trunk, the campaign contact it dials, how far it got, who answered, and what it came
    to. `id` ("call_…") is the app's handle on it and the dial's idempotency key."""

    id: str
    to: str
    trunk: str
    caller_number: str = ""
    campaign_id: str | None = None
    contact_id: int | None = None
    attempt: int = 1
    # What to do when a machine answers, and the message left on one.
    voicemail: Literal["hangup", "leave_message"] = "hangup"
    message: str | None = None
    progress: Literal["dialing", "ringing", "answered"] = "dialing"
    answered_by: Literal["human", "machine", "unknown"] | None = None
    # The callee's words while who answered is being decided (kept no longer than that), and
    # how many pieces of speech the call's waits have been counted by (each wait is numbered by
    # the count when it was armed, so one replaced by a newer one finds no row when it fires).
    heard: tuple[Heard, ...] = ()
    pieces: int = 0
    # A message left on a machine: waiting for its greeting to end, then said.
    leaving: Literal["waiting", "said"] | None = None
    failure: str | None = None
    outcome: CallOutcome | None = None
    # The callee asked never to be called again (their number is on the list once).
    opted_out: bool = False


class PromptBlock(_Frozen):
    """One named block of the session's instructions (they are the blocks, in order)."""

    name: str
    text: str


class AppWebhook(_Frozen):
    """Where the app that owns the call is told of it, and the secret its webhooks are signed
    with (Standard Webhooks: `whsec_` and the key in base64)."""

    url: str
    secret: str


class EventStream(_Frozen):
    """The app's own broker that the call's log entries and end-of-call report are published to
    through kombu (`docs/events.md`): its URL (a secret, as a webhook's is: it may hold a
    password) and the exchange."""

    url: str
    exchange: str


class Greeting(_Frozen):
    """What the agent does when the call connects: say these words, or reply as told."""

    say: str | None = None
    reply: str | None = None


class Usage(_Frozen):
    """Provider-reported usage, summed over every `response.done` (by modality too, and what
    of the input was cached: what a call costs depends on all three)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    responses: int = 0
    input_text_tokens: int = 0
    input_audio_tokens: int = 0
    cached_text_tokens: int = 0
    cached_audio_tokens: int = 0
    output_text_tokens: int = 0
    output_audio_tokens: int = 0

    # Live reports seconds, not tokens, and cumulatively: these are replaced by each report.
    seconds: float = 0.0
    active_seconds: float = 0.0

    def plus(self, input_tokens: int, output_tokens: int, total_tokens: int, **details: int) -> Usage:
        return self.model_copy(
            update={
                "input_tokens": self.input_tokens + input_tokens,
                "output_tokens": self.output_tokens + output_tokens,
                "total_tokens": self.total_tokens + total_tokens,
                "responses": self.responses + 1,
                **{name: getattr(self, name) + value for name, value in details.items()},
            }
        )


class LiveSetup(_Frozen):
    """What a Live session's delegations go to, fixed at creation: the registered delegation
    handler (None: every delegation is answered as unavailable) and its version, and how long
    the provider waits before its automatic spoken acknowledgement of a delegation."""

    handler: str | None = None
    handler_version: str = ""
    acknowledgement_delay_ms: int = 400


class DelegationStatus(StrEnum):
    """A delegation Switchboard has not finished with is in one of these states.

    SETTLING  waiting, at most the settle window, for the caller's words to reach its offset
    RUNNING   its handler runs on tool_runs
    ANSWERED  its terminal commentary is decided and waits for the line (held, or no sideband)
    """

    SETTLING = "settling"
    RUNNING = "running"
    ANSWERED = "answered"


class Delegation(_Frozen):
    """One client delegation of a Live call, from `session.delegation.created` to its one
    terminal commentary."""

    id: str
    offset_ms: int
    status: DelegationStatus = DelegationStatus.SETTLING
    # The task, once built: the caller's words up to the offset.
    task: str = ""
    # The terminal commentary, once decided.
    answer: str | None = None


class SpokenLine(_Frozen):
    """A speaker's latest line in a Live call's transcript: the stored line its pieces go on
    (its first piece's id) and the stretch of the call's timeline it covers so far."""

    item_id: str
    start_ms: int
    end_ms: int


class LiveCall(_Frozen):
    """What a Live session adds to the state: the caller's words not yet taken by a task, the
    delegations not yet answered, and what the provider reports of the call."""

    setup: LiveSetup = LiveSetup()
    # The caller's fragments after `claimed_ms` (the next task's words), newest last, bounded.
    heard: tuple[TranscriptFragment, ...] = ()
    # How far on the timeline the caller's transcript has come (the latest fragment's end).
    heard_until_ms: int = 0
    # The offset up to which the caller's words were taken by a task (None: none yet).
    claimed_ms: int | None = None
    open: tuple[Delegation, ...] = ()
    # Delegations made in this call, and the ids of those answered (the latest few): the same
    # delegation seen again is not taken up twice.
    delegations: int = 0
    answered: tuple[str, ...] = ()
    # The provider's share of its context window in use (telemetry: compaction is its own).
    context_ratio: float = 0.0
    # Each speaker's latest line of the transcript, which their next piece may go on.
    caller_line: SpokenLine | None = None
    agent_line: SpokenLine | None = None

    def find(self, delegation_id: str) -> Delegation | None:
        """The open delegation with this id, if any."""
        return next((delegation for delegation in self.open if delegation.id == delegation_id), None)

    def with_delegation(self, changed: Delegation) -> LiveCall:
        """This call with `changed` in place of the open delegation of its id."""
        return self.model_copy(
            update={"open": tuple(changed if d.id == changed.id else d for d in self.open)}
        )


class Transcription(_Frozen):
    """How a Realtime caller is transcribed (`audio.input.transcription`), as the catalog allowed
    it for its transcription model."""

    model: str
    language: str | None = None
    languages: tuple[str, ...] | None = None
    prompt: str | None = None
    keywords: tuple[str, ...] | None = None
    delay: str | None = None


class ModelChoice(_Frozen):
    """The model a session talks to and how, fixed at creation from its spec and the catalog."""

    # "" in a state stored before models were chosen per session: the deployment's default.
    id: str = ""
    voice: str | None = None
    reasoning_effort: str | None = None
    # Realtime; None on Live (which transcribes by itself) and in a state stored before.
    transcription: Transcription | None = None
    # None: the model takes no `parallel_tool_calls`; False: one tool call at a time (the
    # default); True: the model may call several in one response.
    parallel_tool_calls: bool | None = None
    # Live: how the instructions tell the model when to delegate (the catalog's word for it).
    delegation_policy: Literal["plain", "marker"] | None = None


class AgentRef(_Frozen):
    """The agent a session runs, and the version it started with (kept for its whole life)."""

    name: str
    version: int


class RealtimeCall(_Frozen):
    """What a Realtime session adds to the state: the host-driven turn and the responses asked
    for, the tool chain, the compaction of the context, and the caller's speech and silences.

    Until issue 45 these were at the top of the state; `pipeline.platform.releases` reads them there and
    writes them there still, so that a release from before and this one read each other's
    stored state during a rolling deploy."""

    turn: Turn | None = None
    unasked_response: UnaskedResponse | None = None
    # The caller spoke while a response was owed: one response is begun for it afterwards.
    queued_input_item_id: str | None = None
    chain: ToolChain = ToolChain()
    # Spoken responses Switchboard has asked for in this session (numbers each request).
    responses_asked: int = 0
    last_response_input_tokens: int = 0
    compaction: Compaction | None = None
    # Responses left before another compaction may start (counted down by each response.done).
    compaction_cooldown: int = 0
    compactions: int = 0
    # Provider item ids Switchboard has seen (caller and assistant finals, function calls),
    # oldest first: compaction deletes only items it can name.
    known_items: tuple[str, ...] = ()
    # Maintenance responses seen (most recent few): their text is not the conversation's.
    maintenance_responses: tuple[str, ...] = ()
    speech_started_count: int = 0
    # The caller's silences (idle timeouts) since they last spoke.
    silences_heard: int = 0
    # The model called end_call: the call ends when that response is done, for this reason.
    hanging_up: bool = False
    hangup_reason: str = "agent_hung_up"

    def evolve(self, **changes: object) -> RealtimeCall:
        """This part with `changes`, each checked against its field's type (as
        `SessionState.evolve`)."""
        return self.model_copy(update=_checked(RealtimeCall, changes))


@cache
def _field_adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    field = model.model_fields.get(name)
    if field is None or field.annotation is None:
        raise ValueError(f"{model.__name__} has no field {name!r}")
    return TypeAdapter(field.annotation)


def _checked(model: type[BaseModel], changes: dict[str, object]) -> dict[str, object]:
    """`changes` validated against `model`'s fields: a misspelt field or a value of the wrong
    type raises here, not when the stored state is next loaded."""
    return {name: _field_adapter(model, name).validate_python(value) for name, value in changes.items()}


class SessionState(_Frozen):
    """The decision state of one session; a frozen value changed with `evolve`."""

    phase: Phase = Phase.CREATED
    generation: int = 1
    # The generation whose sideband was last asked open (OpenSideband): a control of that
    # generation reaches its socket, which holds it until it opens.
    opened_generation: int = 0
    instructions: str = ""
    limits: Limits = Limits()
    # Function tools offered to the model (the tool catalog; executed by the tools work).
    tools: tuple[dict[str, Any], ...] = ()
    # Fixed at creation: the digest of the session's catalog and each tool's version and
    # side-effect class, which every tool step's identity carries.
    catalog_digest: str = ""
    tool_versions: dict[str, str] = {}
    tool_side_effects: dict[str, str] = {}
    # The tools' sensitive parameters, which the gateway seals (fixed at creation).
    tool_sensitive: dict[str, tuple[str, ...]] = {}
    call_id: str | None = None
    # The sideband was lost and is being re-opened (each attempt is a new generation).
    sideband_down: bool = False
    reconnect_attempts: int = 0
    usage: Usage = Usage()
    budget_warning_sent: bool = False
    end_reason: str | None = None
    # The instructions as named blocks, in order (empty: one block, "instructions", holding
    # `instructions`, as the session was created).
    prompt_blocks: tuple[PromptBlock, ...] = ()
    # How the caller reached the agent: a phone call (SIP) can be transferred, a WebRTC one not.
    medium: Literal["webrtc", "sip"] = "webrtc"
    greeting: Greeting | None = None
    greeted: bool = False
    # Set when the session offers the built-in end_call tool: when the model is to use it.
    hangup_when: str | None = None
    # The line is held: the agent neither speaks nor hears (turn detection is off).
    held: bool = False
    # The person who holds the line, if one does: the model answers nobody meanwhile.
    taken_by: Person | None = None
    attention: Attention | None = None
    attentions: int = 0
    # A response owed once the running turn ends (a supervisor's words, or a reply to a note).
    directed: ResponseContext | None = None
    # A transfer was asked of the provider and its outcome is not in yet.
    transferring_to: str | None = None
    # A phone call: who called which number (untrusted SIP metadata), and the route's terms.
    phone: PhoneLine | None = None
    # The model's transfer_call under way (its call id gets the outcome if the transfer fails).
    transfer_call_id: str | None = None
    app_webhook: AppWebhook | None = None
    event_stream: EventStream | None = None
    # The connect request that began the admission (its own retry is answered, not refused).
    admitted_by: str | None = None
    provider: Provider = Provider.REALTIME
    # What a Live session keeps besides (None on Realtime).
    live: LiveCall | None = None
    # What a Realtime session keeps besides (its defaults on Live, which leaves it alone).
    realtime: RealtimeCall = RealtimeCall()
    # The model, voice, reasoning effort and transcription (fixed at creation).
    model: ModelChoice = ModelChoice()
    # The agent and version the session runs (None: its spec was given inline).
    agent: AgentRef | None = None
    # What the gateway's boundary redacts of what the caller says (fixed at creation).
    privacy: PrivacyPolicy = PrivacyPolicy()
    # What is kept of the call once it is over; "metadata" when the caller declined recording.
    storage: Storage = "full"
    # A call Switchboard placed (None: the call came in).
    outbound: OutboundCall | None = None
    # The keypad collection under way (the line is held while the caller types), how many the
    # session has had, and one the model has just asked for with its built-in tool.
    collecting: KeypadEntry | None = None
    collections: int = 0
    collect_asked: KeypadAsk | None = None

    def evolve(self, **changes: object) -> SessionState:
        """This state with `changes`, each checked against its field's type: a misspelt field
        or a value of the wrong type raises here, not when the stored state is next loaded."""
        return self.model_copy(update=_checked(SessionState, changes))

    def with_realtime(self, **changes: object) -> SessionState:
        """This state with `changes` to its Realtime part, each checked as `evolve` checks."""
        return self.model_copy(update={"realtime": self.realtime.evolve(**changes)})

    @property
    def is_terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def line_closed(self) -> bool:
        """Whether the model must not answer: the line is held, or a person holds it."""
        return self.held or self.taken_by is not None

    @property
    def blocks(self) -> tuple[PromptBlock, ...]:
        """The instructions as named blocks, in order."""
        return self.prompt_blocks or (PromptBlock(name=FIRST_BLOCK, text=self.instructions),)
