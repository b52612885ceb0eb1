"""Outbound request bodies: frozen, nothing unknown, every field bounded, and each refusal
saying what is wrong (a 422)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.api.requests import RouteSpec, SessionSpec
from pipeline.call.errors import NotSupported
from pipeline.outbound.specs import (
    MAXIMUM_JSON_CONTACTS,
    CallSpec,
    CampaignSpec,
    SuppressionSpec,
    TrunkSpec,
    VoicemailPolicy,
    campaign_refusal,
    outbound_refusal,
    trunk_host_refusal,
)

NOW = datetime(2024, 6, 4, 14, 0, tzinfo=UTC)
TRUNK = {
    "name": "twilio-us",
    "url": "sips:example.pstn.twilio.com:5061",
    "username": "switchboard",
    "password": "s3cret",
    "caller_number": "+14155550100",
}
SESSION = {"instructions": "Remind {name} of the appointment."}
WINDOW = {
    "timezone": "America/New_York",
    "days": ["mon", "tue", "wed", "thu", "fri"],
    "start": "09:00",
    "end": "17:00",
}


def _refusal(model: type[Any], body: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as refused:
        model.model_validate(body)
    return str(refused.value)


# ── trunks ──────────────────────────────────────────────────────────────────────────────


def test_a_trunk_is_taken_and_its_password_kept_out_of_its_repr() -> None:
    """A trunk over TLS with credentials and a caller number; the password never prints."""
    trunk = TrunkSpec.model_validate(TRUNK)
    assert trunk.password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(trunk)
    assert "s3cret" not in str(trunk.model_dump())


@pytest.mark.parametrize(
    "url",
    [
        "sips:sip.example.com",
        "sips:sip.example.com:5061",
        "sips:SIP.Example.COM.",
        "sips:8.8.8.8:5061",
        "sips:[2001:4860:4860::8888]:5061",
    ],
)
def test_a_trunk_url_is_sips_with_a_public_host(url: str) -> None:
    """A public host name, a public IPv4 address, or a public IPv6 one in brackets; a port or none."""
    assert TrunkSpec.model_validate({**TRUNK, "url": url}).url == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sip:sip.example.com", "sips:host"),
        ("https://sip.example.com", "sips:host"),
        ("sips:user@sip.example.com", "sips:host"),
        ("sips:sip.example.com;transport=tls", "sips:host"),
        ("sips:sip.example.com:0", "port 0 is not 1..65535"),
        ("sips:sip.example.com:70000", "port 70000 is not 1..65535"),
        ("sips:localhost", "not a public host name"),
        ("sips:pbx.localhost", "names this machine or a local network"),
        ("sips:printer.local", "names this machine or a local network"),
        ("sips:pbx.corp.internal", "names this machine or a local network"),
        ("sips:127.0.0.1", "not a public address"),
        ("sips:10.1.2.3:5061", "not a public address"),
        ("sips:192.168.1.10", "not a public address"),
        ("sips:172.16.0.1", "not a public address"),
        ("sips:169.254.169.254", "not a public address"),
        ("sips:100.64.0.1", "not a public address"),
        ("sips:0.0.0.0", "not a public address"),
        ("sips:[::1]", "not a public address"),
        ("sips:[fd00::1]", "not a public address"),
        ("sips:[::ffff:127.0.0.1]", "not a public address"),
        ("sips:127.1", "not a public host name"),
        ("sips:2130706433", "not a public host name"),
        ("sips:0x7f000001", "not a public host name"),
        ("sips:-bad-.example.com", "not a public host name"),
        ("sips:2001:4860:4860::8888", "sips:host"),
    ],
)
def test_a_trunk_url_that_is_not_tls_or_reaches_inside_is_refused(url: str, message: str) -> None:
    """Plain SIP, other schemes and parameters, bad ports, loopback, private, link-local and
    mapped addresses, local names and numeric hosts a resolver would read as an address."""
    assert message in _refusal(TrunkSpec, {**TRUNK, "url": url})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", "Twilio US", "1 to 64 of a-z, 0-9, _ and -"),
        ("name", "", "1 to 64"),
        ("username", "", "at least 1 character"),
        ("username", "a" * 257, "at most 256 characters"),
        ("username", "bob\r\nX-Injected: 1", "control character"),
        ("password", "", "password is 1 to 256 characters"),
        ("password", "p" * 257, "password is 1 to 256 characters"),
        ("password", "pa\x00ss", "control character"),
        ("caller_number", "4155550100", "not an E.164 number"),
    ],
)
def test_a_trunk_s_fields_are_bounded(field: str, value: str, message: str) -> None:
    """Name, credentials and caller number are checked, each refusal naming its rule."""
    assert message in _refusal(TrunkSpec, {**TRUNK, field: value})


def test_a_trunk_refuses_fields_it_does_not_know() -> None:
    """extra="forbid": a misspelt field is an error, not silently dropped."""
    assert "Extra inputs are not permitted" in _refusal(TrunkSpec, {**TRUNK, "pasword": "x"})


def test_host_refusal_reads_only_the_host() -> None:
    """The host check on its own, for the dialler to call again on what a name resolves to."""
    assert trunk_host_refusal("sip.example.com") is None
    assert trunk_host_refusal("10.0.0.1") is not None


# ── voicemail policy ────────────────────────────────────────────────────────────────────


def test_a_voicemail_policy_hangs_up_by_default() -> None:
    """No policy is hang up, with no message."""
    assert VoicemailPolicy() == VoicemailPolicy(action="hangup", message=None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"action": "leave_message"}, "leave_message needs the message"),
        ({"action": "leave_message", "message": "   "}, "leave_message needs the message"),
        ({"action": "leave_message", "message": "x" * 1_001}, "at most 1000 characters"),
        ({"action": "hangup", "message": "Hi"}, "only with action leave_message"),
        ({"action": "beep"}, "'hangup' or 'leave_message'"),
    ],
)
def test_a_voicemail_policy_says_what_it_leaves(body: dict[str, Any], message: str) -> None:
    """leave_message needs a message of at most 1,000 characters; hangup takes none."""
    assert message in _refusal(VoicemailPolicy, body)


# ── campaigns ───────────────────────────────────────────────────────────────────────────


def _campaign(**fields: Any) -> dict[str, Any]:
    return {
        "name": "June reminders",
        "session": SESSION,
        "contacts": [{"to": "+14155550123", "vars": {"name": "Dana"}}],
        **fields,
    }


def test_a_campaign_takes_its_defaults() -> None:
    """One call at a time, no window, one attempt each, hang up on machines, no expiry."""
    campaign = CampaignSpec.model_validate(_campaign())
    assert campaign.max_concurrent == 1
    assert campaign.window is None
    assert campaign.retry.no_answer.attempts == 1
    assert campaign.voicemail.action == "hangup"
    assert campaign.expires_at is None
    assert campaign.contacts[0].vars == {"name": "Dana"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": ""}, "at least 1 character"),
        ({"name": "   "}, "name is empty"),
        ({"contacts": []}, "at least 1 item"),
        (
            {"contacts": [{"to": f"+1415555{i:04d}"} for i in range(MAXIMUM_JSON_CONTACTS + 1)]},
            "at most 1000 items",
        ),
        (
            {"contacts": [{"to": "+14155550123"}, {"to": "+14155550123"}]},
            "+14155550123 is contacts[0] and contacts[1]",
        ),
        ({"contacts": [{"to": "0415550123"}]}, "not an E.164 number"),
        ({"max_concurrent": 0}, "greater than or equal to 1"),
        ({"max_concurrent": 101}, "less than or equal to 100"),
        ({"max_concurrent": "5"}, "valid integer"),
        ({"trunk": "Main Trunk"}, "not a trunk's name"),
        ({"window": {**WINDOW, "days": []}}, "no days never opens"),
        ({"window": {**WINDOW, "start": "20:00", "end": "08:00"}}, "cannot run across midnight"),
        ({"retry": {"busy": {"attempts": 20}}}, "less than or equal to 10"),
        ({"voicemail": {"action": "leave_message"}}, "needs the message"),
        ({"expires_at": "2024-07-01T00:00:00"}, "timezone info"),
        ({"session": "instructions"}, "valid dictionary"),
        ({"schedule": "daily"}, "Extra inputs are not permitted"),
    ],
)
def test_a_campaign_body_that_is_wrong_is_refused_saying_why(fields: dict[str, Any], message: str) -> None:
    """Each field bounded and checked; a window that never opens or runs across midnight refused."""
    assert message in _refusal(CampaignSpec, _campaign(**fields))


def test_a_contact_with_no_zone_in_a_window_with_none_is_refused() -> None:
    """An Idaho number spans two zones: with a window in no zone, the contact must say its own."""
    bare_window = {key: value for key, value in WINDOW.items() if key != "timezone"}
    body = _campaign(window=bare_window, contacts=[{"to": "+14155550123"}, {"to": "+12085550123"}])
    assert "contacts[1]: +12085550123: its number does not tell its time zone" in _refusal(CampaignSpec, body)
    body["contacts"][1]["timezone"] = "America/Boise"
    assert CampaignSpec.model_validate(body).contacts[1].zone == "America/Boise"


def test_a_campaign_that_has_expired_is_refused_at_now() -> None:
    """An expiry at or before now: the caller's check, since it needs the time."""
    past = CampaignSpec.model_validate(_campaign(expires_at=(NOW - timedelta(minutes=1)).isoformat()))
    refusal = campaign_refusal(past, NOW)
    assert refusal is not None
    assert re.search(r"expires_at .* is not after now", refusal)
    assert (
        campaign_refusal(CampaignSpec.model_validate(_campaign(expires_at=NOW.isoformat())), NOW) is not None
    )
    assert campaign_refusal(CampaignSpec.model_validate(_campaign()), NOW) is None


