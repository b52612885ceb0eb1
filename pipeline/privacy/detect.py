"""What in a transcript is sensitive, and its masked form.

`find(text, kinds)` names each sensitive value of the asked kinds with its span and the masked
form that replaces it; `redact(text, kinds)` is the text with every one replaced. Pure: no I/O,
no clock, no logging (the clear value must never reach a log line from here either).

The rules:

- **Segments.** Text is cut into segments at *barriers*: a word of 5 to 64 letters that is no
  digit word ("three", "double") and no extension marker, standing between characters no value
  is made of (spaces, `,`, `:` … but not `@ . -`, RFC 5322's other atext signs, digits, letters
  or combining marks), `?` or `!` that no such character follows, and the full-width stops,
  commas, marks and semicolon of CJK text. No detector below can match
  across a barrier, so each segment is redacted on its own; that is what lets
  `stream.DeltaGate` release a transcript up to its last barrier and agree with this module
  exactly.
- **Fail closed.** A segment longer than `MAXIMUM_SEGMENT_CHARS` (no barrier for that long: a
  digit dump, a blob) has every letter and digit masked, so the streaming gate never holds more
  than that bound and never has to guess. A mask's "•" do not count toward that length: a mask
  may be longer than the value it replaces ("•••• •••• •••• 1111" for sixteen digits), and a
  segment redacted once must not be over-long when read again (`redact` is idempotent).
- **Cards are the networks'.** A card number is a network's (`CARD_NETWORKS`: its first digits
  and its length) and passes Luhn; a number glued to letters is a code, not a card.
- **Overlaps.** Findings of different kinds that overlap are one finding: the strongest kind
  (`PRECEDENCE`) names it, its span is the union, its masked form the strongest's (keeping no
  digit or letter when the union is wider). So a card number is never also a phone number, and
  nothing of either is left in the clear.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import phonenumbers

from pipeline.privacy.policy import Kind

ALL_KINDS = frozenset(Kind)

# Which kind names a value two detectors both claim. An IBAN's mod-97 check covers its letters
# too, so digits inside a valid IBAN that also pass Luhn are the IBAN's; a card beats the
# looser shapes of an SSN, an e-mail's local part and a phone number.
PRECEDENCE = (Kind.IBAN, Kind.CARD, Kind.SSN, Kind.EMAIL, Kind.PHONE)

MASK = "•"

# A segment with no barrier for this long is masked whole (letters and digits): the streaming
# gate holds at most this much (plus one barrier word) before it must release something.
MAXIMUM_SEGMENT_CHARS = 1_000
# A longer run of letters is no barrier, so the gate never holds a word longer than this.
MAXIMUM_BARRIER_LETTERS = 64


def _combining_marks() -> list[tuple[int, int]]:
    """Every combining mark (Unicode categories Mn, Mc, Me), as ranges of code points. A vowel
    sign of an Indic script ("मो") or an accent written apart (NFD "e\u0301") is part of the
    word it is in, though `\\w` does not count it. (Marks are in planes 0, 1 and 14.)"""
    ranges: list[tuple[int, int]] = []
    for point in (*range(0x20000), *range(0xE0000, 0xE1000)):
        if unicodedata.category(chr(point))[0] == "M":
            if ranges and ranges[-1][1] == point - 1:
                ranges[-1] = (ranges[-1][0], point)
            else:
                ranges.append((point, point))
    return ranges


def _class_ranges(ranges: Iterable[tuple[int, int]]) -> str:
    return "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges)


_MARK_RANGES = _combining_marks()
_MARK = re.compile(f"[{_class_ranges(_MARK_RANGES)}]")
# The classes read at every character of every delta list the marks of the Basic Multilingual
# Plane, and count every character beyond it as one a value may hold: sre scans the ranges
# beyond the plane one by one, and listing the hundred marks there made finding barriers 40 %
# slower. (A word is then no barrier beside an emoji: held a little longer, never shown early.)
_MARKS = _class_ranges(r for r in _MARK_RANGES if r[1] < 0x10000) + "\\U00010000-\\U0010ffff"
# What an e-mail address's local part may hold besides letters, digits and "." (RFC 5322's
# atext): "user+mailbox/department=shipping", "!#$%&'*+-/=?^_`{|}~".
_ATEXT_SIGNS = r"!#$%&'*+\-/=?^_`{|}~"


@dataclass(frozen=True, slots=True)
class Finding:
    """One sensitive value: its kind, its span in the text, and what replaces it."""

    kind: Kind
    start: int
    end: int
    masked: str


# ── digits, written and spoken ──────────────────────────────────────────────────────────

_DIGIT_WORDS = {
    "zero": 0,
    "oh": 0,
    "o": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
}
_MULTIPLIERS = {"double": 2, "triple": 3}
_WORD = "|".join(sorted(_DIGIT_WORDS, key=len, reverse=True))
_NOT_AFTER_LETTER = r"(?<![^\W\d_])"
_NOT_BEFORE_LETTER = r"(?![^\W\d_])"
# `\d` is every Unicode decimal digit: a full-width "４" or an Arabic-Indic "٤" is the digit it
# reads as, so a card typed in either is still a card.
# A transcriber writes "for" where a caller said "four" among other digit words ("for one one
# one …"): it is a token, but counted as 4 only there (`_tokens`), so "thanks for calling"
# stays words.
_HEARD_FOUR = "for"


def _digit_token(words: str) -> re.Pattern[str]:
    return re.compile(
        rf"{_NOT_AFTER_LETTER}(?P<times>double|triple)[ \-]+"
        rf"(?:(?P<multiplied_word>{_WORD}){_NOT_BEFORE_LETTER}|(?P<multiplied_digit>\d)(?!\d))"
        rf"|{_NOT_AFTER_LETTER}(?P<word>{words}){_NOT_BEFORE_LETTER}"
        r"|(?P<digits>\d+)",
        re.IGNORECASE,
    )


_DIGIT_TOKEN = _digit_token(f"{_WORD}|{_HEARD_FOUR}")
_HEARD_DIGIT_WORDS = {**_DIGIT_WORDS, _HEARD_FOUR: 4}
_SURE_DIGIT_TOKEN = _digit_token(_WORD)
# What may stand between the groups of one number: "4111 1111", "4111-1111" (any dash, the
# minus sign too), "four, one", "4111/1111", "(4111) 1111", "4111*1111", "4111:1111",
# "4111+1111", "4111|1111", quoted groups ('"4111" "1111"'), characters that show as nothing (a
# zero-width space or joiner, a soft hyphen: typed or pasted, they would otherwise hide a card
# in plain sight), a transcriber's filler ("four one, uh, one one") and "and" between groups.
_GAP = (
    r"[\s\-‐‑‒–—−﹣－.,/_()*:+|"
    "\"'“”‘’«»„‚"
    r"\u00ad\u200b-\u200d\u2060\ufeff]"
)
_FILLERS = "uh|um|umm|uhm|er|erm|ah|hmm|and"
_SEPARATOR = re.compile(rf"{_GAP}{{0,4}}(?:(?:{_FILLERS}){_GAP}{{1,4}})?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Token:
    start: int
    end: int
    digits: tuple[int, ...]
    is_spoken: bool


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    heard: list[int] = []
    for match in _DIGIT_TOKEN.finditer(text):
        if match["digits"] is not None:
            digits = tuple(int(char) for char in match["digits"])
            spoken = False
        elif (word := match["word"]) is not None:
            word = word.lower()
            if word == _HEARD_FOUR:
                heard.append(len(tokens))
            digits = (_HEARD_DIGIT_WORDS[word],)
            spoken = True
        else:
            one = match["multiplied_word"] or match["multiplied_digit"]
            digit = _DIGIT_WORDS[one.lower()] if one.lower() in _DIGIT_WORDS else int(one)
            digits = (digit,) * _MULTIPLIERS[match["times"].lower()]
            spoken = True
        tokens.append(_Token(match.start(), match.end(), digits, spoken))
    return _beside_digit_words(text, tokens, heard) if heard else tokens


def _beside_digit_words(text: str, tokens: list[_Token], heard: list[int]) -> list[_Token]:
    """The tokens, but the heard "for"s (at `heard`) that are no "four": a heard "for" is one when
    a digit word said stands beside it, a separator apart, or beside the heard fours next to it
    ("for for one"). Each chain of heard ones joined together is kept or dropped whole."""
    is_heard = set(heard)

    def said(index: int) -> bool:
        return tokens[index].is_spoken and index not in is_heard

    def meet(index: int) -> bool:
        return _SEPARATOR.fullmatch(text, tokens[index].end, tokens[index + 1].start) is not None

    dropped: set[int] = set()
    chained: set[int] = set()
    for first in heard:
        if first in chained:
            continue
        last = first
        while last + 1 in is_heard and meet(last):
            last += 1
        chained.update(range(first, last + 1))
        said_before = first > 0 and said(first - 1) and meet(first - 1)
        said_after = last + 1 < len(tokens) and said(last + 1) and meet(last)
        if not (said_before or said_after):
            dropped.update(range(first, last + 1))
    return [token for index, token in enumerate(tokens) if index not in dropped]


def _runs(text: str) -> Iterator[list[_Token]]:
    """The tokens in groups that read as one number: only separators between them."""
    run: list[_Token] = []
    for token in _tokens(text):
        if run and _SEPARATOR.fullmatch(text, run[-1].end, token.start) is None:
            yield run
            run = []
        run.append(token)
    if run:
        yield run


def _ascii(digits: Iterable[int]) -> str:
    return "".join(str(digit) for digit in digits)


# ── cards ───────────────────────────────────────────────────────────────────────────────

CARD_DIGITS = range(13, 20)

# The card networks: the first digits of their numbers (issuer identification numbers, ISO/IEC
# 7812, as each network publishes its ranges) and the lengths their numbers come in. A number
# must fit one of them as well as pass Luhn, which one number in ten does by chance: a tracking
# or order number of 13 to 19 digits is a card only if it also begins as one of these does.
CARD_NETWORKS: tuple[tuple[str, tuple[str, ...], tuple[int, ...]], ...] = (
    ("Visa", ("4",), (13, 16, 19)),
    ("Mastercard", ("51-55", "2221-2720"), (16,)),
    ("American Express", ("34", "37"), (15,)),
    ("Discover", ("6011", "644-649", "65", "622126-622925"), (16, 17, 18, 19)),
    ("Diners Club", ("300-305", "3095", "36", "38-39"), (14, 15, 16, 17, 18, 19)),
    ("JCB", ("3528-3589",), (16, 17, 18, 19)),
    ("JCB", ("1800", "2131"), (15,)),
    ("UnionPay", ("62", "81"), (16, 17, 18, 19)),
    ("China T-Union", ("31",), (19,)),
    ("Maestro", ("50", "56-59", "63", "67"), (13, 14, 15, 16, 17, 18, 19)),
    ("Mir", ("2200-2204",), (16, 17, 18, 19)),
    ("RuPay", ("60", "65", "81", "82", "353", "356", "508"), (16,)),
    ("Hipercard", ("606282", "3841"), (16, 19)),
    ("UATP", ("1",), (15,)),
    ("BORICA", ("2205",), (16,)),
    ("UzCard", ("8600",), (16,)),
    ("Humo", ("9860",), (16,)),
    ("Troy", ("9792",), (16,)),
)


def _prefix_ranges() -> dict[int, dict[int, list[tuple[int, int, int]]]]:
    """For each length, and each first digit, the (how many first digits, lowest, highest)
    ranges a card of that length begins in."""
    ranges: dict[int, dict[int, list[tuple[int, int, int]]]] = {}
    for _, prefixes, lengths in CARD_NETWORKS:
        for prefix in prefixes:
            low, _, high = prefix.partition("-")
            high = high or low
            for first in range(int(low[0]), int(high[0]) + 1):
                for length in lengths:
                    by_first = ranges.setdefault(length, {}).setdefault(first, [])
                    by_first.append((len(low), int(low), int(high)))
    return ranges


_CARD_PREFIXES = _prefix_ranges()


def is_card_number(digits: tuple[int, ...]) -> bool:
    """Whether `digits` is a payment card number: a network's first digits and length
    (`CARD_NETWORKS`), and the Luhn check."""
    # Looked up by length and first digit: most numbers no network issues fail at once.
    for width, low, high in _CARD_PREFIXES.get(len(digits), {}).get(digits[0], ()):
        first = 0
        for digit in digits[:width]:
            first = first * 10 + digit
        if low <= first <= high:
            return is_luhn_valid(digits)
    return False


def is_luhn_valid(digits: tuple[int, ...]) -> bool:
    """The Luhn check (ISO/IEC 7812-1) every payment card number passes."""
    total = 0
    for place, digit in enumerate(reversed(digits)):
        doubled = digit * 2 if place % 2 else digit
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


def _cards(text: str) -> list[Finding]:
    findings = []
    has_masks = MASK in text
    for run in _runs(text):
        digits: list[int] = []
        token_of: list[int] = []
        ends: list[int] = []
        for index, token in enumerate(run):
            digits.extend(token.digits)
            token_of.extend([index] * len(token.digits))
            ends.append(len(digits))
        if len(digits) < CARD_DIGITS.start:
            continue
        # A number starts where a group does, but never at the digits a mask keeps ("•••• 1111",
        # "••23"): they are a group of their own once masked, and a number begun there would be
        # found only in masked text (redact is idempotent). Nor is a number glued to letters
        # ("GM6074…", "1Z…"): that is a code, not a card.
        starts = [
            ends[i - 1] if i else 0
            for i, token in enumerate(run)
            if not (token.start and _is_glue(text[token.start - 1]))
            and not (has_masks and _kept_by_a_mask(text, token.start))
        ]
        free_ends = [
            end
            for token, end in zip(run, ends, strict=True)
            if token.end == len(text) or not _is_glue(text[token.end])
        ]
        # (first character, last character, the digit the number ends before)
        spans: list[tuple[int, int, int]] = []
        for start in starts:
            for end in free_ends:
                if end - start in CARD_DIGITS and is_card_number(tuple(digits[start:end])):
                    spans.append((run[token_of[start]].start, run[token_of[end - 1]].end, end))
        # Overlapping numbers in one run are masked as one, keeping the last four of the one
        # that ends last: a spurious Luhn hit that overlaps a real card must not leave part of
        # the card in the clear.
        merged: list[tuple[int, int, int]] = []
        for span in sorted(spans):
            if merged and span[0] < merged[-1][1]:
                first = merged.pop()
                merged.append((first[0], *max(first[1:], span[1:])))
            else:
                merged.append(span)
        findings += [
            Finding(Kind.CARD, start, end, _card_mask(digits[digit_end - 4 : digit_end]))
            for start, end, digit_end in merged
        ]
    return findings


def _kept_by_a_mask(text: str, start: int) -> bool:
    """Whether the digits at `start` are what a mask keeps: right after a "•", or after a
    "•" and a space or dash ("•••• 1111", "•••-••-6789")."""
    before = text[max(0, start - 2) : start]
    return before.endswith(MASK) or (len(before) == 2 and before[0] == MASK and before[1] in " -")


def _is_glue(char: str) -> bool:
    """Whether a number touching `char` is glued to it: a letter, a mark or a mask. A number
    glued to one is part of a code, and reads the same before masking as after (a letter a mask
    took the place of was glued to it too)."""
    if char.isascii():
        return char.isalpha()
    return char.isalpha() or char == MASK or _MARK.match(char) is not None


def _card_mask(last_four: Iterable[int]) -> str:
    # The last four are what an agent reads back ("the card ending 1111"), and what PCI DSS
    # allows to be shown (3.4.1); the length is not kept, so the brand's length is not told.
    return f"{MASK * 4} {MASK * 4} {MASK * 4} {_ascii(last_four)}"


# ── US social security numbers ──────────────────────────────────────────────────────────

# Grouped by a space or any dash (the minus sign and the full-width hyphen too).
_WRITTEN_SSN = re.compile(r"(?<!\d)(\d{3})[ \-‐‑‒–—−﹣－](\d{2})[ \-‐‑‒–—−﹣－](\d{4})(?!\d)")
SSN_DIGITS = 9


def is_valid_ssn(digits: tuple[int, ...]) -> bool:
    """Area 000, 666 and 900 to 999, group 00 and serial 0000 are never issued (SSA)."""
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area != (0, 0, 0) and area != (6, 6, 6) and area[0] != 9 and group != (0, 0) and serial != (0,) * 4


def _ssn_mask(digits: tuple[int, ...]) -> str:
    # The last four are how an agent confirms an SSN ("the one ending 6789") and what a
    # truncated SSN shows on US forms; area and group narrow down where and when it was issued.
    return f"{MASK * 3}-{MASK * 2}-{_ascii(digits[5:])}"


def _ssns(text: str) -> list[Finding]:
    findings = []
    for match in _WRITTEN_SSN.finditer(text):
        digits = tuple(int(char) for char in "".join(match.groups()))
        if is_valid_ssn(digits):
            findings.append(Finding(Kind.SSN, match.start(), match.end(), _ssn_mask(digits)))
    # Spoken, an SSN is nine digits said as one number ("one two three, four five, …"), which
    # a transcriber may also write digit by digit ("1 2 3 4 5 6 7 8 9"); nine digits written
    # whole or grouped otherwise are too often something else (an order, a ZIP+4) to count.
    for run in _runs(text):
        digits = tuple(digit for token in run for digit in token.digits)
        said = all(token.is_spoken or len(token.digits) == 1 for token in run)
        if len(digits) == SSN_DIGITS and said and is_valid_ssn(digits):
            findings.append(Finding(Kind.SSN, run[0].start, run[-1].end, _ssn_mask(digits)))
    return findings


# ── e-mail addresses ────────────────────────────────────────────────────────────────────

# Read in text whose combining marks stand as letters (`_as_letters`). The local part is RFC
# 5322's dot-atom (its atext is any letter or digit, RFC 6532, and `_ATEXT_SIGNS`); the domain
# is labels of letters, digits and hyphens, ending in a top-level domain of letters or a punycode
# one ("xn--p1ai"). Quoted local parts and address literals are not read.
_EMAIL = re.compile(
    rf"(?<![\w.{_ATEXT_SIGNS}])(?P<local>[\w{_ATEXT_SIGNS}]+(?:\.[\w{_ATEXT_SIGNS}]+)*)"
    r"@(?P<domain>(?:[^\W_](?:[\w\-]*[^\W_])?\.)+(?:[^\W\d_]{2,}|[xX][nN]--[^\W_]+(?:-[^\W_]+)*))"
    # Nor does an address run into a mask: in masked text it must read as it did before ("•" took
    # the place of the digits it ran into).
    rf"(?![\w\-@{MASK}])"
)
_AS_LETTER = "a"


def _as_letters(text: str) -> str:
    """`text` with each combining mark replaced by a letter: the same length, so a span found
    in it is the span in `text`."""
    # Most addresses are ASCII, which has no marks: looked at once, in C.
    return text if text.isascii() or not _MARK.search(text) else _MARK.sub(_AS_LETTER, text)


def _emails(text: str) -> list[Finding]:
    # The first letter and the domain are what an agent needs to say which address ("j… at
    # example.com"); the rest of the local part is the person's.
    findings = []
    position = 0
    # Addresses run together ("a@b.comc@d.com") are looked for from each "@" on, not after the
    # whole match: otherwise the second is only found once the first is masked.
    readable = _as_letters(text)
    while match := _EMAIL.search(readable, position):
        first = text[match.start("local")]
        # A digit kept would join the digits before it into a new number once masked, and a
        # lone "o" reads as zero: either is masked too.
        kept = first if first.isalpha() and first not in "oO" else MASK
        masked = f"{kept}{MASK * 3}@{text[match.start('domain') : match.end('domain')]}"
        findings.append(Finding(Kind.EMAIL, match.start(), match.end(), masked))
        position = match.start("domain")
    return findings


# ── phone numbers ───────────────────────────────────────────────────────────────────────


def _phones(text: str, region: str) -> list[Finding]:
    findings = []
    for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
        # Two digits tell the caller's numbers apart ("the one ending 23"); unlike a card's
        # last four, a phone number's reach the person, so fewer are kept. They are the last
        # two of the text matched (an extension's, if it has one), so that what the mask keeps
        # stands where it stood.
        last_two = [int(char) for char in match.raw_string if char.isdecimal()][-2:]
        masked = f"{MASK * 3} {MASK * 3} {MASK * 2}{_ascii(last_two)}"
        findings.append(Finding(Kind.PHONE, match.start, match.end, masked))
    return findings


# ── IBANs ───────────────────────────────────────────────────────────────────────────────

# Written whole, or in groups of four with single spaces (ISO 13616's paper format).
# ASCII classes written out, not re.IGNORECASE: that would let [A-Z] match "ſ" and the Kelvin
# sign, which fold to letters but are no base-36 digits.
# Not glued to a letter or digit before or after — nor to a mask, which stands where a letter or
# digit was: an IBAN glued to a value masked since must read as it did before (idempotence).
_IBAN = re.compile(
    rf"(?<![^\W_])(?<!{MASK})(?P<country>[A-Za-z]{{2}})(?P<check>[0-9]{{2}})"
    rf"(?P<rest>(?: [A-Za-z0-9]{{4}})+(?: [A-Za-z0-9]{{1,3}})?|[A-Za-z0-9]{{11,30}})(?![^\W_])(?!{MASK})"
)
IBAN_LENGTH = range(15, 35)

# How long each country's IBANs are: the IBAN registry's countries (ISO 13616), the territories
# that use their own country code in another's scheme (Åland, the French overseas ones, the
# Crown Dependencies), and the countries that use IBANs outside the registry. Two letters, two
# digits and a rest pass mod 97 by chance once in 97 times (a tracking code "GM6001…"): an IBAN
# is one of a country that has them, as long as that country's are.
IBAN_LENGTHS = {
    **dict.fromkeys(["NO"], 15),
    **dict.fromkeys(["BE"], 16),
    **dict.fromkeys(["DK", "FI", "FK", "FO", "GL", "NL", "SD", "AX"], 18),
    **dict.fromkeys(["MK", "SI"], 19),
    **dict.fromkeys(["AT", "BA", "EE", "KZ", "LT", "LU", "MN", "XK"], 20),
    **dict.fromkeys(["CH", "HR", "LI", "LV"], 21),
    **dict.fromkeys(["BG", "BH", "CR", "DE", "GB", "GE", "IE", "ME", "RS", "VA", "GG", "IM", "JE"], 22),
    **dict.fromkeys(["AE", "GI", "IL", "IQ", "OM", "SO", "TL"], 23),
    **dict.fromkeys(["AD", "CZ", "ES", "MD", "PK", "RO", "SA", "SE", "SK", "TN", "VG"], 24),
    **dict.fromkeys(["LY", "PT", "ST", "AO", "CV", "GW", "MZ"], 25),
    **dict.fromkeys(["IS", "TR", "DZ", "IR"], 26),
    **dict.fromkeys(["BI", "DJ", "FR", "GR", "IT", "MC", "MR", "SM", "CF", "CG", "CM", "GA", "GQ"], 27),
    **dict.fromkeys(["KM", "MG", "TD", "GF", "GP", "MQ", "RE", "PF", "TF", "YT", "NC", "BL", "MF"], 27),
    **dict.fromkeys(["PM", "WF"], 27),
    **dict.fromkeys(["AL", "AZ", "BY", "CY", "DO", "GT", "HN", "HU", "LB", "NI", "PL", "SV"], 28),
    **dict.fromkeys(["BF", "BJ", "CI", "MA", "ML", "NE", "SN", "TG"], 28),
    **dict.fromkeys(["BR", "EG", "PS", "QA", "UA"], 29),
    **dict.fromkeys(["JO", "KW", "MU", "YE"], 30),
    **dict.fromkeys(["MT", "SC"], 31),
    **dict.fromkeys(["LC"], 32),
    **dict.fromkeys(["RU"], 33),
}


def is_valid_iban(compact: str) -> bool:
    """ISO 13616: a country's IBAN as long as its are (`IBAN_LENGTHS`), whose country and check
    digits moved to the end, letters as 10 to 35, leave 1 mod 97."""
    if len(compact) not in IBAN_LENGTH or IBAN_LENGTHS.get(compact[:2].upper()) != len(compact):
        return False
    rotated = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in rotated.upper())) % 97 == 1


def _ibans(text: str) -> list[Finding]:
    findings = []
    for match in _IBAN.finditer(text):
        head = match["country"] + match["check"]
        spaced = match["rest"].startswith(" ")
        groups = match["rest"].split(" ")[1:] if spaced else [match["rest"]]
        # A spaced IBAN may be followed by a word of four that is not part of it: the longest
        # prefix of whole groups that checks is the IBAN.
        for count in range(len(groups), 0, -1):
            compact = head + "".join(groups[:count])
            if is_valid_iban(compact):
                end = match.start() + len(head) + sum(len(group) + spaced for group in groups[:count])
                # The last four are kept when they are digits (as most IBANs end): a letter kept
                # beside them ("O123") could read as a spoken digit once masked.
                tail = compact[-4:] if compact[-4:].isdecimal() else MASK * 4
                masked = f"{compact[:2].upper()}{MASK * 2} {MASK * 4} {MASK * 4} {tail}"
                findings.append(Finding(Kind.IBAN, match.start(), end, masked))
                break
    return findings


# ── segments and the whole ──────────────────────────────────────────────────────────────

# What a value is made of, a character at a time: letters, digits, marks, "." and "@", and
# what an address's local part may hold.
_NOT_IN_A_VALUE = rf"[\w.@{_ATEXT_SIGNS}{_MARKS}]"
_BARRIER = re.compile(
    rf"(?<!{_NOT_IN_A_VALUE})(?P<word>[^\W\d_]{{5,{MAXIMUM_BARRIER_LETTERS}}})(?!{_NOT_IN_A_VALUE})"
    # "?" and "!" end a sentence, unless a value goes on after them: both are atext, so
    # "mailhost!username@example.org" is one address.
    rf"|[?!](?!{_NOT_IN_A_VALUE})"
    # Not ";": libphonenumber reads ";ext=45" as a number's extension.
    r"|[。，！？；]"
)
# Words that can be inside a value: spoken digits and multipliers, and the extension labels
# of five letters or more that libphonenumber matches a number with ("… extension 12": its
# pattern is e?xt(ensi(o|ó))?n? or anexo).
_EXTENSION_WORDS = {"extension", "extensión", "extensio", "xtension", "xtensión", "xtensio", "anexo"}
_NOT_BARRIERS = frozenset(_DIGIT_WORDS) | frozenset(_MULTIPLIERS) | _EXTENSION_WORDS


def barriers(text: str, start: int = 0) -> Iterator[re.Match[str]]:
    """The barriers in `text` from `start` on, in order (see the module docstring); the
    characters before `start` are still seen as what comes before."""
    for match in _BARRIER.finditer(text, start):
        if match["word"] is None or match["word"].lower() not in _NOT_BARRIERS:
            yield match


def fail_closed(segment: str) -> str:
    """Every letter and digit masked: what an over-long segment becomes."""
    return re.sub(r"[^\W_]", MASK, segment)


def _resolve(findings: list[Finding]) -> list[Finding]:
    """Overlapping findings made one: the strongest kind (the earlier finding, when of a kind)
    names it, its span is the union, its mask replaces all of it."""
    resolved: list[Finding] = []
    for finding in sorted(findings, key=lambda f: (f.start, PRECEDENCE.index(f.kind), -f.end)):
        if resolved and finding.start < resolved[-1].end:
            last = resolved.pop()
            winner = last if PRECEDENCE.index(last.kind) <= PRECEDENCE.index(finding.kind) else finding
            start, end = last.start, max(last.end, finding.end)
            # What a mask keeps ("1111", "j") stays only where it stood: moved to the edge of a
            # wider union it would sit beside text it never touched, and could complete a value
            # there ("•••• 1111" before "one two …") that was not one before masking.
            kept = (start, end) == (winner.start, winner.end)
            resolved.append(
                Finding(winner.kind, start, end, winner.masked if kept else fail_closed(winner.masked))
            )
        else:
            resolved.append(finding)
    return resolved


def _masked_with_origins(segment: str, findings: list[Finding]) -> tuple[str, list[tuple[int, int]]]:
    """The segment with these findings masked, and for each of its characters the span of the
    segment it stands for (a mask's characters stand for the whole value)."""
    pieces: list[str] = []
    origins: list[tuple[int, int]] = []
    position = 0
    for finding in findings:
        pieces.append(segment[position : finding.start])
        origins.extend((i, i + 1) for i in range(position, finding.start))
        pieces.append(finding.masked)
        origins.extend([(finding.start, finding.end)] * len(finding.masked))
        position = finding.end
    pieces.append(segment[position:])
    origins.extend((i, i + 1) for i in range(position, len(segment)))
    return "".join(pieces), origins


# A mask and the digits or letters it keeps ("•••• 1111", "••23", "j•••").
_MASKED = re.compile(rf"{MASK}[{MASK}\s\-]*[^\W_]*")


def _detect(kind: Kind, text: str, region: str) -> list[Finding]:
    if kind is Kind.IBAN:
        return _ibans(text) if any(char.isdecimal() for char in text) else []
    if kind is Kind.CARD:
        return _cards(text)
    if kind is Kind.SSN:
        return _ssns(text)
    if kind is Kind.EMAIL:
        return _emails(text) if "@" in text else []
    # libphonenumber decides on the digits around a candidate (a number followed by more
    # digits is no number), so it reads the text with every mask blanked, the digits a mask
    # keeps included: then it reads the same whether a value beside a phone number is still
    # there or masked already, which keeps `redact` idempotent. A phone number typed right
    # after a "•" is not found that way; the stronger kinds do not blank what follows a "•".
    if not any(char.isdecimal() for char in text):
        return []
    blanked = _MASKED.sub(lambda match: MASK * len(match.group()), text)
    # A number found beside another blanks it too, and the rest is read again, until nothing
    # new is found: "2 012000010 415 555 0100" is one phone number read whole, but "2 012000010"
    # alone is another, which is what a second `redact` would read once the first is masked.
    found: list[Finding] = []
    while new := [f for f in _phones(blanked, region) if not any(_overlap(f, o) for o in found)]:
        found += new
        for finding in new:
            width = finding.end - finding.start
            blanked = blanked[: finding.start] + MASK * width + blanked[finding.end :]
    return sorted(found, key=lambda finding: finding.start)


def _overlap(one: Finding, other: Finding) -> bool:
    return one.start < other.end and other.start < one.end


def _find_in_segment(segment: str, offset: int, kinds: frozenset[Kind], region: str) -> list[Finding]:
    # Each kind, strongest first, is looked for in the text as the stronger kinds left it
    # masked: what a later kind reads is what `redact` gives it a second time.
    # Every kind but e-mail needs a digit, written or spoken; most of what is said has neither.
    if not could_hold_value(segment):
        return []
    found: list[Finding] = []
    for kind in PRECEDENCE:
        if kind not in kinds:
            continue
        if not found:
            # Nothing masked yet: the text is the segment (the common case, and the cheap one).
            found = _resolve(_detect(kind, segment, region))
            continue
        text, origins = _masked_with_origins(segment, found)
        located = [
            Finding(
                kind,
                min(origins[i][0] for i in range(f.start, f.end)),
                max(origins[i][1] for i in range(f.start, f.end)),
                f.masked,
            )
            for f in _detect(kind, text, region)
        ]
        found = _resolve(found + located)
    return [Finding(f.kind, f.start + offset, f.end + offset, f.masked) for f in found]


def could_hold_value(text: str) -> bool:
    """Whether `text` has anything a value is made of: a digit, a digit word or an "@". Most
    of what is said has none, and needs no more looking at. (A "for" counts as a digit only
    beside a digit word, which this finds.)"""
    return "@" in text or _SURE_DIGIT_TOKEN.search(text) is not None


# What a value that goes on past a piece's end may have begun with: a digit or digit word (a
# number's groups run on over spaces), a "for" that the next words may make a "four", an "@",
# or what a phone number is written after ("+", "(").
_VALUE_BEGINS = re.compile(rf"{_DIGIT_TOKEN.pattern}|[@+(]", re.IGNORECASE)


def value_begins_at(text: str, start: int = 0) -> int | None:
    """Where in `text`, from `start` on, the first thing a value said on may have begun with
    is (`_VALUE_BEGINS`); None when there is none."""
    found = _VALUE_BEGINS.search(text, start)
    return None if found is None else found.start()


# What a value may go on from: what one is made of, and "(" (of a phone number's area code).
_VALUE_CHARACTER = re.compile(rf"{_NOT_IN_A_VALUE}|\(")


def is_value_character(char: str) -> bool:
    """Whether a value could go on from `char` (a letter, mark or digit, or a sign an address or
    a phone number may hold)."""
    return _VALUE_CHARACTER.fullmatch(char) is not None


# The fewest digits (written or spoken) a value of each kind has: a card 13, an SSN 9, a phone
# number 7 (the shortest valid numbers, with their country code), an IBAN its 2 check digits.
MINIMUM_DIGITS = {Kind.CARD: min(CARD_DIGITS), Kind.SSN: SSN_DIGITS, Kind.PHONE: 7, Kind.IBAN: 2}


def could_hold_any(text: str, kinds: frozenset[Kind]) -> bool:
    """Whether `text` has enough of what a value of one of `kinds` is made of to be one: an
    "@" for an e-mail address, else as many digits as the kind's shortest value. "Order 4417"
    holds four, and is no card or SSN; counting costs a fifth of looking."""
    if Kind.EMAIL in kinds and "@" in text:
        return True
    needed = min((MINIMUM_DIGITS[kind] for kind in kinds if kind in MINIMUM_DIGITS), default=None)
    if needed is None:
        return False
    count = 0
    for match in _DIGIT_TOKEN.finditer(text):
        if match["digits"] is not None:
            count += len(match["digits"])
        elif match["times"] is not None:
            count += _MULTIPLIERS[match["times"].lower()]
        else:
            count += 1
        if count >= needed:
            return True
    return False


def segments(text: str) -> Iterator[tuple[int, int]]:
    """The spans between barriers (possibly empty), in order."""
    position = 0
    for barrier in barriers(text):
        yield position, barrier.start()
        position = barrier.end()
    yield position, len(text)


def find(text: str, kinds: Iterable[Kind] = ALL_KINDS, *, region: str = "US") -> tuple[Finding, ...]:
    """The sensitive values of these kinds in `text`, in order, none overlapping.

    A segment masked whole for its length (`fail_closed`) reports no findings; `redact` masks it.
    `region` is the country a phone number without its country code is read in."""
    wanted = frozenset(kinds)
    found: list[Finding] = []
    for start, end in segments(text):
        if not is_over_long(text[start:end]):
            found += _find_in_segment(text[start:end], start, wanted, region)
    return tuple(found)


def is_over_long(segment: str) -> bool:
    """Whether a segment is masked whole for its length: over `MAXIMUM_SEGMENT_CHARS`, a mask's
    "•" not counted (masking never makes a segment over-long)."""
    return len(segment) > MAXIMUM_SEGMENT_CHARS and len(segment) - segment.count(MASK) > MAXIMUM_SEGMENT_CHARS


def redact(text: str, kinds: Iterable[Kind] = ALL_KINDS, *, region: str = "US") -> str:
    """`text` with every sensitive value of these kinds replaced by its masked form."""
    return redact_around(text, ((b.start(), b.end()) for b in barriers(text)), frozenset(kinds), region)


def redact_around(
    text: str, barrier_spans: Iterable[tuple[int, int]], kinds: frozenset[Kind], region: str
) -> str:
    """`redact`, given where the barriers of `text` are (in order): the streaming gate has found
    them already, and looking again would double its work."""
    pieces: list[str] = []
    position = 0
    for start, end in barrier_spans:
        pieces.append(redact_segment(text[position:start], kinds, region))
        pieces.append(text[start:end])
        position = end
    pieces.append(redact_segment(text[position:], kinds, region))
    return "".join(pieces)


def redact_segment(segment: str, kinds: frozenset[Kind], region: str) -> str:
    """One segment redacted: masked whole if over-long, else each finding replaced."""
    if is_over_long(segment):
        return fail_closed(segment)
    pieces: list[str] = []
    position = 0
    for finding in _find_in_segment(segment, 0, kinds, region):
        pieces.append(segment[position : finding.start])
        pieces.append(finding.masked)
        position = finding.end
    pieces.append(segment[position:])
    return "".join(pieces)
