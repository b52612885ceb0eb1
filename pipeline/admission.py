"""Admission: created → admitting → connected → listening, and the ways out of it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from pipeline.api.requests import SessionSpec
from pipeline.call.catalog import ToolCatalog, ToolSpec
from pipeline.call.errors import (
    AdmissionRefused,
    LiveModelAtCapacity,
    UnknownDelegationHandler,
    UnknownTool,
)
from pipeline.call.limits import (
    ADMISSION_TIMEOUT_MS,
    MAXIMUM_RECONNECT_ATTEMPTS,
    MAXIMUM_RECONNECT_DELAY_MS,
    RECONNECT_BACKOFF_MS,
)
from pipeline.dialects import capabilities_for, dialect_of
from pipeline.model_catalog.choice import Chosen, Defaults, chosen, shutdown_warnings
from pipeline.model_catalog.entries import ModelEntry
from pipeline.platform.config import Settings
from pipeline.session import ending
from pipeline.session.redaction import redacted_creation
from pipeline.session.refusals import over_for
from pipeline.session.state import (
    IN_CALL,
    AppWebhook,
    EventStream,
    Greeting,
    LiveSetup,
    ModelChoice,
    Phase,
    SessionState,
    Transcription,
)
from pipeline.session.step import (
    CloseCall,
    OpenSideband,
    RecordIncident,
    Step,
    answering,
    schedule_timer,
    unchanged,
)
from pipeline.session.timers import AdmissionTimeout, SessionCeiling, SidebandReconnect, timer_name
from pipeline.session.wire import (
    EndRequested,
    SessionCreated,
    SessionUpdate,
    SessionUpdated,
    SidebandClosed,
    SidebandConnected,
)

# The names of the two admission timers (scheduled through `pipeline.session.timers`; named here for
# the tests and the end-to-end runs that fire them by name).
ADMISSION_TIMER = timer_name(AdmissionTimeout())
CEILING_TIMER = timer_name(SessionCeiling())


def created(state: SessionState) -> Step:
    """A new session waits at most the admission timeout for its call to connect."""
    return Step(state=state, effects=(schedule_timer(AdmissionTimeout(), delay_ms=ADMISSION_TIMEOUT_MS),))


def begin_admission(state: SessionState, request_id: str | None = None) -> Step:
    """A connect request moves a created session to admitting; anything else is refused. The
    same request run again (its first run committed, then failed before it answered: Redis was
    away) finds its own admission and is answered as it was."""
    ended = over_for(state)
    if ended is not None:
        raise ended
    if state.phase is Phase.ADMITTING and request_id is not None and state.admitted_by == request_id:
        return unchanged(state)
    if state.phase is not Phase.CREATED:
        raise AdmissionRefused(f"session is {state.phase}; connect is allowed once, when created")
    return Step(state=state.evolve(phase=Phase.ADMITTING, admitted_by=request_id))


def attach_call(state: SessionState, call_id: str, medium: Literal["webrtc", "sip"] = "webrtc") -> Step:
    """The provider created the call: remember its id and have the gateway open the sideband.
    A session that failed meanwhile (admission timeout) hangs the fresh call up instead. A call
    dialled out has its sideband opened by the gateway that dialled, at once: its connection
    may come first, and the attach then only says how the call is carried."""
    if state.is_terminal:
        return Step(
            state=state,
            effects=(CloseCall(reason="session_already_over", hangup=True, call_id=call_id),),
        )
    if state.phase is not Phase.ADMITTING and state.call_id == call_id:
        return Step(state=state.evolve(medium=medium))
    if state.phase is not Phase.ADMITTING:
        raise AdmissionRefused(f"session is {state.phase}; a call attaches only while admitting")
    return Step(
        state=state.evolve(call_id=call_id, medium=medium, opened_generation=state.generation),
        effects=(OpenSideband(call_id=call_id),),
    )


def fail_admission(state: SessionState, code: str, detail: str) -> Step:
    """Creating the provider call failed: the session fails with the provider's reason. Only
    a session still being admitted can fail admission: the same message replayed later (a
    dead letter) must not fail the call that connected since."""
    if state.phase not in (Phase.CREATED, Phase.ADMITTING):
        return unchanged(state)
    return fail(state, code, f"admission failed: {detail}")


def takeover_refusal(
    dead_gateway: str, new_gateway: str, *, dead_is_alive: bool, new_is_alive: bool
) -> str | None:
    """Why a session may not move from `dead_gateway` to `new_gateway` now, or None if it may.
    A takeover is asked for when a gateway's liveness key lapsed, but the message may run much
    later (a retry, a replayed dead letter): it holds only if the old owner is still dead and
    the new one alive (a gateway restarting under its own id takes its sessions back)."""
    if dead_is_alive and dead_gateway != new_gateway:
        return f"gateway {dead_gateway} is alive"
    if not new_is_alive:
        return f"gateway {new_gateway}, which would take the sessions over, is not alive"
    return None


def sideband_connected(state: SessionState, event: SidebandConnected) -> Step:
    """The sideband is up: configure the session so that Switchboard drives every response.
    A re-opened sideband of a live call needs no configuration (the provider kept it)."""
    if state.is_terminal:
        return unchanged(state)
    if state.sideband_down:
        state = state.evolve(sideband_down=False, reconnect_attempts=0)
        if state.phase in IN_CALL:
            return _reconnected(state)
    if state.phase in (Phase.CREATED, Phase.ADMITTING):
        configuration = dialect_of(state).sideband_configuration(state)
        return Step(
            state=state.evolve(phase=Phase.CONNECTED, call_id=event.call_id),
            controls=(SessionUpdate(session=configuration),),
            effects=(schedule_timer(SessionCeiling(), delay_ms=state.limits.max_session_seconds * 1_000),),
        )
    return unchanged(state)


def session_updated(state: SessionState, event: SessionUpdated) -> Step:
    """The provider confirmed the configuration: the session listens, and greets the caller if
    it was created with a greeting (once; never on a closed line)."""
    if state.phase is Phase.CONNECTED and event.type == "session.updated":
        return dialect_of(state).listen(state.evolve(phase=Phase.LISTENING))
    return unchanged(state)


def end(state: SessionState, event: EndRequested) -> Step:
    """An end request closes the call; ending an ended session changes nothing. The request
    that asked is answered: 202 if it ended the call, 409 if the call was over already."""
    ended = over_for(state)
    if ended is not None:
        step = unchanged(state)
        status = 409
        body: dict[str, Any] = ended.body()
    else:
        step = finish(state, event.reason)
        status = 202
        body = {"status": "ending", "reason": event.reason}
    return answering(step, event.request_id, event.gateway_id, status, body)


def finish(state: SessionState, reason: str) -> Step:
    """End the session normally: the sideband is told what its provider is told on the way out,
    then closed, and the provider call hung up."""
    return ending.finish(state, reason, dialect_of(state).closing(state))


def sideband_closed(state: SessionState, event: SidebandClosed) -> Step:
    """The provider closed the sideband: a normal close ends the call, and so does a re-opening
    the provider answers with "no such call" (the caller hung up while the sideband was down: a
    handover, a lost connection). Anything else is a lost sideband: recorded, then re-opened on
    the same call after a backoff, as a new generation (events and controls of the old one are
    fenced off)."""
    if state.is_terminal or event.by_host:
        return unchanged(state)
    if event.code == 1000 or (event.call_gone and state.call_id is not None):
        return Step(
            state=state.evolve(phase=Phase.ENDED, end_reason=ending.CALLER_HUNG_UP).with_realtime(turn=None),
            effects=(CloseCall(reason=ending.CALLER_HUNG_UP, hangup=False),),
        )
    detail = f"sideband closed with code {event.code} {event.reason}".strip()
    if state.call_id is None:
        return fail(state, "sideband_lost", detail)
    delay_ms = min(RECONNECT_BACKOFF_MS * (state.reconnect_attempts + 1), MAXIMUM_RECONNECT_DELAY_MS)
    generation = state.generation + 1
    incident = RecordIncident(
        code="sideband_lost",
        summary=detail,
        severity="warning",
        context={
            "phase": str(state.phase),
            "generation": state.generation,
            "attempts": state.reconnect_attempts,
        },
    )
    return Step(
        state=state.evolve(sideband_down=True, generation=generation),
        effects=(incident, schedule_timer(SidebandReconnect(generation), delay_ms=delay_ms)),
    )


def reconnect_due(state: SessionState, generation: int) -> Step:
    """The backoff is over: re-open the sideband, or fail once the attempts are spent."""
    if state.is_terminal or not state.sideband_down or generation != state.generation:
        return unchanged(state)
    if state.reconnect_attempts >= MAXIMUM_RECONNECT_ATTEMPTS:
        return fail(
            state,
            "sideband_reconnect_exhausted",
            f"the sideband could not be re-opened in {MAXIMUM_RECONNECT_ATTEMPTS} attempts",
        )
    assert state.call_id is not None
    return Step(
        state=state.evolve(
            reconnect_attempts=state.reconnect_attempts + 1, opened_generation=state.generation
        ),
        effects=(OpenSideband(call_id=state.call_id),),
    )


def _reconnected(state: SessionState) -> Step:
    """The sideband is back. Whatever the provider said meanwhile is gone, and so may be a
    control sent while no sideband listened: the provider's wing makes good what the gap may
    have swallowed (a response the caller is owed is asked for again; so the session never waits
    for an answer nobody will see)."""
    return dialect_of(state).reconnected(state)


def taken_over(state: SessionState, gateway_id: str, *, handed_over: bool = False) -> Step:
    """The gateway holding the sideband died (or, `handed_over`, is stopping) and `gateway_id`
    took the session over: it opens the sideband again on the same call, as a new generation,
    at once. If the provider refuses, the usual reconnect attempts follow, then the failure
    (with a hangup)."""
    if state.is_terminal or state.call_id is None:
        return unchanged(state)
    generation = state.generation + 1
    incident = RecordIncident(
        code="gateway_drained" if handed_over else "gateway_lost",
        summary=(
            f"the gateway holding the sideband is stopping; {gateway_id} took the call over"
            if handed_over
            else f"the gateway holding the sideband died; {gateway_id} took the session over"
        ),
        severity="warning",
        context={"phase": str(state.phase), "generation": state.generation, "gateway": gateway_id},
    )
    return Step(
        state=state.evolve(
            generation=generation, sideband_down=True, reconnect_attempts=1, opened_generation=generation
        ),
        effects=(incident, OpenSideband(call_id=state.call_id)),
    )


def timer_fired(state: SessionState, timer: AdmissionTimeout | SessionCeiling) -> Step:
    """A timer checks the state it finds: it acts only if its condition still holds."""
    if state.is_terminal:
        return unchanged(state)
    if isinstance(timer, AdmissionTimeout) and state.phase in (Phase.CREATED, Phase.ADMITTING):
        return fail(state, "admission_timeout", "the call did not connect within the admission timeout")
    if isinstance(timer, SessionCeiling) and state.phase in IN_CALL:
        return finish(state, ending.MAX_DURATION)
    return unchanged(state)


def fail(state: SessionState, code: str, summary: str) -> Step:
    """Fail the session: a durable incident, the sideband closed and the call hung up."""
    return ending.fail(state, code, summary, dialect_of(state).closing(state))


def session_configuration(state: SessionState) -> dict[str, Any]:
    """What the session's call is accepted (a phone call) or created with."""
    return dialect_of(state).configuration(state)


