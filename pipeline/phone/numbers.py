"""Phone numbers: what Switchboard takes as one, and the one spelling it keeps, compares and dials.

A number is written in E.164 — a `+`, the country code, the subscriber's number — and may carry
the separators people write between digits (spaces, `-`, `.`, `(` and `)`):
`+44 (0)20 7123 4567`. libphonenumber (`phonenumbers`) parses it, and it is kept, compared and
dialled as E.164 digits only (`+442071234567`), so one subscriber has one spelling. In
particular the national trunk prefix some write inside an international number (`+44 020…`,
`+49 030…`) is dropped, as a carrier drops it: a do-not-call entry for `+442071234567` stops a
dial to `+4402071234567`, because both are that number.

A number libphonenumber does not hold valid for its country is refused: too short or too long
(`+1415`), a country code no country has (`+99912345678`), a range no number is given from
(`+15550100000`). Dialled, it reaches nobody, or somebody else. So is a number without its `+`
and country code: guessing the country would call the wrong person.

What a SIP header says a call came from or went to is not checked here but kept as it came
when it is no such number (`anonymous`, an extension, a number without its country code):
`kept_number`.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated

import phonenumbers
from pydantic import AfterValidator

from pipeline.call.errors import MalformedNumber

__all__ = ["E164Number", "e164", "kept_number"]

# Only this much of a refused number is quoted back: enough to recognise it, not a whole paste.
QUOTED_NUMBER_CHARS = 40
# Longer than any E.164 number (15 digits) written with a separator between every two digits;
# what is longer is no number, and is refused before it is parsed.
MAXIMUM_WRITTEN_CHARS = 40

# A plus, then digits and the visual separators of RFC 3966 (and parentheses): no letters (a
# parser would turn `+1 800 FLOWERS` into digits), no extension, no URI scheme.
_WRITTEN = re.compile(r"\+[0-9 ().\-]*[0-9][0-9 ().\-]*")

_TOO_SHORT = {phonenumbers.ValidationResult.TOO_SHORT, phonenumbers.ValidationResult.IS_POSSIBLE_LOCAL_ONLY}


def e164(written: str) -> str:
    """The E.164 form of a number (`+44 (0)20 7123 4567` → `+442071234567`); `MalformedNumber`
    (422) saying why when it is not a valid number written with its `+` and country code."""
    if len(written) > MAXIMUM_WRITTEN_CHARS or not _WRITTEN.fullmatch(written):
        raise MalformedNumber(
            f"{written[:QUOTED_NUMBER_CHARS]!r} is not an E.164 number (a '+', the country code and "
            "the number, as in +14155550123; spaces, dashes, dots and parentheses between the digits "
            "are taken)"
        )
    kept, refusal = _parsed(written)
    if refusal is not None:
        raise MalformedNumber(refusal)
    return kept


# A number is often checked twice running (a request body's field, then the row made of it) and
# a parse is tens of microseconds: the last few thousand answers are kept (each key at most
# `MAXIMUM_WRITTEN_CHARS` long, so the cache stays under a megabyte). `_parsed` is pure.
@functools.lru_cache(maxsize=4_096)
def _parsed(written: str) -> tuple[str, str | None]:
    """(the E.164 form, None), or ("", why it is no number), for a number written as E.164."""
    quoted = repr(written)
    try:
        parsed = phonenumbers.parse(written, None)
    except phonenumbers.NumberParseException as error:
        if error.error_type == phonenumbers.NumberParseException.INVALID_COUNTRY_CODE:
            return "", f"{quoted} is not a phone number: no country has its country code"
        if error.error_type == phonenumbers.NumberParseException.TOO_LONG:
            return "", f"{quoted} is not a phone number: too long"
        return "", f"{quoted} is not a phone number: too short"
    if not phonenumbers.is_valid_number(parsed):
        country = f"+{parsed.country_code}"
        possible = phonenumbers.is_possible_number_with_reason(parsed)
        if possible == phonenumbers.ValidationResult.INVALID_COUNTRY_CODE:
            why = "no country has its country code"
        elif possible in _TOO_SHORT:
            why = f"too short for a number of {country}"
        elif possible in (
            phonenumbers.ValidationResult.TOO_LONG,
            phonenumbers.ValidationResult.INVALID_LENGTH,
        ):
            why = f"not the length of a number of {country}"
        else:
            why = f"no number of {country} is given from that range"
        return "", f"{quoted} is not a valid phone number: {why}"
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164), None


def kept_number(heard: str) -> str:
    """A number a SIP header names, as Switchboard keeps it: its E.164 form when it is a valid
    number written with its country code, else the text as it came (a name, `anonymous`, an
    extension or a national number are not guessed at)."""
    try:
        return e164(heard)
    except MalformedNumber:
        return heard


def _checked(value: str) -> str:
    try:
        return e164(value)
    except MalformedNumber as refused:
        raise ValueError(str(refused)) from None


# A field of a request body that holds a number (to dial, to dial from, never to dial): its
# E.164 form once validated, else a 422 saying why.
E164Number = Annotated[str, AfterValidator(_checked)]
