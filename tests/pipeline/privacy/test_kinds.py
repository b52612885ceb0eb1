"""A property for each kind (issue 44, item 10), with hypothesis: a value of the kind, drawn at
random in a form docs/privacy.md documents, inside drawn surrounding words, is masked; and a
benign number no card network's ranges can begin is left alone, Luhn-valid or not."""

from __future__ import annotations

import phonenumbers
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline.privacy.detect import ALL_KINDS, Kind, _tokens, find, is_luhn_valid, redact
from pipeline.privacy.policy import PrivacyPolicy
from tests.pipeline.privacy.corpus import PHONE_REGIONS, PUBLISHED_IBANS
from tests.pipeline.privacy.strategies import WORDS, said_cards

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Words around a value: none a digit, a digit word or a "for".
VOCABULARY = "please take my the number is thanks okay so card it's yes right sure account write to me "
VOCABULARY += "at call email social iban uh and well again that was ready"
SURROUNDING = st.lists(st.sampled_from(VOCABULARY.split(" ")), max_size=6).map(" ".join)
# What stands between a value and the words around it.
BEFORE = st.sampled_from([" ", "\n", ": ", " (", ", ", " is "])
AFTER = st.sampled_from([" ", "\n", ". ", ") ", ", ", "! ", "? "])


@st.composite
def in_words(draw: st.DrawFn, value: str) -> tuple[str, int, int]:
    """`value` among drawn words: the text, and where the value is in it."""
    before = draw(SURROUNDING) + draw(BEFORE)
    text = before + value + draw(AFTER) + draw(SURROUNDING)
    return text, len(before), len(before) + len(value)


def _digits(text: str) -> str:
    return "".join(str(digit) for token in _tokens(text) for digit in token.digits)


def _is_hidden(text: str, start: int, end: int) -> bool:
    """Whether findings cover the whole of `text[start:end]`."""
    return any(f.start <= start and f.end >= end for f in find(text, ALL_KINDS))


# ── cards ─────────────────────────────────────────────────────────────────────────────────


@PROPERTY_SETTINGS
@given(st.data())
def test_a_card_number_in_any_documented_form_is_masked(data: st.DataObject) -> None:
    """A network's card number, written or said any documented way among other words, is hidden
    whole: no digit of it but its last four is left."""
    digits, said = data.draw(said_cards())
    text, start, end = data.draw(in_words(said))
    assert _is_hidden(text, start, end), text
    redacted = redact(text)
    assert "".join(map(str, digits[:-4])) not in _digits(redacted)


# ── SSNs ──────────────────────────────────────────────────────────────────────────────────


@st.composite
def ssns(draw: st.DrawFn) -> tuple[str, str]:
    """An SSN that could have been issued, and how it was written or said."""
    area = draw(st.integers(1, 899).filter(lambda area: area != 666))
    number = f"{area:03d}{draw(st.integers(1, 99)):02d}{draw(st.integers(1, 9999)):04d}"
    groups = [number[:3], number[3:5], number[5:]]
    form = draw(st.sampled_from(["written", "digit by digit", "spoken"]))
    if form == "written":
        return number, draw(st.sampled_from(["-", " ", "–", "−", "‑"])).join(groups)
    if form == "digit by digit":
        return number, " ".join(number)
    zero = draw(st.sampled_from(["zero", "oh", "o"]))
    said = [" ".join(zero if d == "0" else WORDS[int(d)] for d in group) for group in groups]
    return number, draw(st.sampled_from([" ", ", ", " - ", " and "])).join(said)


@PROPERTY_SETTINGS
@given(st.data())
def test_an_ssn_in_any_documented_form_is_masked(data: st.DataObject) -> None:
    """An SSN written with any dash or spaces, or said digit by digit, is hidden but its last four."""
    number, said = data.draw(ssns())
    text, start, end = data.draw(in_words(said))
    found = [f for f in find(text, ALL_KINDS) if f.start <= start and f.end >= end]
    assert [f.kind for f in found] == [Kind.SSN], text
    assert number[:5] not in _digits(redact(text))