def creation_configuration(state: SessionState) -> dict[str, Any] | None:
    """What the gateway creates a WebRTC call with, or None when its sideband configures it."""
    return dialect_of(state).creation_configuration(state)


def busy_for_handover(state: SessionState) -> str | None:
    """Why a stopping gateway may not hand this call to a peer yet (None: it may). Only an idle
    call moves: an answer asked for or under way, a tool, a compaction or a sideband being
    re-opened would be asked for again by the new sideband (the old one, still open, sees it
    through), and the caller would hear it twice."""
    if state.is_terminal or state.call_id is None:
        return None
    if state.realtime.turn is not None:
        return "turn_in_progress"
    if state.realtime.chain.pending is not None:
        return "tool_running"
    if state.realtime.compaction is not None:
        return "compacting"
    if state.sideband_down:
        return "reconnecting"
    return None


def handover_peer(session_id: str, peers: Sequence[str]) -> str:
    """The live peer a stopping gateway hands the session's call to: spread over the peers by
    session, the same peer for the same session every time."""
    return peers[int(hashlib.sha256(session_id.encode()).hexdigest(), 16) % len(peers)]


# ── a session's creation, from its spec ─────────────────────────────────────────────────


def session_created_from(
    checked: SessionSpec,
    *,
    tools: Mapping[str, ToolSpec],
    handlers: Mapping[str, str],
    settings: Settings,
    today: date,
) -> SessionCreated:
    """A session's first input, from its spec: its tools (of the registered `tools`, by name)
    and its delegation handler (of the registered `handlers`, name to version) resolved now (an
    unknown one is refused), its limits filled in from the deployment's `settings`, its own
    texts through its privacy boundary; its model, voice, effort and transcription checked
    against the model catalog as it stands `today` (a retired model is refused)."""
    choice = model_chosen(checked, settings, today)
    created = SessionCreated(
        instructions=checked.instructions,
        limits=session_limits(checked, settings, choice.model),
        model=model_choice(choice),
        greeting=Greeting.model_validate(checked.greeting.model_dump()) if checked.greeting else None,
        hangup_when=checked.hangup.when if checked.hangup else None,
        app_webhook=AppWebhook.model_validate(checked.webhook.model_dump()) if checked.webhook else None,
        event_stream=EventStream.model_validate(checked.events.model_dump()) if checked.events else None,
        provider=checked.provider,
        live=live_setup(checked, handlers),
        privacy=checked.privacy,
        storage=checked.storage,
        **session_catalog(checked.tools, tools),
    )
    return redacted_creation(created)


