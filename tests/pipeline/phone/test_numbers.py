"""What a phone number is to Switchboard: parsed by libphonenumber, refused with a reason when it
is no valid number, and kept in one spelling, E.164, whatever separators or national trunk
prefix it was written with (issue 44: a do-not-call entry was bypassed by the same number
written with its trunk prefix)."""

from __future__ import annotations

import re

import phonenumbers
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.call.errors import BadInput, MalformedNumber
from pipeline.phone.numbers import e164, kept_number

_E164 = re.compile(r"\+[1-9][0-9]{1,14}")


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("+442071234567", "+442071234567"),
        ("+4402071234567", "+442071234567"),  # London, with the trunk prefix 0 inside
        ("+49301234567", "+49301234567"),
        ("+490301234567", "+49301234567"),  # Berlin, likewise
        ("+44 (0)20 7123 4567", "+442071234567"),
        ("+1 (415) 555-0123", "+14155550123"),
        ("+1.415.555.0123", "+14155550123"),
        ("+390612345678", "+390612345678"),  # Rome: Italy keeps its leading 0
    ],
)
def test_a_number_is_kept_in_its_e164_form(written: str, kept: str) -> None:
    """Separators and a national trunk prefix inside an international number go; one subscriber
    has one spelling."""
    assert e164(written) == kept


def _regions_with_a_trunk_prefix() -> list[str]:
    return sorted(
        region
        for region in phonenumbers.SUPPORTED_REGIONS
        if phonenumbers.PhoneMetadata.metadata_for_region(region).national_prefix
        and phonenumbers.example_number(region) is not None
    )


@pytest.mark.parametrize("region", _regions_with_a_trunk_prefix())
def test_every_country_s_trunk_prefix_inside_an_e164_number_is_dropped(region: str) -> None:
    """For each country with a national trunk prefix, its example number written as `+`, the
    country code, the prefix and the number is that example number."""
    example = phonenumbers.example_number(region)
    prefix = phonenumbers.PhoneMetadata.metadata_for_region(region).national_prefix
    written = f"+{example.country_code}{prefix}{phonenumbers.national_significant_number(example)}"
    assert e164(written) == phonenumbers.format_number(example, phonenumbers.PhoneNumberFormat.E164)


@pytest.mark.parametrize(
    ("written", "why"),
    [
        ("+1415", "too short for a number of +1"),
        ("+99912345678", "no country has its country code"),
        ("+15550100000", "no number of +1 is given from that range"),
        ("+1415555012345678", "not the length of a number of +1"),
        ("+0123456", "no country has its country code"),
        ("+44", "is not a phone number: too short"),
        ("+1234567890123456789012", "is not a phone number: too long"),
    ],
)
def test_a_number_that_is_no_valid_number_is_refused_saying_why(written: str, why: str) -> None:
    """Too short, no such country, a range nobody is given a number from, too long: refused
    (MalformedNumber, a BadInput: 422), quoting it and the reason."""
    with pytest.raises(MalformedNumber) as refused:
        e164(written)
    assert isinstance(refused.value, BadInput) and refused.value.code == "malformed_number"
    assert repr(written) in str(refused.value) and why in str(refused.value)


@pytest.mark.parametrize(
    "written",
    [
        "4155550123",
        "14155550123",
        "+1 800 FLOWERS",
        "tel:+14155550123",
        "+14155550123x12",
        " +14155550123",
        "",
        "+",
    ],
)
def test_a_number_not_written_as_e164_is_refused(written: str) -> None:
    """No `+` and country code (guessing the country calls the wrong person), letters, an
    extension or a URI: refused, saying what a number looks like."""
    with pytest.raises(MalformedNumber) as refused:
        e164(written)
    assert repr(written) in str(refused.value) and "E.164" in str(refused.value)


def test_a_long_paste_is_quoted_only_in_part() -> None:
    """The refusal quotes the first 40 characters, not a whole pasted file."""
    with pytest.raises(MalformedNumber) as refused:
        e164("+1" * 500)
    assert len(str(refused.value)) < 300


@given(st.one_of(st.text(max_size=30), st.from_regex(r"\+[1-9][0-9 ()\-]{1,20}", fullmatch=True)))
def test_whatever_is_written_is_refused_or_kept_as_a_valid_e164_number(written: str) -> None:
    """Any text: a MalformedNumber, or an E.164 string that is a valid number and is its own
    form (kept twice is kept once)."""
    try:
        kept = e164(written)
    except MalformedNumber:
        return
    assert _E164.fullmatch(kept)
    assert phonenumbers.is_valid_number(phonenumbers.parse(kept, None))
    assert e164(kept) == kept


def test_a_sip_header_s_number_is_kept_in_e164_when_it_is_one_else_as_it_came() -> None:
    """What a SIP header names: a valid number in its E.164 form; `anonymous`, an extension or
    a national number without its country code, as it came."""
    assert kept_number("+4402071234567") == "+442071234567"
    for heard in ("anonymous", "1000", "14155550123", "+1415", ""):
        assert kept_number(heard) == heard
