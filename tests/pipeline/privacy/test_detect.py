"""Each kind found and masked as an agent needs it, and the look-alikes left alone."""

from __future__ import annotations

import pytest

from pipeline.privacy.detect import (
    ALL_KINDS,
    MAXIMUM_SEGMENT_CHARS,
    Finding,
    Kind,
    find,
    is_luhn_valid,
    redact,
)

CARD = "4111111111111111"


def test_a_written_card_number_keeps_its_last_four() -> None:
    """A card written whole, in groups of four with spaces or dashes, keeps only its last four."""
    for written in (CARD, "4111 1111 1111 1111", "4111-1111-1111-1111", "4111 - 1111, 1111.1111"):
        assert redact(f"my card is {written} thanks") == "my card is •••• •••• •••• 1111 thanks"


@pytest.mark.parametrize(
    "hidden",
    [
        "4111\u200b1111\u200b1111\u200b1111",
        "4111\u00ad1111\u2060 1111\ufeff1111",
        "4111/1111/1111/1111",
        "(4111) 1111 1111*1111",
        "4111\u00a01111\u20031111\n1111",
        "4111 1111, uh, 1111 1111",
        "four one one one, um, one one one one one one one one, er, one one one one",
    ],
)
def test_a_card_hidden_by_invisible_characters_or_fillers_is_caught(hidden: str) -> None:
    """Zero-width characters, odd spaces, slashes and "uh" between the groups still make one card."""
    redacted = redact(f"card {hidden} ok")
    assert redacted.removeprefix("card ").lstrip("(") == "•••• •••• •••• 1111 ok"


def test_a_card_number_finding_names_its_span() -> None:
    """The finding's span is the number's, from its first digit to its last."""
    text = "card 5500-0000-0000-0004 ok"
    assert find(text) == (Finding(Kind.CARD, 5, 24, "•••• •••• •••• 0004"),)


@pytest.mark.parametrize(
    "spoken",
    [
        "four one one one one one one one one one one one one one one one",
        "Four One One One, one one one one, one one one one, one one one one",
        "four-one-one-one-one-one-one-one-one-one-one-one-one-one-one-one",
        "four double one double one one one one one one one one one one one one",
        "four triple one one one one one one one one one one one one one",
        "4 one one one 1111 double one double one one one one one",
        "four oh one two eight eight eight eight eight eight eight eight one eight eight one",
    ],
)
def test_a_spoken_card_number_is_caught(spoken: str) -> None:
    """Digit words, "double" and "triple", mixed with digits, in any case, make a card number."""
    found = find(f"the number is {spoken} thanks")
    assert [f.kind for f in found] == [Kind.CARD]
    assert "one one" not in redact(spoken).lower()


def test_a_spoken_card_keeps_the_digits_it_ends_with() -> None:
    """Spoken or written, the mask keeps the last four digits, written as digits."""
    spoken = "five five zero zero, oh oh oh oh, zero zero zero zero, zero zero zero four"
    assert redact(spoken) == "•••• •••• •••• 0004"


def test_unicode_digits_are_the_digits_they_read_as() -> None:
    """A card typed in full-width, Arabic-Indic or Devanagari digits is a card."""
    full_width = "".join(chr(ord("０") + int(d)) for d in CARD)
    arabic_indic = "".join(chr(0x0660 + int(d)) for d in CARD)
    devanagari = " ".join("".join(chr(0x0966 + int(d)) for d in CARD[i : i + 4]) for i in range(0, 16, 4))
    assert redact(full_width) == "•••• •••• •••• 1111"
    assert redact(f"رقم {arabic_indic}") == "رقم •••• •••• •••• 1111"
    assert redact(devanagari) == "•••• •••• •••• 1111"


def test_superscript_and_circled_digits_are_not_read_as_digits() -> None:
    """Only decimal digits (Unicode Nd) count: no transcriber or keypad writes ⁴¹¹¹ or ④①①①.

    A decision, tested so that changing it is one too."""
    superscript = "".join("⁰¹²³⁴⁵⁶⁷⁸⁹"[int(d)] for d in CARD)
    assert redact(superscript) == superscript