def session_catalog(names: tuple[str, ...], tools: Mapping[str, ToolSpec]) -> dict[str, Any]:
    """The registered tools a session asked for, fixed at creation with their digest (an
    unknown one is refused, naming the registered ones)."""
    specs = []
    for name in names:
        spec = tools.get(name)
        if spec is None:
            known = ", ".join(tools) or "none"
            raise UnknownTool(f"no registered tool {name!r} (registered: {known})")
        specs.append(spec)
    catalog = ToolCatalog(tools=tuple(specs))
    return {
        "tools": catalog.provider_tools(),
        "catalog_digest": catalog.digest if specs else "",
        "tool_versions": {spec.name: spec.version for spec in specs},
        "tool_side_effects": {spec.name: str(spec.side_effect) for spec in specs},
        "tool_sensitive": {spec.name: spec.sensitive for spec in specs if spec.sensitive},
    }


def current_digest(tool_versions: Mapping[str, str], tools: Mapping[str, ToolSpec]) -> str:
    """The digest a session's tools have among the registered `tools` today ("" if one is gone)."""
    specs = []
    for name in tool_versions:
        spec = tools.get(name)
        if spec is None:
            return ""
        specs.append(spec)
    return ToolCatalog(tools=tuple(specs)).digest


def model_chosen(spec: SessionSpec, settings: Settings, today: date) -> Chosen:
    """The session's model and how it is used, checked against the deployment's catalog."""
    return chosen(
        api=spec.provider,
        model=spec.model,
        voice=spec.voice,
        reasoning_effort=spec.reasoning.effort if spec.reasoning is not None else None,
        transcription=spec.transcription.asked() if spec.transcription is not None else None,
        tools_in_parallel=spec.tools_in_parallel,
        catalog=settings.catalog,
        defaults=Defaults(
            realtime=settings.provider_model,
            live=settings.live_model,
            transcription=settings.transcription_model,
        ),
        today=today,
    )


