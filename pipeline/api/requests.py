"""Schemas of the HTTP API's request bodies, shared by the gateway (which validates them)
and the admission actor (which stores them)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from pipeline.api.event_streams import DEFAULT_EXCHANGE, SCHEMES, is_supported, shown
from pipeline.api.signing import is_secret
from pipeline.call.built_in import END_CALL
from pipeline.call.capabilities import Ability, refusal
from pipeline.call.errors import MalformedNumber
from pipeline.call.keypad import (
    COLLECT_DIGITS,
    DEFAULT_TIMEOUT_S,
    MAXIMUM_PROMPT_CHARS,
    MAXIMUM_TIMEOUT_S,
    DigitsSpec,
)
from pipeline.call.limits import (
    MAXIMUM_ATTENTION_WAIT_S,
    MAXIMUM_INSTRUCTIONS_BYTES,
    MAXIMUM_TYPED_TEXT_BYTES,
    MAXIMUM_USAGE_BUDGET_TOKENS,
)
from pipeline.dialects import capabilities_for
from pipeline.phone.numbers import e164
from pipeline.phone.sip import ROUTE_NUMBER, KeyAction, checked_keys
from pipeline.privacy.policy import PrivacyPolicy, Storage
from pipeline.session.consent import DECLINE_RECORDING
from pipeline.session.wire import EndVerb, ReleaseVerb, SayVerb, TakeOverVerb, TransferVerb, WhisperVerb

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# An agent's name, as routes and `"agent": "name@3"` write it.
AGENT_NAME = r"[a-z0-9][a-z0-9_-]{0,63}"


class SessionLimits(BaseModel):
    # Strict: JSON `true` is not the number 1, nor "12" the number 12.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    max_output_tokens: int | Literal["inf"] | None = Field(default=None)
    max_session_seconds: int | None = Field(default=None, ge=1, le=3_600)
    # Compact the call's context once a response reports this many input tokens.
    compaction_input_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    # End the session once its responses have used this many total tokens.
    usage_budget_tokens: int | None = Field(default=None, ge=1, le=MAXIMUM_USAGE_BUDGET_TOKENS)
    # Live: end the session once it has been active this many seconds (by the provider's count).
    usage_budget_seconds: int | None = Field(default=None, ge=1, le=86_400)

    @field_validator("max_output_tokens")
    @classmethod
    def _provider_range(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and not 1 <= value <= 4_096:
            raise ValueError("max_output_tokens must be 1..4096 or 'inf'")
        return value


def _tool_names(names: tuple[str, ...]) -> tuple[str, ...]:
    for name in names:
        if not TOOL_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a tool name")
    if len(set(names)) != len(names):
        raise ValueError("a tool is named twice")
    return names


def _present(value: str, what: str, maximum_bytes: int) -> str:
    value = value.strip()
    if not value:
        raise ValueError(f"{what} is empty")
    if len(value.encode()) > maximum_bytes:
        raise ValueError(f"{what} exceeds {maximum_bytes} bytes")
    return value


class GreetingSpec(BaseModel):
    """What the agent does when the call connects: `say` these words, or `reply` as told."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    say: str | None = None
    reply: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> GreetingSpec:
        if (self.say is None) == (self.reply is None):
            raise ValueError('a greeting is {"say": ...} or {"reply": ...}')
        if self.say is not None:
            _present(self.say, "greeting.say", MAXIMUM_TYPED_TEXT_BYTES)
        if self.reply is not None:
            _present(self.reply, "greeting.reply", MAXIMUM_INSTRUCTIONS_BYTES)
        return self


# The error code of a session (or route) whose `events.url` is not a broker's.
EVENTS_URL_UNSUPPORTED = "events_url_unsupported"