def test_every_card_length_from_13_to_19_digits_is_a_card() -> None:
    """Visa's 13, Diners' 14, Amex's 15, the usual 16, and 17 to 19 are all caught."""
    for number in (
        "4222222222222",
        "36227206271667",
        "378282246310005",
        "6011111111111117",
        "6011000990139424",
        "3530111333300000",
        "62123456789012651",
        "620550000000000009",
        "6205500000000000004",
        "4000000000000000006",
    ):
        assert is_luhn_valid(tuple(int(d) for d in number)), number
        assert redact(number) == f"•••• •••• •••• {number[-4:]}", number


def test_a_luhn_valid_number_no_card_network_issues_is_no_card() -> None:
    """Luhn passes one number in ten: a tracking or order number is a card only if it also
    begins, and is as long, as a network's cards are (issue 44)."""
    for number in (
        "0006212345678901265",  # a 19-digit UnionPay card's digits behind three zeros
        "7946851234567897",  # no network's numbers begin with 7
        "9400111899223397583",  # nor with 94
        "1234567890123452",  # 1 is UATP's, fifteen digits long
        "41111111111111113",  # Visa has no 17-digit numbers
    ):
        assert is_luhn_valid(tuple(int(d) for d in number)), number
        assert redact(f"tracking {number} ok") == f"tracking {number} ok", number


def test_a_card_after_other_digits_in_one_run_is_still_masked_whole() -> None:
    """A phone number said just before a card, joined by a comma, leaves no card digit clear."""
    redacted = redact("call 555 123 4567, card 4111 1111 1111 1111")
    assert "4111" not in redacted
    assert redacted.count("1111") == 1


def test_two_cards_in_one_run_are_both_masked() -> None:
    """Two numbers back to back are both hidden, whatever spurious hits overlap them."""
    redacted = redact("4111 1111 1111 1111 5500 0000 0000 0004")
    assert "4111" not in redacted
    assert "5500" not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "order 4111111111111112 is on its way",  # 16 digits, not Luhn-valid
        "your order number is 10046723, thanks",
        "we open at 10:30 on 2026-12-02",
        "that will be $1,234.56, or 1.234,56 €",
        "reference 12 345 678",
        "the 3 of us and 4 bags",
    ],
)
def test_look_alikes_are_not_cards(text: str) -> None:
    """Non-Luhn numbers, order numbers, dates, times and prices are left as they are."""
    assert redact(text) == text


def test_an_ssn_keeps_its_last_four() -> None:
    """A written SSN (dashes or spaces) or one spoken as nine digits keeps its last four."""
    assert redact("ssn 123-45-6789 ok") == "ssn •••-••-6789 ok"
    assert redact("ssn 123 45 6789 ok") == "ssn •••-••-6789 ok"
    assert redact("it is one two three, four five, six seven eight nine") == "it is •••-••-6789"
    assert redact("it is 1 2 3 4 5 6 7 8 9") == "it is •••-••-6789"


@pytest.mark.parametrize("text", ["000-12-3456", "666-12-3456", "912-34-5678", "123-00-4567", "123-45-0000"])
def test_numbers_never_issued_as_ssns_are_not_ssns(text: str) -> None:
    """Area 000, 666 or 9xx, group 00 and serial 0000 are never issued, so are left alone."""
    assert find(text, {Kind.SSN}) == ()


def test_nine_unbroken_digits_are_not_an_ssn() -> None:
    """Nine written digits, whole or grouped as a ZIP+4, are too often something else to mask."""
    assert redact("order 123456789") == "order 123456789"
    assert redact("Springfield, IL 62704-1234") == "Springfield, IL 62704-1234"


def test_an_email_address_keeps_its_first_letter_and_domain() -> None:
    """An address is masked to its first letter and its domain."""
    assert redact("mail john.smith+calls@example.com now") == "mail j•••@example.com now"
    assert redact("écrivez à élodie@exemple.fr") == "écrivez à é•••@exemple.fr"


def test_an_address_beginning_with_a_digit_or_an_o_keeps_no_letter() -> None:
    """A kept "8" or "o" would read as a digit beside the number before it, so it is masked."""
    assert redact("80john@example.com") == "••••@example.com"
    assert redact("oliver@example.com") == "••••@example.com"


def test_an_at_sign_alone_is_not_an_email_address() -> None:
    """'@' without a domain (a handle, a price 'at') is left alone."""
    for text in ("ping me @john", "2 @ $3", "john@localhost"):
        assert redact(text) == text


