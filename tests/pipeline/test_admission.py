"""Admission: created → admitting → connected → listening, and the ways out of it."""

from __future__ import annotations

from datetime import date

import pytest

from pipeline.admission import (
    ADMISSION_TIMER,
    CEILING_TIMER,
    busy_for_handover,
    current_digest,
    handover_peer,
    live_setup,
    session_catalog,
    session_created_from,
    session_limits,
    taken_over,
    takeover_refusal,
)
from pipeline.api.requests import SessionSpec
from pipeline.call.catalog import SideEffect, ToolCatalog, ToolSpec
from pipeline.call.errors import AdmissionRefused, SessionEnded, UnknownDelegationHandler, UnknownTool
from pipeline.call.limits import ADMISSION_TIMEOUT_MS
from pipeline.platform.config import Settings
from pipeline.realtime.configuration import TRANSCRIPTION_MODEL
from pipeline.session.state import LiveSetup, Phase, SessionState
from pipeline.session.step import CloseCall, OpenSideband, RecordIncident, ScheduleTimer
from pipeline.session.wire import SessionUpdate
from tests.pipeline import events as ev


def test_creation_schedules_the_admission_timer() -> None:
    """A new session schedules the 30 s admission timer and stays created."""
    state, (step,) = ev.fold([ev.session_created()])

    assert state.phase is Phase.CREATED
    assert state.instructions == ev.INSTRUCTIONS
    assert state.limits.max_output_tokens == 512
    assert state.limits.max_session_seconds == 900
    assert step.controls == ()
    assert step.effects == (ScheduleTimer(name=ADMISSION_TIMER, delay_ms=ADMISSION_TIMEOUT_MS),)
    assert ADMISSION_TIMEOUT_MS == 30_000


def test_admission_begun_moves_a_created_session_to_admitting() -> None:
    """A connect request moves a created session to admitting, with nothing sent."""
    state, steps = ev.fold([ev.session_created(), ev.admission_begun()])

    assert state.phase is Phase.ADMITTING
    assert steps[-1].controls == ()
    assert steps[-1].effects == ()


def test_call_attached_opens_the_sideband() -> None:
    """The provider call attaching records its id and asks the gateway to open its sideband."""
    state, steps = ev.fold([ev.session_created(), ev.admission_begun(), ev.call_attached("rtc_1")])

    assert state.phase is Phase.ADMITTING
    assert state.call_id == "rtc_1"
    assert steps[-1].controls == ()
    assert steps[-1].effects == (OpenSideband(call_id="rtc_1"),)


def test_a_call_whose_sideband_connected_before_its_attach_is_attached_without_a_second_one() -> None:
    """The gateway that dialled opens the sideband at once, so its connection can be applied
    before the attach: the attach then only says how the call is carried. Another call's attach
    is still refused."""
    state = ev.state_after([ev.session_created(), ev.admission_begun(), ev.sideband_connected("live_1")])
    assert (state.phase, state.call_id, state.medium) == (Phase.CONNECTED, "live_1", "webrtc")

    step = ev.step_of(state, ev.call_attached("live_1", medium="sip"))

    assert (step.state.phase, step.state.call_id, step.state.medium) == (Phase.CONNECTED, "live_1", "sip")
    assert step.controls == () and step.effects == ()
    with pytest.raises(AdmissionRefused):
        ev.step_of(state, ev.call_attached("live_2", medium="sip"))


def test_sideband_connected_sends_exactly_one_session_update() -> None:
    """A connected sideband gets one session.update in which Switchboard drives every response."""
    state, steps = ev.fold(ev.admitted())

    assert state.phase is Phase.CONNECTED
    assert state.call_id == ev.CALL_ID
    (control,) = steps[-1].controls
    assert isinstance(control, SessionUpdate)
    session = control.session
    assert session["type"] == "realtime"
    assert session["instructions"] == ev.INSTRUCTIONS
    assert session["audio"]["input"]["transcription"] == {"model": TRANSCRIPTION_MODEL}
    turn_detection = session["audio"]["input"]["turn_detection"]
    assert turn_detection["create_response"] is False
    assert turn_detection["interrupt_response"] is False
    assert "tools" not in session


def test_sideband_connected_schedules_the_session_ceiling() -> None:
    """A connected sideband schedules the session ceiling from the session's own limit."""
    _, steps = ev.fold(ev.admitted())

    assert steps[-1].effects == (ScheduleTimer(name=CEILING_TIMER, delay_ms=900_000),)