# ── e-mail addresses ────────────────────────────────────────────────────────────────────────

# Letters of several scripts, some with vowel signs or accents written apart that `\w` does not
# count, and RFC 5322's specials.
SCRIPTS = ["é", "e\u0301", "ñ", "n\u0303", "ж", "ю", "θ", "σ", "रा", "मो", "ई", "न्", "ท", "ั", "葉", "甲"]
LOCAL_CHARACTERS = st.sampled_from([*"abcxyz019ABZ_!#$%&'*+-/=?^`{|}~", *SCRIPTS])
LABEL_CHARACTERS = st.sampled_from(
    [*"abcxyz019", "é", "e\u0301", "ж", "мо", "θ", "मो", "हन", "ड़", "臺", "網"]
)


@st.composite
def addresses(draw: st.DrawFn) -> tuple[str, str]:
    """An address (a dot-atom at a domain whose top-level is letters or punycode), and its local part."""
    atoms = draw(
        st.lists(st.lists(LOCAL_CHARACTERS, min_size=1, max_size=6).map("".join), min_size=1, max_size=3)
    )
    local = ".".join(atoms)
    labels = draw(
        st.lists(st.lists(LABEL_CHARACTERS, min_size=1, max_size=6).map("".join), min_size=1, max_size=3)
    )
    labels = ["x" + label if not label[0].isalnum() else label for label in labels]
    top = draw(
        st.sampled_from(["com", "org", "co", "рф", "भारत", "ईन्फो", "テスト", "xn--p1ai", "xn--80asehdb"])
    )
    return f"{local}@{'.'.join(labels)}.{top}", local


@PROPERTY_SETTINGS
@given(st.data())
def test_an_email_address_in_any_documented_form_is_masked(data: st.DataObject) -> None:
    """An address whose local part holds any atext (letters of any script with their marks, digits,
    RFC 5322's specials) and whose domain is internationalized or punycode is hidden but for its
    first letter and its domain."""
    address, local = data.draw(addresses())
    text, start, end = data.draw(in_words(address))
    assert _is_hidden(text, start, end), text
    assert f"{local}@" not in redact(text, {Kind.EMAIL})


# ── phone numbers ───────────────────────────────────────────────────────────────────────────


@st.composite
def phones(draw: st.DrawFn) -> tuple[phonenumbers.PhoneNumber, str]:
    """A valid number: a US one drawn at random, or a region's example with its last digits
    drawn anew; written in one of the documented forms."""
    if draw(st.booleans()):
        national = (
            f"{draw(st.integers(201, 989))}{draw(st.integers(200, 999))}{draw(st.integers(0, 9999)):04d}"
        )
        number = phonenumbers.parse(national, "US")
    else:
        region = draw(st.sampled_from(PHONE_REGIONS))
        example = phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.FIXED_LINE)
        assume(example is not None)
        assert example is not None
        national = str(example.national_number)
        tail = str(draw(st.integers(0, 99))).zfill(2)
        number = phonenumbers.parse(f"+{example.country_code}{national[:-2]}{tail}", None)
    assume(phonenumbers.is_valid_number(number))
    formats = [phonenumbers.PhoneNumberFormat.INTERNATIONAL, phonenumbers.PhoneNumberFormat.E164]
    if number.country_code == 1:
        formats.append(phonenumbers.PhoneNumberFormat.NATIONAL)
    written = phonenumbers.format_number(number, draw(st.sampled_from(formats)))
    if number.country_code == 1 and draw(st.booleans()):
        digits = str(number.national_number)
        join = draw(st.sampled_from(["-", ".", " ", "−"]))
        written = join.join((digits[:3], digits[3:6], digits[6:]))
    return number, written