def test_a_phone_number_keeps_its_last_two_digits() -> None:
    """Written any common way, a number valid for its region keeps its last two digits."""
    for written in ("415-555-0123", "(415) 555-0123", "+1 415 555 0123"):
        assert redact(f"call {written} please") == "call ••• ••• ••23 please"
    assert redact("ring +44 20 7946 0958 today") == "ring ••• ••• ••58 today"


def test_a_phone_number_with_an_extension_is_masked_with_it() -> None:
    """The extension is part of the number masked; the digits kept are the last two written."""
    assert redact("call 415-555-0123 ext. 45 now") == "call ••• ••• ••45 now"


def test_a_phone_number_is_read_in_the_given_region() -> None:
    """A number without its country code is valid or not for the region it is read in."""
    assert [f.kind for f in find("020 7946 0958", {Kind.PHONE}, region="GB")] == [Kind.PHONE]
    assert find("020 7946 0958", {Kind.PHONE}, region="US") == ()


def test_an_iban_keeps_its_country_and_last_four() -> None:
    """An IBAN, grouped or whole, in either case, keeps its country and last four."""
    assert redact("iban DE89 3704 0044 0532 0130 00 thanks") == "iban DE•• •••• •••• 3000 thanks"
    assert redact("GB82WEST12345698765432") == "GB•• •••• •••• 5432"
    assert redact("gb82 west 1234 5698 7654 32") == "GB•• •••• •••• 5432"


def test_letters_that_only_fold_to_ascii_are_not_iban_letters() -> None:
    """The long s (U+017F) and the Kelvin sign (U+212A) fold to letters but are no IBAN characters."""
    for text in ("DE8937040044053201300ſ", "DE89 3704 0044 0532 0130 0K", "ſE89370400440532013000"):
        assert find(text, {Kind.IBAN}) == ()


def test_an_iban_ending_in_letters_keeps_only_its_country() -> None:
    """Its last four are kept only when they are digits."""
    assert redact("NL02ABNA0123456789", {Kind.IBAN}) == "NL•• •••• •••• 6789"
    assert redact("MT84MALT011000012345MTLCAST001S", {Kind.IBAN}) == "MT•• •••• •••• ••••"


def test_an_iban_with_a_wrong_check_is_not_an_iban() -> None:
    """One digit off, the mod-97 check fails and nothing is masked as an IBAN."""
    assert find("DE89 3704 0044 0532 0130 01", {Kind.IBAN}) == ()


def test_a_grouped_iban_followed_by_a_four_letter_word_is_still_found() -> None:
    """The longest prefix of whole groups that checks is the IBAN; the word after stays."""
    assert redact("DE89 3704 0044 0532 0130 00 THEN", {Kind.IBAN}) == "DE•• •••• •••• 3000 THEN"


def test_a_card_number_is_not_also_a_phone_number() -> None:
    """Overlapping findings are one, named by the strongest kind."""
    found = find("4111 1111 1111 1111", ALL_KINDS)
    assert [f.kind for f in found] == [Kind.CARD]


def test_a_card_inside_an_email_address_is_masked_as_a_card() -> None:
    """A card as an address's local part hides the whole address under the card's mask, which
    keeps no digit: its last four would no longer stand where they were."""
    assert find(f"{CARD}@example.com") == (Finding(Kind.CARD, 0, 28, "•••• •••• •••• ••••"),)


def test_a_mask_keeps_its_digits_when_it_covers_just_its_value() -> None:
    """A phone number overlapping nothing keeps its last two, beside a card that keeps its four."""
    assert redact("4111 1111 1111 1111 or 415-555-0123") == "•••• •••• •••• 1111 or ••• ••• ••23"


def test_only_the_kinds_asked_for_are_masked() -> None:
    """An address is left in the clear when e-mail is not asked for."""
    text = "john@example.com 4111 1111 1111 1111"
    assert redact(text, {Kind.CARD}) == "john@example.com •••• •••• •••• 1111"


def test_an_over_long_segment_is_masked_whole() -> None:
    """Past the segment bound with no barrier, every letter and digit is masked."""
    blob = "ab1-" * (MAXIMUM_SEGMENT_CHARS // 4 + 1)
    redacted = redact(f"hello {blob} thanks")
    assert redacted == "hello " + "•••-" * (MAXIMUM_SEGMENT_CHARS // 4 + 1) + " thanks"
    assert find(f"hello {blob} thanks") == ()