def model_choice(choice: Chosen) -> ModelChoice:
    """What the session's state keeps of its choice."""
    return ModelChoice(
        id=choice.model.id,
        voice=choice.voice,
        reasoning_effort=choice.reasoning_effort,
        transcription=Transcription.model_validate(choice.transcription) if choice.transcription else None,
        parallel_tool_calls=choice.parallel_tool_calls,
        delegation_policy=choice.model.delegation_policy,
    )


def creation_warnings(created: SessionCreated, settings: Settings, today: date) -> list[str]:
    """What the app is told about the session it created: a model of it near its shutdown."""
    transcription = created.model.transcription
    return shutdown_warnings(
        (("model", created.model.id), ("transcription.model", transcription.model if transcription else "")),
        settings.catalog,
        today,
    )


# The context is compacted once a response's input reaches this share of the model's context
# window: half, as the seed's 16K was of gpt-realtime's 32K. The other half holds the
# instructions, the tools, the summary request and a whole response, so the provider never has to
# cut the conversation itself; a session or the deployment may set a lower threshold, which
# costs less per response on a large context.
COMPACTION_SHARE_OF_CONTEXT = 0.5


def session_limits(spec: SessionSpec, settings: Settings, model: ModelEntry) -> dict[str, Any]:
    """The session's limits: those its spec sets, the deployment's for the rest, and where
    neither does, what its model's catalog entry implies (the compaction threshold from its
    context; an output limit never above the model's)."""
    deployment_set = settings.model_fields_set
    if spec.limits.compaction_input_tokens is not None:
        compaction = spec.limits.compaction_input_tokens
    elif "compaction_input_tokens" in deployment_set or model.context_tokens is None:
        compaction = settings.compaction_input_tokens
    else:
        compaction = int(model.context_tokens * COMPACTION_SHARE_OF_CONTEXT)
    output = spec.limits.max_output_tokens or settings.max_output_tokens
    if isinstance(output, int) and model.output_tokens is not None:
        output = min(output, model.output_tokens)
    return {
        "max_output_tokens": output,
        "max_session_seconds": spec.limits.max_session_seconds or settings.max_session_seconds,
        "compaction_input_tokens": compaction,
        "usage_budget_tokens": spec.limits.usage_budget_tokens or settings.usage_budget_tokens,
        "usage_budget_seconds": spec.limits.usage_budget_seconds,
    }


