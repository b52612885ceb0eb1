"""Hypothesis strategies: card numbers said and written every way a caller might, and texts
made of the pieces the detectors look at."""

from __future__ import annotations

from hypothesis import strategies as st

from pipeline.privacy.detect import is_luhn_valid

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
ZEROS = ["zero", "oh", "o"]


@st.composite
def luhn_numbers(draw: st.DrawFn) -> tuple[int, ...]:
    """A Luhn-valid number of 13 to 19 digits."""
    body = tuple(draw(st.lists(st.integers(0, 9), min_size=12, max_size=18)))
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
    separators = st.sampled_from([" ", ", ", "-", " - ", "  ", " um ", "\n"])
    return "".join(piece + draw(separators) for piece in pieces[:-1]) + pieces[-1]


@st.composite
def written(draw: st.DrawFn, digits: tuple[int, ...]) -> str:
    """Digits in groups of any size, joined by spaces, dashes, dots or commas, in ASCII,
    full-width or Arabic-Indic digits."""
    zero = draw(st.sampled_from([ord("0"), ord("０"), 0x0660]))
    text = [chr(zero + digit) for digit in digits]
    out = []
    for index, char in enumerate(text):
        if index and draw(st.integers(0, 3)) == 0:
            out.append(
                draw(st.sampled_from([" ", "-", ".", ", ", " - ", "—", "/", "\u200b", "\u00a0", ", uh, "]))
            )
        out.append(char)
    return "".join(out)


@st.composite
def said_cards(draw: st.DrawFn) -> tuple[tuple[int, ...], str]:
    """A card number and how it was said or typed."""
    digits = draw(luhn_numbers())
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
        ]
    ),
    st.integers(0, 99_999).map(str),
    st.text(max_size=8),
    said_cards().map(lambda card: card[1]),
    # Now and then a stretch long enough to be masked whole.
    st.sampled_from(["ab1-", "4 ", "x"]).map(lambda piece: piece * 300),
)
TEXTS = st.lists(PIECES, max_size=24).map("".join)