class AppWebhookSpec(BaseModel):
    """Where the app is told of the session's call (signed webhooks), and the secret."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(max_length=2_000)
    secret: str = Field(max_length=200)

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", value):
            raise ValueError("url must be an http(s) URL")
        return value

    @field_validator("secret")
    @classmethod
    def _standard(cls, value: str) -> str:
        if not is_secret(value):
            raise ValueError("secret must be whsec_ and at least 24 bytes in base64 (Standard Webhooks)")
        return value


class EventsSpec(BaseModel):
    """The app's own broker that the call's log entries and end-of-call report are published to
    (`docs/events.md`): an `amqp://`, `sqs://` or `redis://` URL (kombu's), and the exchange."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(max_length=2_000)
    exchange: str = Field(default=DEFAULT_EXCHANGE, pattern=r"^[A-Za-z0-9_.:-]{1,200}$")

    @field_validator("url")
    @classmethod
    def _a_broker(cls, value: str) -> str:
        if not is_supported(value):
            offered = ", ".join(f"{scheme}://" for scheme in sorted(SCHEMES))
            # Its own code, not malformed_request: the body is well formed, the broker is not one
            # Switchboard publishes to. The URL is not echoed: it may hold a password.
            raise PydanticCustomError(
                EVENTS_URL_UNSUPPORTED, "events.url must name a broker: {offered}", {"offered": offered}
            )
        return value


class HangupSpec(BaseModel):
    """The model may end the call (the built-in end_call tool), when this says so."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    when: str = Field(min_length=1, max_length=2_000)


class LiveSpec(BaseModel):
    """What a Live session's delegations go to: a registered delegation handler (by name;
    without one, every delegation is answered that it cannot be done), and how long the
    provider waits before acknowledging a delegation aloud by itself."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    delegation: str | None = Field(default=None)
    acknowledgement_delay_ms: int = Field(default=400, ge=0, le=10_000)

    @field_validator("delegation")
    @classmethod
    def _handler_name(cls, value: str | None) -> str | None:
        if value is not None and not TOOL_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a delegation handler's name")
        return value


# A BCP 47 language tag as the provider takes it ("en", "pt-BR").
LANGUAGE_TAG = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$"
MAXIMUM_KEYWORDS = 100
MODEL_ID = r"^[a-z0-9][a-z0-9.\-]{0,99}$"
Effort = Literal["minimal", "low", "medium", "high", "xhigh"]