def live_setup(spec: SessionSpec, handlers: Mapping[str, str]) -> LiveSetup | None:
    """A Live session's delegation handler, fixed at creation with its version (of the
    registered `handlers`, name to version: an unknown one is refused now, not at the first
    delegation); None for a provider without delegations."""
    if not capabilities_for(spec.provider).delegations:
        return None
    live = spec.live
    name = live.delegation if live is not None else None
    delay = live.acknowledgement_delay_ms if live is not None else 400
    if name is None:
        return LiveSetup(acknowledgement_delay_ms=delay)
    version = handlers.get(name)
    if version is None:
        known = ", ".join(handlers) or "none"
        raise UnknownDelegationHandler(f"no registered delegation handler {name!r} (registered: {known})")
    return LiveSetup(handler=name, handler_version=version, acknowledgement_delay_ms=delay)


# ── a Live model's cap of sessions in a call ────────────────────────────────────────────


@dataclass(frozen=True)
class LiveCap:
    """How many sessions of one Live model may be in a call at once: each Live model has a
    concurrent-session cap of its own at the provider, shared by all its regions, so the next
    session is refused at admission rather than by the provider mid-dial."""

    model: str
    sessions: int
    # The model each provider's session talks to when it names none (a session stored before
    # models were chosen per session): such a session counts against its default's cap.
    defaults: Mapping[str, str]


@dataclass(frozen=True)
class LiveCaps:
    """The deployment's caps per Live model (`SWITCHBOARD_LIVE_MAX_SESSIONS`; a model not named
    has none), and each provider's default model."""

    sessions: Mapping[str, int]
    defaults: Mapping[str, str]

    @classmethod
    def of(cls, settings: Settings) -> LiveCaps:
        """The deployment's caps, as its settings say."""
        return cls(
            sessions=dict(settings.live_max_sessions),
            defaults={"realtime": settings.provider_model, "live": settings.live_model},
        )

    def cap_for(self, provider: str, model: str | None) -> LiveCap | None:
        """The cap a session of `provider` on `model` (None or "": its provider's default)
        counts against, or None when its model has none."""
        served = model or self.defaults.get(provider, "")
        sessions = self.sessions.get(served)
        return None if sessions is None else LiveCap(served, sessions, self.defaults)


# No model capped: what a caller that names no caps gets.
NO_LIVE_CAPS = LiveCaps(sessions={}, defaults={})


def connect_cap(state: SessionState, caps: LiveCaps) -> LiveCap | None:
    """The cap a connect of this session must fit under. Only a created session's connect
    admits a call: asked again of a session admitting it is answered as it was, and of one
    connected or over it is refused for its state, neither counted again."""
    if state.phase is not Phase.CREATED:
        return None
    return caps.cap_for(str(state.provider), state.model.id)


def over_cap(cap: LiveCap, in_a_call: int) -> LiveModelAtCapacity | None:
    """The refusal of one more session of a model that has `in_a_call` sessions in a call
    already, or None while it has room."""
    if in_a_call < cap.sessions:
        return None
    return LiveModelAtCapacity(
        f"{cap.model} has {in_a_call} sessions in a call, its cap of {cap.sessions}:"
        " ask again once one of them ends",
        model=cap.model,
        cap=cap.sessions,
    )


def room_under(cap: LiveCap, in_a_call: int) -> int:
    """How many more sessions of the model may be admitted now."""
    return max(0, cap.sessions - in_a_call)
