"""Hypothesis strategies: card numbers said and written every way a caller might, and texts
made of the pieces the detectors look at."""

from __future__ import annotations

from hypothesis import strategies as st

from pipeline.privacy.detect import CARD_NETWORKS, is_luhn_valid

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
ZEROS = ["zero", "oh", "o"]
# Every (first digits, lowest, highest, length) a network's numbers come in.
CARD_RANGES = [
    (low, high or low, length)
    for _, prefixes, lengths in CARD_NETWORKS
    for low, _, high in (prefix.partition("-") for prefix in prefixes)
    for length in lengths
]


@st.composite
def card_numbers(draw: st.DrawFn) -> tuple[int, ...]:
    """A card number: a network's first digits and length, random digits after them, and the
    Luhn check digit."""
    low, high, length = draw(st.sampled_from(CARD_RANGES))
    first = str(draw(st.integers(int(low), int(high)))).zfill(len(low))
    rest = draw(
        st.lists(st.integers(0, 9), min_size=length - len(first) - 1, max_size=length - len(first) - 1)
    )
    body = (*(int(d) for d in first), *rest)
    check = next(d for d in range(10) if is_luhn_valid((*body, d)))
    return (*body, check)


def _word(draw: st.DrawFn, digit: int) -> str:
    word = draw(st.sampled_from(ZEROS)) if digit == 0 else WORDS[digit]
    return draw(st.sampled_from([word, word.upper(), word.capitalize()]))


@st.composite
def spoken(draw: st.DrawFn, digits: tuple[int, ...]) -> str:
    """Digits as words (or some as digits), repeats sometimes said "double" or "triple"."""
    pieces: list[str] = []
    index = 0
    while index < len(digits):
        digit = digits[index]
        repeats = 1
        while index + repeats < len(digits) and digits[index + repeats] == digit and repeats < 3:
            repeats += 1
        times = draw(st.integers(1, repeats))
        as_digit = draw(st.booleans()) and draw(st.booleans())
        one = str(digit) if as_digit else _word(draw, digit)
        if times == 2:
            pieces.append(f"{draw(st.sampled_from(['double', 'Double']))} {one}")
        elif times == 3:
            pieces.append(f"{draw(st.sampled_from(['triple', 'TRIPLE']))}-{one}")
        else:
            pieces.append(one)
        index += times
    # A "four" beside another digit word may be heard as "for".
    said_words = {word for word in WORDS if word != "four"} | set(ZEROS)
    for index, piece in enumerate(pieces):
        beside = [pieces[i].lower() for i in (index - 1, index + 1) if 0 <= i < len(pieces)]
        if piece.lower() == "four" and any(word in said_words for word in beside) and draw(st.booleans()):
            pieces[index] = "for"
    separators = st.sampled_from([" ", ", ", "-", " - ", "  ", " um ", "\n", " and "])
    return "".join(piece + draw(separators) for piece in pieces[:-1]) + pieces[-1]


# What may stand between a written number's groups.
WRITTEN_JOINS = [" ", "-", ".", ", ", " - ", "—", "/", "\u200b", "\u00a0", ", uh, ", ":", "+", "|", "\u2212"]
WRITTEN_JOINS += [" and ", '" "', "” “"]


@st.composite
def written(draw: st.DrawFn, digits: tuple[int, ...]) -> str:
    """Digits in groups of any size, joined by spaces, dashes, dots or commas, in ASCII,
    full-width or Arabic-Indic digits."""
    zero = draw(st.sampled_from([ord("0"), ord("０"), 0x0660]))
    text = [chr(zero + digit) for digit in digits]
    out = []
    for index, char in enumerate(text):
        if index and draw(st.integers(0, 3)) == 0:
            out.append(draw(st.sampled_from(WRITTEN_JOINS)))
        out.append(char)
    return "".join(out)


@st.composite
def said_cards(draw: st.DrawFn) -> tuple[tuple[int, ...], str]:
    """A card number and how it was said or typed."""
    digits = draw(card_numbers())
    style = draw(st.sampled_from(["whole", "fours-space", "fours-dash", "written", "spoken"]))
    plain = "".join(map(str, digits))
    if style == "whole":
        text = plain
    elif style in {"fours-space", "fours-dash"}:
        separator = " " if style == "fours-space" else "-"
        text = separator.join(plain[i : i + 4] for i in range(0, len(plain), 4))
    elif style == "written":
        text = draw(written(digits))
    else:
        text = draw(spoken(digits))
    return digits, text


PIECES = st.one_of(
    st.sampled_from(
        [
            " ",
            ", ",
            "-",
            ".",
            "@",
            "•",
            "thanks",
            "number",
            "is",
            "my card",
            "double",
            "triple",
            "four",
            "oh",
            "john@example.com",
            "j.doe@mail.co.uk",
            "123-45-6789",
            "415-555-0123",
            "+44 20 7946 0958",
            "DE89 3704 0044 0532 0130 00",
            "GB82WEST12345698765432",
            "4111 1111 1111 1111",
            "10:30",
            "$1,234.56",
            "?",
            "。",
            " uh ",
            "\u200b",
            "/",
            "o",
            " ext. 45",
            "•••• 1111",
            "80john@example.com",
            "oliver@example.com",
            "NL02ABNA0123456789",
            "one two three, four five, six seven eight nine",
            "您的订单",
            # Issue 44: RFC 5322's specials, marks, punycode, the new joins and a heard "for".
            "mailhost!user@example.org",
            "a?b=c@x.co",
            "!",
            "?",
            "राम@मोहन.ईन्फो",
            "e\u0301lodie@exemple.fr",
            "\u0301",
            "a@xn--d1acufc.xn--p1ai",
            "for",
            "and",
            ":",
            "+",
            "|",
            "\u2212",
            '"',
            "“",
            "4111:1111:1111:1111",
            "for one one one",
            "GM6001002257866436",
            "DE89 3704 0044 0532 0130 00",
        ]
    ),
    st.integers(0, 99_999).map(str),
    st.text(max_size=8),
    said_cards().map(lambda card: card[1]),
    # Now and then a stretch long enough to be masked whole.
    st.sampled_from(["ab1-", "4 ", "x"]).map(lambda piece: piece * 300),
)
TEXTS = st.lists(PIECES, max_size=24).map("".join)
