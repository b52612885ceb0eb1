"""Recording consent: the notice said before the greeting, declined by key or by the model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.api.requests import RouteSpec, SessionSpec
from pipeline.phone.sip import PhoneLine
from pipeline.privacy.policy import Consent, PrivacyPolicy
from pipeline.realtime.controls import ItemCreate, ResponseCreate
from pipeline.realtime.turns import SAY_EXACTLY
from pipeline.session.consent import DECLINE_RECORDING, SAY_FIRST, greeting_with_consent
from pipeline.session.state import Greeting
from pipeline.session.step import LogEntry, Step
from pipeline.session.wire import SessionUpdate
from tests.pipeline import events as ev

NOTICE = "This call is recorded for quality. Press 9 if you would rather it were not."
CONSENT = {"say": NOTICE, "decline_key": "9"}
LINE = PhoneLine(caller="+14155550100", dialled="+18005551212", route_id="route_1", keys={"0": "attention"})


def _created(greeting: dict[str, Any] | None = None, phone: bool = False) -> dict[str, Any]:
    created = {**ev.session_created(), "privacy": {"consent": CONSENT}}
    if greeting is not None:
        created["greeting"] = greeting
    if phone:
        created["phone"] = LINE.model_dump(mode="json")
    return created


def _call(greeting: dict[str, Any] | None = None, phone: bool = False) -> list[dict[str, Any]]:
    attached = {**ev.call_attached(), "medium": "sip" if phone else "webrtc"}
    return [_created(greeting, phone), ev.admission_begun(), attached, ev.sideband_connected()]


def _entries(step: Step) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data) for e in step.effects if isinstance(e, LogEntry)]


def _key(key: str) -> dict[str, Any]:
    return {"type": "input_audio_buffer.dtmf_event_received", "event": key, "received_at": 1_750_000_000}


def test_the_notice_comes_before_the_greeting_s_words_or_is_the_greeting() -> None:
    consent = Consent.model_validate(CONSENT)
    assert greeting_with_consent(None, consent) == Greeting(say=NOTICE)
    assert greeting_with_consent(Greeting(say="Hello!"), consent) == Greeting(say=f"{NOTICE} Hello!")
    replied = greeting_with_consent(Greeting(reply="Greet the caller by name."), consent)
    assert replied == Greeting(reply=SAY_FIRST.format(notice=NOTICE, reply="Greet the caller by name."))
    assert greeting_with_consent(Greeting(say="Hello!"), None) == Greeting(say="Hello!")


def test_a_session_with_consent_says_the_notice_first_and_offers_the_decline_tool() -> None:
    _, steps = ev.fold([*_call(), ev.session_updated()])
    [configure] = [c for step in steps for c in step.controls if isinstance(c, SessionUpdate)]
    assert DECLINE_RECORDING in [tool["name"] for tool in configure.session["tools"]]
    [greet] = [c for c in steps[-1].controls if isinstance(c, ResponseCreate)]
    assert greet.response is not None and greet.response.instructions == SAY_EXACTLY.format(text=NOTICE)


def test_the_decline_key_switches_the_call_to_metadata_once_and_other_keys_do_as_before() -> None:
    state = ev.state_after([*_call(phone=True), ev.session_updated()])
    assert state.storage == "full"

    declined = ev.step_of(state, _key("9"))

    assert _entries(declined) == [("call.key", {"key": "9"}), ("consent.declined", {"by": "key"})]
    assert declined.state.storage == "metadata"
    again = ev.step_of(declined.state, _key("9"))
    assert _entries(again) == [("call.key", {"key": "9"})] and again.state == declined.state
    attention = ev.step_of(state, _key("0"))
    assert "attention.requested" in [kind for kind, _ in _entries(attention)]
    assert attention.state.storage == "full"


def test_the_model_declines_with_its_built_in_tool_and_the_call_goes_on() -> None:
    state = ev.state_after(
        [
            *_call(),
            ev.session_updated(),
            ev.user_final("item_u1", "Please don't record me."),
            ev.response_created("r1"),
        ]
    )

    called = ev.step_of(state, ev.function_call("call_d", "r1", name=DECLINE_RECORDING, arguments="{}"))

    assert called.state.storage == "metadata"
    kinds = [kind for kind, _ in _entries(called)]
    assert kinds == ["tool.call", "tool.result", "consent.declined"]
    assert _entries(called)[-1] == ("consent.declined", {"by": "model"})
    done = ev.step_of(called.state, ev.response_done("r1"))
    [output] = [c for c in done.controls if isinstance(c, ItemCreate)]
    assert output.item["call_id"] == "call_d"
    assert json.loads(output.item["output"])["result"]["recording"] == "declined"
    assert any(isinstance(c, ResponseCreate) for c in done.controls)


def test_without_consent_the_tool_is_neither_offered_nor_taken() -> None:
    _, steps = ev.fold(
        [ev.session_created(), ev.admission_begun(), ev.call_attached(), ev.sideband_connected()]
    )
    configures = [c for step in steps for c in step.controls if isinstance(c, SessionUpdate)]
    assert DECLINE_RECORDING not in [t["name"] for c in configures for t in c.session.get("tools", [])]
    state = ev.state_after(
        [
            ev.session_created(),
            ev.admission_begun(),
            ev.call_attached(),
            ev.sideband_connected(),
            ev.session_updated(),
            ev.user_final("item_u1", "Don't record me."),
            ev.response_created("r1"),
        ]
    )
    called = ev.step_of(state, ev.function_call("call_d", "r1", name=DECLINE_RECORDING, arguments="{}"))
    assert called.state.storage == "full"


def test_a_consent_policy_is_checked_where_it_is_given() -> None:
    with pytest.raises(ValidationError, match="decline_key"):
        PrivacyPolicy.model_validate({"consent": {"say": NOTICE, "decline_key": "x"}})
    with pytest.raises(ValidationError):
        PrivacyPolicy.model_validate({"consent": {"say": ""}})
    with pytest.raises(ValidationError, match="built-in consent tool"):
        SessionSpec.model_validate(
            {"instructions": "x", "tools": [DECLINE_RECORDING], "privacy": {"consent": CONSENT}}
        )
    with pytest.raises(ValidationError, match="declines recording"):
        RouteSpec.model_validate(
            {
                "number": "+18005551212",
                "keys": {"9": "end"},
                "session": {"instructions": "x", "privacy": {"consent": CONSENT}},
            }
        )
    RouteSpec.model_validate(
        {
            "number": "+18005551212",
            "keys": {"0": "end"},
            "session": {"instructions": "x", "privacy": {"consent": CONSENT}},
        }
    )