def test_session_update_offers_the_tool_catalog() -> None:
    """A session created with tools offers them, with tool_choice auto, in its session.update."""
    tool = {
        "type": "function",
        "name": "lookup_order",
        "description": "Look up an order",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    }
    _, steps = ev.fold(ev.admitted(tools=[tool]))

    (control,) = steps[-1].controls
    assert control.session["tools"] == [tool]
    assert control.session["tool_choice"] == "auto"


def test_session_updated_makes_the_session_listen() -> None:
    """The provider confirming the configuration moves a connected session to listening."""
    state, steps = ev.fold(ev.listening())

    assert state.phase is Phase.LISTENING
    assert steps[-1].controls == ()
    assert steps[-1].effects == ()


def test_session_created_from_the_provider_does_not_make_the_session_listen() -> None:
    """A provider session.created is not the confirmation of Switchboard's configuration."""
    created = {**ev.session_updated(), "type": "session.created"}
    state = ev.state_after([*ev.admitted(), created])

    assert state.phase is Phase.CONNECTED


def test_connecting_twice_is_refused() -> None:
    """A second connect request on an admitting session is refused."""
    state = ev.state_after([ev.session_created(), ev.admission_begun()])

    with pytest.raises(AdmissionRefused, match="admitting"):
        ev.step_of(state, ev.admission_begun())


def test_connecting_a_listening_session_is_refused() -> None:
    """A connect request on a listening session is refused."""
    state = ev.state_after(ev.listening())

    with pytest.raises(AdmissionRefused, match="listening"):
        ev.step_of(state, ev.admission_begun())


def test_connecting_an_ended_session_is_refused_as_ended() -> None:
    """A connect request on an ended session raises SessionEnded."""
    state = ev.state_after([ev.session_created(), ev.end_requested()])

    with pytest.raises(SessionEnded, match="ended"):
        ev.step_of(state, ev.admission_begun())


def test_call_attached_after_failure_hangs_the_call_up() -> None:
    """A call that attaches after the session failed is hung up, and the session stays failed."""
    failed = ev.state_after([ev.session_created(), ev.admission_begun(), ev.timer_fired(ADMISSION_TIMER)])
    assert failed.phase is Phase.FAILED

    step = ev.step_of(failed, ev.call_attached("rtc_late"))

    assert step.controls == ()
    (close,) = [e for e in step.effects if isinstance(e, CloseCall)]
    assert close.reason == "session_already_over"
    assert close.hangup is True
    assert not any(isinstance(e, OpenSideband) for e in step.effects)
    # Nothing about the session changes, except that it may remember which call to hang up.
    assert step.state.model_copy(update={"call_id": failed.call_id}) == failed


def test_call_attached_after_failure_names_the_call_to_hang_up() -> None:
    """The hang-up of a call that attached too late identifies that call.

    The session store resolves a CloseCall's call id from the step's state, and the gateway
    hangs up only when it has one; so either the state or the effect must carry it.
    """
    failed = ev.state_after([ev.session_created(), ev.admission_begun(), ev.timer_fired(ADMISSION_TIMER)])

    step = ev.step_of(failed, ev.call_attached("rtc_late"))

    (close,) = [e for e in step.effects if isinstance(e, CloseCall)]
    assert getattr(close, "call_id", None) == "rtc_late" or step.state.call_id == "rtc_late"


def test_call_attached_while_created_is_refused() -> None:
    """A call attaching to a session nobody asked to connect is refused."""
    state = ev.state_after([ev.session_created()])

    with pytest.raises(AdmissionRefused):
        ev.step_of(state, ev.call_attached())


@pytest.mark.parametrize("prefix", [[ev.session_created()], [ev.session_created(), ev.admission_begun()]])
def test_admission_timeout_fails_a_session_that_did_not_connect(
    prefix: list[dict[str, object]],
) -> None:
    """The admission timer fails a created or admitting session with an incident and a close."""
    before = ev.state_after(prefix)

    step = ev.step_of(before, ev.timer_fired(ADMISSION_TIMER))

    assert step.state.phase is Phase.FAILED
    assert step.state.end_reason == "admission_timeout"
    assert step.controls == ()
    (incident,) = [e for e in step.effects if isinstance(e, RecordIncident)]
    assert incident.code == "admission_timeout"
    assert incident.severity == "error"
    assert [e for e in step.effects if isinstance(e, CloseCall)] == [
        CloseCall(reason="admission_timeout", hangup=False)
    ]


