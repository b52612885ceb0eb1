"""Phone calls: what a SIP call announces, which route answers the number dialled, and why a
call is turned away.

The provider announces a phone call with a `realtime.call.incoming` webhook carrying the call's
SIP headers. They are untrusted metadata: kept as they came (bounded), and used only to pick a
route by the number dialled (the `To` header's user part, or another configured header). The
numbers they name (who called, which number, who the carrier asserts) are kept in their E.164
form when they are valid numbers (`pipeline.phone.numbers.kept_number`), so a route, the do-not-call
list and an erasure compare them as they compare any other number; else as they came.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pipeline.phone.numbers import kept_number

# A route's number: a number ("+18005551212"), a prefix ("+1800*"), or "*" for any number.
ROUTE_NUMBER = re.compile(r"\+?[0-9]{1,20}\*?|\*")
# The user part of a SIP or tel URI, with or without a display name and angle brackets.
_URI_USER = re.compile(r"(?:sips?|tel):([^@;>?\s]+)", re.IGNORECASE)
# Visual separators a dialled number may carry (RFC 3966): not part of the number.
_SEPARATORS = str.maketrans("", "", "-.() ")

# What a SIP caller is told when nobody here answers (the status goes into the provider's reject).
UNKNOWN_NUMBER = 404  # Not Found: no route for the number dialled
ROUTE_FULL = 486  # Busy Here: the route's agent is at its concurrent-call limit
ALL_FULL = 503  # Service Unavailable: the deployment is at its phone-call limit
MODEL_FULL = 503  # Service Unavailable: the route's Live model is at its concurrent-session cap
GONE_BEFORE_ANSWER = 480  # Temporarily Unavailable: the session failed before it was answered

# SIP headers kept of a call: enough for any real INVITE, bounded against a hostile one.
MAXIMUM_SIP_HEADERS = 64
MAXIMUM_SIP_HEADER_CHARS = 1_000


# What a keypad press may do on a phone call: ask for a person, end the call, or put the
# number that is not Switchboard's (the caller's, or the callee's on a call going out) on the
# do-not-call list and end the call.
KeyAction = Literal["attention", "end", "opt_out"]


# The keys of a phone's keypad (DTMF).
DTMF_KEYS = frozenset("0123456789*#ABCD")


def checked_keys(keys: dict[str, str]) -> dict[str, str]:
    """Keypad keys mapped to actions: each must be a key a keypad has."""
    for key in keys:
        if key not in DTMF_KEYS:
            raise ValueError(f"{key!r} is not a keypad key (0-9, *, #, A-D)")
    return keys


class PhoneLine(BaseModel):
    """Who called which number, as the call's SIP headers say (untrusted), and what the route
    allows the call (where it may be transferred)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    caller: str = ""
    dialled: str = ""
    asserted_identity: str = ""
    route_id: str = ""
    transfer_targets: tuple[str, ...] = ()
    # Keypad presses and what they do ("attention" or "end"), and the caller's silences the
    # agent waits out before it hangs up (each `silence_ms` long), as the route said.
    keys: dict[str, str] = {}
    silences: int | None = None
    silence_ms: int = 10_000
    sip_headers: tuple[tuple[str, str], ...] = ()


def line_out(to: str, keys: Mapping[str, str]) -> PhoneLine:
    """The phone line of a call going out: the number dialled, and what its keypad presses do
    (an `opt_out` key puts the callee on the do-not-call list and ends the call)."""
    return PhoneLine(dialled=to, keys=dict(keys))


def kept_headers(raw: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """The SIP headers as stored: name and value strings, bounded in number and length."""
    kept: list[tuple[str, str]] = []
    for header in raw[:MAXIMUM_SIP_HEADERS]:
        name, value = header.get("name"), header.get("value")
        if isinstance(name, str) and isinstance(value, str):
            kept.append((name[:100], value[:MAXIMUM_SIP_HEADER_CHARS]))
    return tuple(kept)


def header(headers: tuple[tuple[str, str], ...], name: str) -> str:
    """The first value of a header (names compare case-insensitively), or ""."""
    wanted = name.lower()
    return next((value for key, value in headers if key.lower() == wanted), "")


def number_of(uri: str) -> str:
    """The number (or user) a SIP/tel URI names: `"Ann" <sip:+1 800-555@host>` → `+1800555`."""
    found = _URI_USER.search(uri)
    user = found.group(1) if found else uri.strip()
    return user.translate(_SEPARATORS)


def line_of(headers: tuple[tuple[str, str], ...], route_header: str) -> PhoneLine:
    """Who called and which number they dialled (each number in its E.164 form when it is one)."""
    return PhoneLine(
        caller=kept_number(number_of(header(headers, "From"))),
        dialled=kept_number(number_of(header(headers, route_header))),
        asserted_identity=kept_number(number_of(header(headers, "P-Asserted-Identity"))),
        sip_headers=headers,
    )


def route_matches(route_number: str, dialled: str) -> bool:
    """Whether a route's number answers the number dialled (exactly, or as a prefix). A route
    stored before numbers were kept in their E.164 form is compared in it too."""
    if route_number.endswith("*"):
        return dialled.startswith(route_number[:-1])
    return kept_number(route_number) == dialled