class ReasoningSpec(BaseModel):
    """How hard a reasoning model thinks before it speaks (the catalog says which take which)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    effort: Effort


class TranscriptionSpec(BaseModel):
    """How a Realtime caller is transcribed: the model (the deployment's when not named) and
    the fields that model takes (the catalog says which)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = Field(default=None, pattern=MODEL_ID)
    language: str | None = Field(default=None, pattern=LANGUAGE_TAG)
    languages: tuple[Annotated[str, Field(pattern=LANGUAGE_TAG)], ...] | None = Field(
        default=None, min_length=1, max_length=10
    )
    # Free text about the call that helps the transcriber (names, the subject).
    prompt: str | None = Field(default=None, min_length=1, max_length=1_000)
    # Literal words that may be said (product names, places).
    keywords: tuple[Annotated[str, Field(min_length=1, max_length=100)], ...] | None = Field(
        default=None, min_length=1, max_length=MAXIMUM_KEYWORDS
    )
    delay: Effort | None = None

    @model_validator(mode="after")
    def _one_language_field(self) -> TranscriptionSpec:
        if self.language is not None and self.languages is not None:
            # The provider refuses the two together.
            raise ValueError("language and languages together: send one")
        return self

    def asked(self) -> dict[str, Any]:
        """What was set, as `audio.input.transcription` carries it."""
        return self.model_dump(mode="json", exclude_none=True)


class SessionSpec(BaseModel):
    """`POST /v1/sessions`: what a session is created with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # The agent the call runs (its published version, or `name@3`): its version's spec, with
    # each field this body sets on top, and `vars` filled into its instructions and greeting as
    # quoted data (pipeline/agents). Without an agent, the body is the whole spec.
    agent: str | None = Field(default=None, pattern=rf"^{AGENT_NAME}(@[1-9][0-9]{{0,8}})?$")
    # Checked as a campaign contact's vars are (names, counts, lengths) when they are filled in.
    vars: dict[str, str] | None = Field(default=None, max_length=20)

    # The provider protocol: OpenAI's Realtime API (the default) or its Live API.
    provider: Literal["realtime", "live"] = "realtime"
    live: LiveSpec | None = None

    # Required unless the session names an agent (whose version has them).
    instructions: str = Field(default="", validate_default=True)
    # Names of registered tools this session may call (SWITCHBOARD_TOOL_MODULES); none by default.
    tools: tuple[str, ...] = Field(default=(), max_length=64)

    _names = field_validator("tools")(classmethod(lambda cls, names: _tool_names(names)))

    limits: SessionLimits = SessionLimits()
    greeting: GreetingSpec | None = None
    hangup: HangupSpec | None = None
    webhook: AppWebhookSpec | None = None
    events: EventsSpec | None = None
    # What is redacted of what the caller says, before Switchboard keeps any of it.
    privacy: PrivacyPolicy = PrivacyPolicy()
    # What is kept once the call is over: all of it (masked), or only its metadata.
    storage: Storage = "full"
    # The model (the deployment's default for the provider when not named), its voice, its
    # reasoning effort and how the caller is transcribed: each checked against the model
    # catalog when the session is created (pipeline.model_catalog.choice).
    model: str | None = Field(default=None, pattern=MODEL_ID)
    voice: str | None = Field(default=None, min_length=1, max_length=100)
    reasoning: ReasoningSpec | None = None
    transcription: TranscriptionSpec | None = None
    # Let a model that can call several tools in one response do so (each call still answered
    # once, and at most 8 a turn); one at a time otherwise.
    tools_in_parallel: bool = Field(default=False, strict=True)

    @model_validator(mode="after")
    def _end_call_is_built_in(self) -> SessionSpec:
        if self.hangup is not None and END_CALL in self.tools:
            raise ValueError(f"{END_CALL} is the built-in hangup tool; a session with hangup has it already")
        if self.privacy.consent is not None and DECLINE_RECORDING in self.tools:
            raise ValueError(
                f"{DECLINE_RECORDING} is the built-in consent tool; a session with consent has it already"
            )
        if COLLECT_DIGITS in self.tools:
            raise ValueError(
                f"{COLLECT_DIGITS} is the built-in keypad tool; a phone call offers it by itself"
            )
        return self

    @model_validator(mode="after")
    def _fits_its_provider(self) -> SessionSpec:
        capabilities = capabilities_for(self.provider)
        asked = {
            Ability.DELEGATIONS: self.live is not None,
            Ability.TOOLS: bool(self.tools) or self.hangup is not None,
            Ability.USAGE_IN_SECONDS: self.limits.usage_budget_seconds is not None,
        }
        for ability, wanted in asked.items():
            cannot = refusal(capabilities, ability) if wanted else None
            if cannot is not None:
                raise ValueError(cannot.message)
        return self

    @field_validator("instructions")
    @classmethod
    def _bounded(cls, value: str, info: ValidationInfo) -> str:
        if not value and info.data.get("agent") is None:
            raise PydanticCustomError("missing", "Field required (or name an agent)")
        if len(value.encode()) > MAXIMUM_INSTRUCTIONS_BYTES:
            raise ValueError(f"instructions exceed {MAXIMUM_INSTRUCTIONS_BYTES} bytes")
        return value


SDP_OFFER = r"^\s*v=0"


class ConnectRequest(BaseModel):
    """`POST /v1/sessions/{id}/connect` with a JSON body (a raw SDP body works too)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # An SDP description starts with its version line (RFC 8866, 5.1): anything else is the
    # client's mistake, refused here (422) rather than sent on, when the provider's refusal
    # would fail the session and answer 502 as if the provider were at fault.
    sdp: str = Field(min_length=1, max_length=200_000, pattern=SDP_OFFER)


class EndRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(default="app_ended", min_length=1, max_length=128)


class TypedText(BaseModel):
    """`POST /v1/sessions/{id}/caller/text`: text typed into a live call, trimmed and bounded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str

    @field_validator("text")
    @classmethod
    def _trimmed_and_bounded(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("text is empty")
        if len(value.encode()) > MAXIMUM_TYPED_TEXT_BYTES:
            raise ValueError(f"text exceeds {MAXIMUM_TYPED_TEXT_BYTES} bytes")
        return value


class AgentSay(TypedText):
    """`POST /v1/sessions/{id}/agent/say`: words the agent says (trimmed, bounded like typed text)."""


class AgentReply(BaseModel):
    """`POST /v1/sessions/{id}/agent/reply`: what steers the agent's reply (bounded like the
    session's own instructions)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instructions: str

    @field_validator("instructions")
    @classmethod
    def _present_and_bounded(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("instructions are empty")
        if len(value.encode()) > MAXIMUM_INSTRUCTIONS_BYTES:
            raise ValueError(f"instructions exceed {MAXIMUM_INSTRUCTIONS_BYTES} bytes")
        return value


class PromptText(BaseModel):
    """`PUT /v1/sessions/{id}/prompt/{name}`: one block's text (empty removes the block)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    text: str

    @field_validator("text")
    @classmethod
    def _bounded(cls, value: str) -> str:
        if len(value.encode()) > MAXIMUM_INSTRUCTIONS_BYTES:
            raise ValueError(f"text exceeds {MAXIMUM_INSTRUCTIONS_BYTES} bytes")
        return value


# A prompt block's name, as it appears in the route.
BLOCK_NAME = TOOL_NAME


class ToolsChange(BaseModel):
    """`PUT /v1/sessions/{id}/tools`: the registered tools offered from now on (by name)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tools: tuple[str, ...] = Field(max_length=64)

    _names = field_validator("tools")(classmethod(lambda cls, names: _tool_names(names)))


class AttentionSpec(BaseModel):
    """`POST /v1/sessions/{id}/attention`: why a person is wanted, and how long to wait."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(max_length=500)
    wait_s: float = Field(gt=0, le=MAXIMUM_ATTENTION_WAIT_S, allow_inf_nan=False)

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        return _present(value, "reason", 2_000)


class CollectSpec(BaseModel):
    """`POST /v1/sessions/{id}/collect`: the caller keys digits in for `tool` (into its sensitive
    `parameter`, the only one when not named), after hearing `prompt`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str = Field(min_length=1, max_length=200)
    prompt: str = Field(max_length=MAXIMUM_PROMPT_CHARS)
    parameter: str | None = Field(default=None, min_length=1, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)
    digits: DigitsSpec = DigitsSpec()
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, ge=5, le=MAXIMUM_TIMEOUT_S, allow_inf_nan=False)

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str) -> str:
        return _present(value, "prompt", MAXIMUM_PROMPT_CHARS)