def test_admission_timeout_hangs_up_an_attached_call() -> None:
    """An admission timeout after the call attached hangs that call up."""
    before = ev.state_after([ev.session_created(), ev.admission_begun(), ev.call_attached()])

    step = ev.step_of(before, ev.timer_fired(ADMISSION_TIMER))

    assert step.state.phase is Phase.FAILED
    assert CloseCall(reason="admission_timeout", hangup=True) in step.effects


@pytest.mark.parametrize("events", [ev.admitted(), ev.listening()], ids=["connected", "listening"])
def test_admission_timeout_after_connecting_is_a_no_op(events: list[dict[str, object]]) -> None:
    """The admission timer does nothing once the sideband is connected."""
    before = ev.state_after(events)

    step = ev.step_of(before, ev.timer_fired(ADMISSION_TIMER))

    assert step.state == before
    assert step.controls == ()
    assert step.effects == ()


def test_admission_failed_fails_the_session_with_its_code() -> None:
    """A failed provider call creation fails the session with the provider's code."""
    before = ev.state_after([ev.session_created(), ev.admission_begun()])

    step = ev.step_of(before, ev.admission_failed("provider_unavailable", "HTTP 503"))

    assert step.state.phase is Phase.FAILED
    assert step.state.end_reason == "provider_unavailable"
    (incident,) = [e for e in step.effects if isinstance(e, RecordIncident)]
    assert incident.code == "provider_unavailable"
    assert "HTTP 503" in incident.summary
    assert CloseCall(reason="provider_unavailable", hangup=False) in step.effects


def test_admission_failed_after_the_end_changes_nothing() -> None:
    """A failed admission reported for an ended session changes nothing."""
    before = ev.state_after([ev.session_created(), ev.end_requested()])

    step = ev.step_of(before, ev.admission_failed())

    assert step.state == before
    assert step.effects == ()


@pytest.mark.parametrize("events", [ev.admitted(), ev.listening()], ids=["connected", "listening"])
def test_admission_failed_replayed_after_the_call_connected_changes_nothing(
    events: list[dict[str, object]],
) -> None:
    """An admission failure that arrives once the call is connected (a dead letter replayed
    late) does not fail the live call."""
    before = ev.state_after(events)

    step = ev.step_of(before, ev.admission_failed("provider_unavailable", "stale"))

    assert step.state == before
    assert step.effects == ()


def test_a_takeover_holds_only_from_a_dead_gateway_to_a_live_one() -> None:
    """A session moves only if its old gateway is still dead and the new one alive; a gateway
    restarting under its own id takes its sessions back."""
    assert takeover_refusal("gw1", "gw2", dead_is_alive=False, new_is_alive=True) is None
    assert takeover_refusal("gw1", "gw1", dead_is_alive=True, new_is_alive=True) is None
    assert takeover_refusal("gw1", "gw2", dead_is_alive=True, new_is_alive=True) == "gateway gw1 is alive"
    refusal = takeover_refusal("gw1", "gw9", dead_is_alive=False, new_is_alive=False)
    assert refusal is not None and "gw9" in refusal


def test_session_ceiling_ends_a_live_session() -> None:
    """The session ceiling ends a listening session and hangs its call up."""
    before = ev.state_after(ev.listening())

    step = ev.step_of(before, ev.timer_fired(CEILING_TIMER))

    assert step.state.phase is Phase.ENDED
    assert step.state.end_reason == "max_duration"
    assert step.effects == (CloseCall(reason="max_duration", hangup=True),)


def test_an_unknown_timer_changes_nothing() -> None:
    """A timer nobody scheduled changes nothing."""
    before = ev.state_after(ev.listening())

    step = ev.step_of(before, ev.timer_fired("nobody_scheduled_this"))

    assert step.state == before
    assert step.effects == ()


def test_a_fresh_session_state_is_created() -> None:
    """A session begins created, generation 1, with no call and no usage."""
    state = SessionState()

    assert state.phase is Phase.CREATED
    assert state.generation == 1
    assert state.call_id is None
    assert state.realtime.turn is None
    assert state.usage.responses == 0


def test_a_connect_request_run_again_finds_its_own_admission_and_another_is_refused() -> None:
    """A connect's begin_admission whose first run committed but never answered (Redis away)
    is run again by Dramatiq: it is answered as before; any other connect is still refused."""
    created = ev.state_after([ev.session_created()])
    first = ev.step_of(created, {"type": "switchboard.admission_begun", "request_id": "req_1"})
    assert first.state.phase is Phase.ADMITTING

    again = ev.step_of(first.state, {"type": "switchboard.admission_begun", "request_id": "req_1"})
    assert again.state == first.state and again.controls == () and again.effects == ()
    with pytest.raises(AdmissionRefused):
        ev.step_of(first.state, {"type": "switchboard.admission_begun", "request_id": "req_2"})


