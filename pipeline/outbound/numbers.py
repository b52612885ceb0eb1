"""The numbers a campaign dials: E.164 only, and the time zone a number is in when it says.

A number is dialled as written, `+` and country code first: a number without its country code
cannot be placed on an international trunk, and guessing the country would call the wrong
person. Its zone comes from libphonenumber's geography: one zone for most numbers; several for a
country or area code that spans zones (a US area code across a state line, Russia's mobiles),
and then the contact must say its `timezone`.
"""

from __future__ import annotations

from typing import Annotated

import phonenumbers
from phonenumbers import timezone as number_zones
from pydantic import AfterValidator

from pipeline.erasure import is_e164
from pipeline.errors import MalformedNumber
from pipeline.outbound.window import is_timezone

__all__ = ["E164Number", "checked_number", "is_e164", "number_refusal", "timezone_of"]

# Only this much of a refused number is quoted back: enough to recognise it, not a whole paste.
QUOTED_NUMBER_CHARS = 40


def number_refusal(number: str) -> str | None:
    """Why `number` cannot be dialled, or None when it is an E.164 number."""
    if is_e164(number):
        return None
    return (
        f"{number[:QUOTED_NUMBER_CHARS]!r} is not an E.164 number "
        "(a '+', the country code and the number, 2 to 15 digits, as in +14155550123)"
    )


def checked_number(number: str) -> str:
    """`number` when it is E.164, else `MalformedNumber` (422) saying what it should look like."""
    refusal = number_refusal(number)
    if refusal is not None:
        raise MalformedNumber(refusal)
    return number


def timezone_of(number: str) -> str | None:
    """The IANA zone an E.164 number is in, when libphonenumber knows exactly one; None when it
    maps to several (the contact must say its own) or none, or is no number at all."""
    if not is_e164(number):
        return None
    try:
        parsed = phonenumbers.parse(number, None)
    except phonenumbers.NumberParseException:
        return None
    zones = [zone for zone in number_zones.time_zones_for_number(parsed) if is_timezone(zone)]
    return zones[0] if len(zones) == 1 else None


def _e164(value: str) -> str:
    refusal = number_refusal(value)
    if refusal is not None:
        raise ValueError(refusal)
    return value


# A field of a request body that holds a number to dial (or to dial from): E.164, else a 422
# saying why.
E164Number = Annotated[str, AfterValidator(_e164)]