def test_a_campaign_whose_window_opens_for_nobody_before_it_expires_is_refused() -> None:
    """Friday 18:00 in New York, expiring before Monday 09:00: it would never dial."""
    friday_evening = datetime(2024, 6, 7, 22, 0, tzinfo=UTC)
    sunday = friday_evening + timedelta(days=2)
    campaign = CampaignSpec.model_validate(
        _campaign(window=WINDOW, expires_at=sunday.isoformat(), contacts=[{"to": "+12125550123"}])
    )
    assert "does not open for any contact before expires_at" in (
        campaign_refusal(campaign, friday_evening) or ""
    )
    later = campaign.model_copy(update={"expires_at": sunday + timedelta(days=2)})
    assert campaign_refusal(later, friday_evening) is None


# ── single calls and suppressions ───────────────────────────────────────────────────────


def test_a_call_is_a_number_a_session_and_vars() -> None:
    """One call: E.164 to, an optional trunk, the session, its vars made strings."""
    call = CallSpec.model_validate(
        {"to": "+14155550123", "session": SESSION, "vars": {"name": "Dana", "n": 2}}
    )
    assert call.vars == {"name": "Dana", "n": "2"}
    assert "not an E.164 number" in _refusal(CallSpec, {"to": "555-0123", "session": SESSION})
    assert "not a trunk's name" in _refusal(
        CallSpec, {"to": "+14155550123", "session": SESSION, "trunk": "A B"}
    )
    assert "a var is a string or a number" in _refusal(
        CallSpec, {"to": "+14155550123", "session": SESSION, "vars": {"x": None}}
    )


