"""The numbers a campaign dials: E.164 checked with a message that says what to write, and the
zone a number is in when libphonenumber knows exactly one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline import erasure
from pipeline.errors import BadInput, MalformedNumber
from pipeline.outbound.numbers import checked_number, is_e164, number_refusal, timezone_of
from pipeline.outbound.window import is_timezone


def test_is_e164_is_the_erasure_check() -> None:
    """One definition of an E.164 number for the whole house."""
    assert is_e164 is erasure.is_e164


def test_a_checked_number_is_returned_as_it_is() -> None:
    """An E.164 number passes unchanged."""
    assert checked_number("+14155550123") == "+14155550123"


@pytest.mark.parametrize("number", ["4155550123", "+1 415 555 0123", "+0123456", "", "+1" + "2" * 15])
def test_a_number_that_is_not_e164_is_a_bad_input_naming_it(number: str) -> None:
    """A malformed number raises MalformedNumber (a BadInput: 422), quoting it and the form."""
    with pytest.raises(MalformedNumber) as refused:
        checked_number(number)
    assert isinstance(refused.value, BadInput)
    assert repr(number) in str(refused.value)
    assert "E.164" in str(refused.value)


def test_a_long_paste_is_quoted_only_in_part() -> None:
    """The refusal quotes the first 40 characters, not a whole pasted file."""
    refusal = number_refusal("+1" * 500)
    assert refusal is not None
    assert len(refusal) < 200


@given(st.text(max_size=30))
def test_a_number_is_refused_exactly_when_it_is_not_e164(number: str) -> None:
    """checked_number and number_refusal agree with is_e164 on any text."""
    assert (number_refusal(number) is None) == is_e164(number)
    if is_e164(number):
        assert checked_number(number) == number
    else:
        with pytest.raises(MalformedNumber):
            checked_number(number)


@pytest.mark.parametrize(
    ("number", "zone"),
    [
        ("+14155550123", "America/Los_Angeles"),
        ("+12125550123", "America/New_York"),
        ("+33612345678", "Europe/Paris"),
        ("+4930123456", "Europe/Berlin"),
        ("+5511987654321", "America/Sao_Paulo"),
    ],
)
def test_a_number_in_one_zone_has_it(number: str, zone: str) -> None:
    """A number libphonenumber places in one zone is in it."""
    assert timezone_of(number) == zone


@pytest.mark.parametrize(
    "number",
    [
        "+12085550123",  # Idaho's 208 spans Boise (Mountain) and the panhandle (Pacific)
        "+79161234567",  # Russian mobiles: every zone of Russia
        "+34612345678",  # Spanish mobiles: Madrid or the Canaries
        "+15555550123",  # no such area code: libphonenumber says Etc/Unknown
        "+80012345678",  # international freephone: no place at all
        "14155550123",  # no plus: not E.164
        "not a number",
    ],
)
def test_a_number_in_several_zones_or_none_has_no_zone(number: str) -> None:
    """Several zones, no zone, or no number: None (the contact must say its own)."""
    assert timezone_of(number) is None


@given(st.one_of(st.text(max_size=20), st.from_regex(r"\+[1-9][0-9]{1,14}", fullmatch=True)))
def test_a_number_s_zone_is_a_known_zone_or_none(number: str) -> None:
    """Whatever the text, timezone_of answers a zone this machine knows, or None; it never raises."""
    zone = timezone_of(number)
    assert zone is None or is_timezone(zone)
