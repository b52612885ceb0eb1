"""The time zone a number a campaign dials is in, when libphonenumber's geography says.

One zone for most numbers; several for a country or area code that spans zones (a US area code
across a state line, Russia's mobiles), and then the contact must say its `timezone`. What a
number is, and the one spelling it is kept in, is `pipeline.phone.numbers`'s.
"""

from __future__ import annotations

import phonenumbers
from phonenumbers import timezone as number_zones

from pipeline.call.errors import MalformedNumber
from pipeline.outbound.window import is_timezone
from pipeline.phone.numbers import e164

__all__ = ["timezone_of"]


def timezone_of(number: str) -> str | None:
    """The IANA zone a number is in, when libphonenumber knows exactly one; None when it maps
    to several (the contact must say its own) or none, or is no valid number at all."""
    try:
        parsed = phonenumbers.parse(e164(number), None)
    except MalformedNumber:
        return None
    zones = [zone for zone in number_zones.time_zones_for_number(parsed) if is_timezone(zone)]
    return zones[0] if len(zones) == 1 else None