class PersonSpec(BaseModel):
    """Who acts: a supervisor's id (required) and name."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    id: str = Field(min_length=1, max_length=128)
    name: str = Field(default="", max_length=128)


class _Strict(BaseModel):
    """A verb as the API takes it: its shape is the log's (pipeline.session.wire), and no more. (Last
    among a verb's bases: the last base's config is the one that holds.)"""

    model_config = ConfigDict(frozen=True, extra="forbid")


class _Words(_Strict):
    @field_validator("text", check_fields=False)
    @classmethod
    def _text(cls, value: str) -> str:
        return _present(value, "text", MAXIMUM_TYPED_TEXT_BYTES)


class SaySpec(SayVerb, _Words):
    """`say`: the agent's voice says `text` (trimmed, not empty, bounded) to the caller."""


class WhisperSpec(WhisperVerb, _Words):
    """`whisper`: `text` (trimmed, not empty, bounded) for the agent only."""


class TakeOverSpec(TakeOverVerb, _Strict):
    """`take_over`: a person holds the line."""


class ReleaseSpec(ReleaseVerb, _Strict):
    """`release`: the person gives the line back."""


class EndSpec(EndVerb, _Strict):
    """`end`: the call ends, for `reason` (1 to 128 characters)."""

    reason: str = Field(default="ended_by_supervisor", min_length=1, max_length=128)


# Where a phone call may be sent: a telephone number or a SIP address (the SIP Refer-To).
TRANSFER_TARGET = re.compile(r"tel:\+?[0-9][0-9*#\-.()]{0,31}|sip:[^\s<>\"]{1,256}")


class TransferSpec(TransferVerb, _Strict):
    """`transfer`: the phone call is sent on `to`, a tel: or sip: URI."""

    @field_validator("to")
    @classmethod
    def _uri(cls, value: str) -> str:
        if not TRANSFER_TARGET.fullmatch(value):
            raise ValueError("to must be a tel: or sip: URI")
        return value