@PROPERTY_SETTINGS
@given(st.data())
def test_a_phone_number_in_any_documented_form_is_masked(data: st.DataObject) -> None:
    """A number libphonenumber finds valid, written internationally, as E.164 or (in the US) as
    people write them, is hidden but for its last two digits."""
    number, written = data.draw(phones())
    text, start, end = data.draw(in_words(written))
    assert _is_hidden(text, start, end), text
    national = str(number.national_number)
    assert national[:-2] not in _digits(redact(text, {Kind.PHONE}))


# ── IBANs ───────────────────────────────────────────────────────────────────────────────────


@st.composite
def ibans(draw: st.DrawFn) -> tuple[str, str]:
    """A registry country's IBAN with its digits drawn anew and its check digits made right, and
    how it was written (whole or in fours, either case)."""
    example = draw(st.sampled_from(PUBLISHED_IBANS))
    bban = "".join(str(draw(st.integers(0, 9))) if char.isdecimal() else char for char in example[4:])
    check = 98 - int("".join(str(int(c, 36)) for c in bban + example[:2] + "00")) % 97
    iban = f"{example[:2]}{check:02d}{bban}"
    written = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4)) if draw(st.booleans()) else iban
    return iban, written.lower() if draw(st.booleans()) else written


@PROPERTY_SETTINGS
@given(st.data())
def test_an_iban_in_any_documented_form_is_masked(data: st.DataObject) -> None:
    """An IBAN, whole or in groups of four, either case, is hidden but its country and last four."""
    iban, written = data.draw(ibans())
    text, start, end = data.draw(in_words(written))
    found = [f for f in find(text, ALL_KINDS) if f.start <= start and f.end >= end]
    assert [f.kind for f in found] == [Kind.IBAN], text
    assert iban[4:-4].lower() not in redact(text).replace(" ", "").lower()


# ── benign numbers ──────────────────────────────────────────────────────────────────────────


def _luhn_valid(first: str, rest: list[int]) -> str:
    body = first + "".join(map(str, rest))
    return body + next(str(d) for d in range(10) if is_luhn_valid(tuple(int(c) for c in body + str(d))))


@st.composite
def benign_numbers(draw: st.DrawFn) -> str:
    """A number no network's card ranges begin: a tracking number written whole that begins as
    USPS's, FedEx Ground's or DHL's do (made Luhn-valid), or glued to its carrier's letters; an
    order number of twelve digits or fewer; a date, an amount or a time."""
    kind = draw(st.sampled_from(["tracking", "coded", "order", "date", "amount", "time"]))
    rest = st.lists(st.integers(0, 9), min_size=8, max_size=20)
    if kind == "tracking":
        return _luhn_valid(draw(st.sampled_from(["9400", "9205", "9303", "0", "96", "7"])), draw(rest))
    if kind == "coded":
        return draw(st.sampled_from(["1Z", "GM", "TBA", "C", "JJD", "LX"])) + _luhn_valid("", draw(rest))
    if kind == "order":
        return str(draw(st.integers(1_000, 10**12 - 1)))
    if kind == "date":
        year, month, day = draw(st.integers(1900, 2100)), draw(st.integers(1, 12)), draw(st.integers(1, 28))
        return draw(
            st.sampled_from(
                [f"{year}-{month:02d}-{day:02d}", f"{month}/{day}/{year}", f"{day}.{month}.{year}"]
            )
        )
    if kind == "amount":
        whole, cents = draw(st.integers(0, 10**9)), draw(st.integers(0, 99))
        return draw(st.sampled_from([f"${whole:,}.{cents:02d}", f"{whole:,}.{cents:02d} €", f"USD {whole}"]))
    hour, minute = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    return draw(st.sampled_from([f"{hour:02d}:{minute:02d}", f"{hour}:{minute:02d}:{minute:02d}"]))


@PROPERTY_SETTINGS
@given(st.data())
def test_a_benign_number_is_left_as_it_is(data: st.DataObject) -> None:
    """What every session redacts (cards, SSNs) leaves a benign number alone, even a Luhn-valid
    tracking number: no card network's numbers begin as it does."""
    text, _, _ = data.draw(in_words(data.draw(benign_numbers())))
    assert redact(text, PrivacyPolicy().kinds) == text