def test_a_suppression_is_a_number_and_a_short_reason() -> None:
    """E.164, and a reason of at most 200 characters."""
    assert SuppressionSpec.model_validate({"number": "+14155550123", "reason": "asked not to be called"})
    assert "not an E.164 number" in _refusal(SuppressionSpec, {"number": "14155550123"})
    assert "at most 200 characters" in _refusal(
        SuppressionSpec, {"number": "+14155550123", "reason": "x" * 201}
    )


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("+4402071234567", "+442071234567"),
        ("+490301234567", "+49301234567"),
        ("+1 415 555 0123", "+14155550123"),
    ],
)
def test_every_number_a_body_holds_is_kept_in_its_e164_form(written: str, kept: str) -> None:
    """A call's `to`, a trunk's caller number, a suppressed number, a campaign's contact, a
    route's number: each in the one spelling numbers are compared, stored and dialled in."""
    assert CallSpec.model_validate({"to": written, "session": SESSION}).to == kept
    assert TrunkSpec.model_validate({**TRUNK, "caller_number": written}).caller_number == kept
    assert SuppressionSpec.model_validate({"number": written}).number == kept
    campaign = CampaignSpec.model_validate({"name": "n", "session": SESSION, "contacts": [{"to": written}]})
    assert campaign.contacts[0].to == kept
    assert RouteSpec.model_validate({"number": written, "session": {"instructions": "x"}}).number == kept


@pytest.mark.parametrize("written", ["+1415", "+99912345678"])
def test_a_number_that_is_no_valid_number_is_refused_in_every_body(written: str) -> None:
    """Too short, no such country code: refused wherever a number is taken (422)."""
    for spec, body in (
        (CallSpec, {"to": written, "session": SESSION}),
        (TrunkSpec, {**TRUNK, "caller_number": written}),
        (SuppressionSpec, {"number": written}),
        (CampaignSpec, {"name": "n", "session": SESSION, "contacts": [{"to": written}]}),
        (RouteSpec, {"number": written, "session": {"instructions": "x"}}),
    ):
        assert "not a valid phone number" in _refusal(spec, body) or "not a phone number" in _refusal(
            spec, body
        )


def test_two_spellings_of_one_number_are_one_contact() -> None:
    """A campaign's JSON contacts are compared in their E.164 form: the same number twice is refused."""
    refusal = _refusal(
        CampaignSpec,
        {"name": "n", "session": SESSION, "contacts": [{"to": "+442071234567"}, {"to": "+44 020 7123 4567"}]},
    )
    assert "+442071234567 is contacts[0] and contacts[1]" in refusal


def test_request_bodies_are_frozen() -> None:
    """A validated body cannot be changed in place."""
    suppression = SuppressionSpec.model_validate({"number": "+14155550123"})
    with pytest.raises(ValidationError, match="frozen"):
        suppression.number = "+14155550124"  # type: ignore[misc]


def test_only_a_provider_that_places_calls_may_call_out() -> None:
    """A Live session may call out; a Realtime one is refused, naming its provider."""
    assert outbound_refusal(SessionSpec.model_validate({"provider": "live", "instructions": "Hi."})) is None

    refused = outbound_refusal(SessionSpec.model_validate({"instructions": "Hi."}))

    assert isinstance(refused, NotSupported)
    assert refused.code == "not_supported_on_realtime"
    assert "call" in str(refused)