class SupervisorCommand(BaseModel):
    """`POST /v1/sessions/{id}/supervisor`: one verb, and who uses it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Who acts; a supervisor's key names them instead.
    by: PersonSpec | None = None
    verb: Annotated[
        SaySpec | WhisperSpec | TakeOverSpec | ReleaseSpec | EndSpec | TransferSpec,
        Field(discriminator="type"),
    ]


class RouteTerms(BaseModel):
    """What a route allows its calls, beside their session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Calls this route answers at once; the next caller hears busy (486).
    max_calls: int | None = Field(default=None, ge=1, le=100_000)
    # The only places a call on this route may be transferred to (by a supervisor or the model).
    transfer_targets: tuple[str, ...] = Field(default=(), max_length=32)
    # Keypad presses (DTMF) and what they do: "attention" (ask for a person), "end", or
    # "opt_out" (the caller's number goes on the do-not-call list, and the call ends).
    keys: dict[str, KeyAction] = Field(default_factory=dict)
    # Idle timeouts (the caller said nothing for `silence_ms` after the agent spoke) before the
    # agent says goodbye and hangs up; each one before that asks whether the caller is there.
    silences: int | None = Field(default=None, ge=1, le=20)
    silence_ms: int = Field(default=10_000, ge=500, le=120_000)

    @field_validator("transfer_targets")
    @classmethod
    def _targets(cls, targets: tuple[str, ...]) -> tuple[str, ...]:
        for target in targets:
            if not TRANSFER_TARGET.fullmatch(target):
                raise ValueError(f"{target!r} is not a tel: or sip: URI")
        return targets

    @field_validator("keys")
    @classmethod
    def _keys(cls, keys: dict[str, str]) -> dict[str, str]:
        return checked_keys(keys)


def agent_as_session(data: Any) -> Any:
    """`{"agent": "support"}` (and its `vars`) on a route or a campaign: the session each call
    gets is the agent's (`{"session": {"agent": "support"}}`), as a session body names it."""
    if isinstance(data, dict) and "agent" in data:
        if "session" in data:
            raise ValueError("agent or session: an agent's version is the session")
        session = {"agent": data["agent"], **({"vars": data["vars"]} if "vars" in data else {})}
        data = {key: value for key, value in data.items() if key not in ("agent", "vars")}
        data["session"] = session
    return data


class RouteSpec(RouteTerms):
    """`POST /v1/routes`: which agent answers a number dialled (a number, a prefix ending in
    `*`, or `*` for any), the session each call gets, and the route's terms."""

    number: str
    session: SessionSpec

    @model_validator(mode="before")
    @classmethod
    def _agent_names_the_session(cls, data: Any) -> Any:
        return agent_as_session(data)

    @field_validator("number")
    @classmethod
    def _number(cls, value: str) -> str:
        if value.startswith("+") and not value.endswith("*"):
            # A whole number is kept as the number dialled is (its E.164 form), and a number no
            # caller can dial is refused; a prefix, or a SIP user without a `+`, as written.
            try:
                return e164(value)
            except MalformedNumber as refused:
                raise ValueError(str(refused)) from None
        if not ROUTE_NUMBER.fullmatch(value):
            raise ValueError("number is digits with an optional leading +, an optional trailing *, or *")
        return value

    @model_validator(mode="after")
    def _decline_key_is_free(self) -> RouteSpec:
        consent = self.session.privacy.consent
        if consent is not None and consent.decline_key is not None and consent.decline_key in self.keys:
            raise ValueError(
                f"key {consent.decline_key!r} declines recording (privacy.consent.decline_key); "
                "the route maps it too"
            )
        return self

    @model_validator(mode="after")
    def _fits_its_provider(self) -> RouteSpec:
        cannot = refusal(capabilities_for(self.session.provider), Ability.IDLE_SILENCES)
        if self.silences is not None and cannot is not None:
            raise ValueError(cannot.message)
        return self

    @property
    def terms(self) -> RouteTerms:
        return RouteTerms.model_validate(self.model_dump(exclude={"number", "session"}))


def shown_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A session spec (a route's, a campaign's) as an answer may show it, to any key: its
    webhook's secret left out and its events URL's password masked. A secret is given once,
    never answered back."""
    shown_as = dict(spec)
    webhook = spec.get("webhook")
    if isinstance(webhook, dict):
        shown_as["webhook"] = {name: value for name, value in webhook.items() if name != "secret"}
    if spec.get("events") is not None:
        shown_as["events"] = shown(spec["events"])
    return shown_as
