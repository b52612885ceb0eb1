"""The zone a number a campaign dials is in, when libphonenumber knows exactly one (what a number
is: tests/pipeline/phone/test_numbers.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.outbound.numbers import timezone_of
from pipeline.outbound.window import is_timezone


@pytest.mark.parametrize(
    ("number", "zone"),
    [
        ("+14155550123", "America/Los_Angeles"),
        ("+12125550123", "America/New_York"),
        ("+33612345678", "Europe/Paris"),
        ("+4930123456", "Europe/Berlin"),
        ("+490301234567", "Europe/Berlin"),  # with the trunk prefix: the same number
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
        "+15555550123",  # no such area code: no valid number
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
