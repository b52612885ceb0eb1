"""What erasure decides, without a database: which sessions may be erased, how a number may
stand in a call's metadata, when retention is over, and what an erased session's state keeps
(which numbers are numbers at all is tests/pipeline/phone/test_numbers.py's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from pipeline.api.roles import Identity, Permission, Role, permission_for
from pipeline.call.errors import SessionLive
from pipeline.phone.sip import PhoneLine
from pipeline.platform.config import ConfigError, settings_from
from pipeline.privacy.policy import PrivacyPolicy
from pipeline.records.erasure import (
    erased_controls,
    erased_payload,
    erased_state,
    is_erased_payload,
    numbers_matching,
    refusal_to_erase,
    retention_days,
    retention_over,
)
from pipeline.session.state import (
    Compaction,
    Delegation,
    LiveCall,
    Phase,
    PromptBlock,
    RealtimeCall,
    ResponseContext,
    SessionState,
    ToolCall,
    ToolChain,
    Usage,
)
from pipeline.session.timeline import TranscriptFragment

WORDS = "my card ends in 0366 and I live at 12 Elm Street"


def test_a_number_matches_with_and_without_its_plus() -> None:
    assert numbers_matching("+14155550123") == ("+14155550123", "14155550123")


@pytest.mark.parametrize("phase", list(Phase))
def test_only_a_finished_session_may_be_erased(phase: Phase) -> None:
    refusal = refusal_to_erase(phase, "sess_1")
    if phase in (Phase.ENDED, Phase.FAILED):
        assert refusal is None
    else:
        assert isinstance(refusal, SessionLive) and refusal.code == "session_live"
        assert str(phase) in str(refusal)


def test_the_policy_s_retention_wins_over_the_deployment_s() -> None:
    assert retention_days(7, 30) == 7
    assert retention_days(None, 30) == 30
    assert retention_days(None, None) is None


def test_retention_is_over_once_that_many_days_passed_since_the_end() -> None:
    ended = datetime(2026, 1, 1, tzinfo=UTC)
    assert not retention_over(ended, 30, ended + timedelta(days=29, hours=23))
    assert retention_over(ended, 30, ended + timedelta(days=30))
    assert not retention_over(None, 30, ended + timedelta(days=400))
    assert not retention_over(ended, None, ended + timedelta(days=4000))


def test_retention_days_are_bounded_on_the_policy_and_the_deployment() -> None:
    assert PrivacyPolicy.model_validate({"retention_days": 30}).retention_days == 30
    for bad in (0, 3651, "soon"):
        with pytest.raises(ValidationError):
            PrivacyPolicy.model_validate({"retention_days": bad})
    assert settings_from({"SWITCHBOARD_RETENTION_DAYS": "90"}).retention_days == 90
    assert settings_from({}).retention_days is None
    with pytest.raises(ConfigError, match="SWITCHBOARD_RETENTION_DAYS"):
        settings_from({"SWITCHBOARD_RETENTION_DAYS": "0"})


def _full_state() -> SessionState:
    context = ResponseContext(instructions="Be brief.", max_output_tokens=512, input_item_id="item_1")
    return SessionState(
        phase=Phase.ENDED,
        instructions="You are the payments desk.",
        prompt_blocks=(PromptBlock(name="instructions", text="You are the payments desk."),),
        end_reason="caller_hung_up",
        usage=Usage(input_tokens=100, output_tokens=10, total_tokens=110, responses=2),
        call_id="rtc_1",
        directed=context.model_copy(update={"instructions": f"Tell them: {WORDS}"}),
        realtime=RealtimeCall(
            chain=ToolChain(
                pending=ToolCall(call_id="c1", item_id="i1", response_id="r1", name="echo", output=WORDS),
                calls=3,
                seen=("c1",),
            ),
            compaction=Compaction(
                number=1, forced=False, trigger_input_tokens=9, items_before=4, summary=WORDS
            ),
        ),
        phone=PhoneLine(
            caller="+14155550123",
            dialled="+18005551212",
            asserted_identity="+14155550123",
            route_id="route_1",
            keys={"0": "attention"},
            sip_headers=(("From", "<sip:+14155550123@example.com>"),),
        ),
        live=LiveCall(
            heard=(TranscriptFragment(speaker="caller", event_id="e1", start_ms=0, end_ms=10, text=WORDS),),
            heard_until_ms=10,
            open=(Delegation(id="d1", offset_ms=10, task=WORDS, answer=WORDS),),
            delegations=1,
        ),
        privacy=PrivacyPolicy(retention_days=30),
    )


def test_an_erased_state_keeps_the_metadata_and_the_app_s_configuration() -> None:
    state = _full_state()
    erased = erased_state(state)
    kept = ("phase", "instructions", "prompt_blocks", "end_reason", "usage", "call_id", "privacy", "provider")
    assert {name: getattr(erased, name) for name in kept} == {name: getattr(state, name) for name in kept}
    assert erased.realtime.chain.calls == 3 and erased.realtime.chain.seen == ("c1",)
    assert erased.phone is not None and erased.phone.route_id == "route_1"
    assert erased.phone.keys == {"0": "attention"}
    assert erased.live is not None and erased.live.delegations == 1 and erased.live.heard_until_ms == 10


def test_an_erased_state_holds_none_of_what_was_said_or_who_called() -> None:
    erased = erased_state(_full_state())
    text = erased.model_dump_json()
    assert "0366" not in text and "Elm" not in text
    assert "4155550123" not in text and "8005551212" not in text
    assert erased.realtime.compaction is not None and erased.realtime.compaction.summary is None
    assert erased.realtime.chain.pending is None and erased.directed is None
    assert erased.live is not None and erased.live.open[0].task == "" and erased.live.open[0].answer is None
    # Erasing twice changes nothing.
    assert erased_state(erased) == erased


def test_an_erased_event_keeps_its_type_and_its_controls_ids_and_types() -> None:
    payload = erased_payload("conversation.item.input_audio_transcription.completed")
    assert payload == {"type": "conversation.item.input_audio_transcription.completed", "erased": True}
    assert is_erased_payload(payload)
    assert not is_erased_payload({"type": "x", "erased": True, "transcript": WORDS})
    controls = [
        {
            "id": "ctl_3_0",
            "kind": "control",
            "control": {"type": "response.create", "response": {"instructions": WORDS}},
        },
        {"id": "ctl_3_d1", "kind": "close_call", "call_id": "rtc_1", "reason": WORDS},
    ]
    erased = erased_controls(controls)
    assert erased == [
        {"id": "ctl_3_0", "kind": "control", "type": "response.create", "erased": True},
        {"id": "ctl_3_d1", "kind": "close_call", "type": None, "erased": True},
    ]
    assert erased_controls(erased) == erased


def test_erasure_needs_the_admin_s_permission() -> None:
    assert permission_for("DELETE", "/v1/sessions/sess_1") is Permission.ADMINISTER
    assert permission_for("DELETE", "/v1/callers/+14155550123") is Permission.ADMINISTER
    assert permission_for("GET", "/v1/sessions/sess_1") is Permission.READ
    assert permission_for("POST", "/v1/sessions/sess_1/end") is Permission.STEER
    assert [role for role in Role if Identity("k", "n", role).may(Permission.ADMINISTER)] == [Role.ADMIN]