def test_a_stopping_gateway_hands_over_only_an_idle_call() -> None:
    """An answer asked for or under way would be asked for again on the new sideband (the old
    one, still open, sees it through): the caller would hear it twice. So only an idle call
    moves; a call that is over, or never had a provider call, moves trivially."""
    idle = ev.state_after(ev.listening())
    assert busy_for_handover(idle) is None
    speaking = ev.state_after(
        [*ev.listening(), ev.speech_started("item_u1"), ev.user_final("item_u1", "Hi.")]
    )
    assert busy_for_handover(speaking) == "turn_in_progress"
    assert busy_for_handover(SessionState()) is None
    moved = taken_over(idle, "gw2", handed_over=True)
    assert [effect.code for effect in moved.effects if isinstance(effect, RecordIncident)] == [
        "gateway_drained"
    ]
    assert moved.state.generation == idle.generation + 1


def test_a_stopping_gateway_hands_a_call_to_the_same_peer_every_time() -> None:
    """The peer a call is handed to depends only on the session and the peers: each asks again
    lands on the same one, and the sessions spread over every peer."""
    peers = ["gw2", "gw3", "gw4"]

    chosen = {handover_peer(f"sess_{index}", peers) for index in range(60)}

    assert handover_peer("sess_1", peers) == handover_peer("sess_1", list(peers))
    assert chosen == set(peers)
    assert handover_peer("sess_1", ["gw2"]) == "gw2"


def _tool(name: str, version: str = "1", *, sensitive: tuple[str, ...] = ()) -> ToolSpec:
    properties = {"card": {"type": "string"}} if sensitive else {}
    return ToolSpec(
        name=name,
        version=version,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": properties},
        side_effect=SideEffect.READ_ONLY,
        sensitive=sensitive,
    )


# The day sessions are created on in these tests: before any shipped model's shutdown.
TODAY = date(2026, 12, 7)
REGISTERED = {"lookup": _tool("lookup"), "pay": _tool("pay", "2", sensitive=("card",)), "echo": _tool("echo")}


def test_a_session_s_tools_are_fixed_at_creation_with_their_digest() -> None:
    """The tools a session asks for are taken from the registered ones with their versions,
    side effects and sensitive parameters, and the digest of just those."""
    catalog = session_catalog(("pay", "lookup"), REGISTERED)

    assert [tool["name"] for tool in catalog["tools"]] == ["pay", "lookup"]
    assert catalog["catalog_digest"] == ToolCatalog(tools=(REGISTERED["pay"], REGISTERED["lookup"])).digest
    assert catalog["tool_versions"] == {"pay": "2", "lookup": "1"}
    assert catalog["tool_side_effects"] == {"pay": "read_only", "lookup": "read_only"}
    assert catalog["tool_sensitive"] == {"pay": ("card",)}
    assert session_catalog((), REGISTERED)["catalog_digest"] == ""


def test_an_unregistered_tool_is_refused_naming_the_registered_ones() -> None:
    """A session may not ask for a tool nobody registered: the refusal lists what there is."""
    with pytest.raises(UnknownTool, match=r"no registered tool 'nope' \(registered: lookup, pay, echo\)"):
        session_catalog(("lookup", "nope"), REGISTERED)
    with pytest.raises(UnknownTool, match=r"\(registered: none\)"):
        session_catalog(("nope",), {})


def test_a_session_s_tools_keep_their_digest_until_one_changes_or_goes() -> None:
    """Today's digest of a session's tools equals the one it was created with while each tool
    is registered as it was; a new version changes it, and a tool gone makes it ""."""
    versions = session_catalog(("lookup", "pay"), REGISTERED)
    created_with = versions["catalog_digest"]

    assert current_digest(versions["tool_versions"], REGISTERED) == created_with
    assert current_digest(versions["tool_versions"], {**REGISTERED, "pay": _tool("pay", "3")}) != created_with
    assert current_digest(versions["tool_versions"], {"lookup": REGISTERED["lookup"]}) == ""


def test_a_session_s_limits_are_its_own_else_the_deployment_s() -> None:
    """Each limit the spec sets is kept; the deployment's settings fill in the rest."""
    settings = Settings(max_output_tokens=700, max_session_seconds=600, usage_budget_tokens=9_000)
    spec = SessionSpec.model_validate({"instructions": "Hi.", "limits": {"max_session_seconds": 120}})
    model = settings.catalog.get("gpt-realtime-2.1")
    assert model is not None and model.context_tokens == 128_000

    assert session_limits(spec, settings, model) == {
        "max_output_tokens": 700,
        "max_session_seconds": 120,
        # Neither the session nor the deployment set it: half the model's context.
        "compaction_input_tokens": 64_000,
        "usage_budget_tokens": 9_000,
        "usage_budget_seconds": None,
    }


def test_the_model_s_catalog_entry_fills_in_what_nothing_else_set() -> None:
    """The compaction threshold is half the model's context unless the session or the
    deployment sets one; the output limit is never above the model's."""
    small = Settings().catalog.get("gpt-realtime-1.5")
    assert small is not None and (small.context_tokens, small.output_tokens) == (32_000, 4_096)
    spec = SessionSpec.model_validate({"instructions": "Hi."})

    assert session_limits(spec, Settings(), small)["compaction_input_tokens"] == 16_000
    deployment = Settings(compaction_input_tokens=9_000)
    assert session_limits(spec, deployment, small)["compaction_input_tokens"] == 9_000
    own = SessionSpec.model_validate({"instructions": "Hi.", "limits": {"compaction_input_tokens": 5_000}})
    assert session_limits(own, deployment, small)["compaction_input_tokens"] == 5_000
    assert session_limits(spec, Settings(max_output_tokens=4_096), small)["max_output_tokens"] == 4_096
    tight = small.model_copy(update={"output_tokens": 1_000})
    assert session_limits(spec, Settings(max_output_tokens=4_096), tight)["max_output_tokens"] == 1_000
    assert session_limits(spec, Settings(max_output_tokens="inf"), tight)["max_output_tokens"] == "inf"


def test_a_live_session_is_fixed_to_its_delegation_handler_s_version() -> None:
    """A Live session's delegation handler is fixed with its registered version; without one its
    delegations go unanswered; an unknown one is refused now; a Realtime session has none."""
    handlers = {"order_desk": "4"}
    live = {"provider": "live", "instructions": "Hi."}

    with_handler = SessionSpec.model_validate(
        {**live, "live": {"delegation": "order_desk", "acknowledgement_delay_ms": 250}}
    )
    assert live_setup(with_handler, handlers) == LiveSetup(
        handler="order_desk", handler_version="4", acknowledgement_delay_ms=250
    )
    assert live_setup(SessionSpec.model_validate(live), handlers) == LiveSetup(acknowledgement_delay_ms=400)
    assert live_setup(SessionSpec.model_validate({"instructions": "Hi."}), handlers) is None
    with pytest.raises(UnknownDelegationHandler, match=r"'billing' \(registered: order_desk\)"):
        live_setup(SessionSpec.model_validate({**live, "live": {"delegation": "billing"}}), handlers)


def test_a_session_is_created_from_its_spec_against_the_registries() -> None:
    """A session's first input carries its spec's texts, its tools fixed with their digest and
    its limits filled in; a Live one, its handler's version."""
    spec = SessionSpec.model_validate(
        {
            "instructions": "Help the caller.",
            "tools": ["lookup"],
            "greeting": {"say": "Hello."},
            "hangup": {"when": "the caller is done"},
        }
    )
    live = SessionSpec.model_validate(
        {"provider": "live", "instructions": "Help.", "live": {"delegation": "order_desk"}}
    )

    created = session_created_from(spec, tools=REGISTERED, handlers={}, settings=Settings(), today=TODAY)
    created_live = session_created_from(
        live, tools=REGISTERED, handlers={"order_desk": "4"}, settings=Settings(), today=TODAY
    )

    assert created.instructions == "Help the caller."
    assert created.provider == "realtime"
    assert created.tool_versions == {"lookup": "1"}
    assert created.catalog_digest == session_catalog(("lookup",), REGISTERED)["catalog_digest"]
    assert created.live is None
    assert created.greeting is not None
    assert created.greeting.say == "Hello."
    assert created.hangup_when == "the caller is done"
    assert created.limits == session_limits(spec, Settings(), Settings().catalog.entries["gpt-realtime-2.1"])
    assert created.model.id == "gpt-realtime-2.1" and created_live.model.id == "gpt-live-1.1"
    assert created_live.provider == "live"
    assert created_live.live == LiveSetup(handler="order_desk", handler_version="4")
