"""A corpus for measuring the detectors (issue 44, item 10): values of every kind in every form
docs/privacy.md documents, written inside sentences the way a transcript writes them, and benign
numbers (orders, tracking, dates, amounts, times) that must be left alone.

Where other projects have published test values, they are used as they wrote them: payment
processors' test card numbers, the IBAN registry's example IBANs, libphonenumber's example
numbers, and the valid addresses of e-mail validators' test suites (internationalized ones,
with RFC 5322's specials). The rest is generated from a fixed seed, so that every run measures
the same corpus."""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

import phonenumbers

from pipeline.privacy.detect import CARD_NETWORKS, Kind, is_card_number, is_luhn_valid, is_valid_iban

SEED = 44

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@dataclass(frozen=True)
class Sample:
    """A value of `kind`, written in `form`, at `start`:`end` of `text`."""

    kind: Kind
    form: str
    text: str
    start: int
    end: int

    @property
    def value(self) -> str:
        return self.text[self.start : self.end]


@dataclass(frozen=True)
class Benign:
    """A text whose numbers are none of the sensitive kinds, of a `category`."""

    category: str
    text: str


def _listed(text: str) -> tuple[str, ...]:
    """The values of a list written out as text, one after another."""
    return tuple(text.split())


def _placed(kind: Kind, form: str, sentence: str, value: str) -> Sample:
    before, _, after = sentence.partition("{}")
    # A value written in quotes is the span from its first character to its last that is not
    # a quote (the quotes around its groups are inside it).
    core = value.strip("\"'“”‘’«»")
    start = len(before) + value.index(core)
    return Sample(kind, form, before + value + after, start, start + len(core))


# ── cards ─────────────────────────────────────────────────────────────────────────────────

# Test card numbers the payment processors publish in their documentation.
PUBLISHED_CARDS = _listed(
    # Visa
    "4111111111111111 4012888888881881 4222222222222 4242424242424242 4000056655665556 "
    "4000002500003155 4000000000000077 4000000000003220 4005519200000004 4009348888881881 "
    "4012000033330026 4012000077777777 4217651111111119 4500600000000061 4917610000000000003 "
    "4462030000000000 4917300800000000 4484070000000000 4988438843884305 4166676667666746 "
    "4646464646464644 4000620000000007 4000060000000006 4293189100000008 4988080000000000 "
    "4111111145551142 4000000760000002 4000001240000000 4000002760003184 4035501000000008 "
    # Mastercard
    "5555555555554444 5105105105105100 5200828282828210 2223003122003222 2221000000000009 "
    "5454545454545454 5425233430109903 2222400070000005 5577000055770004 5136333333333335 "
    "5585558555855583 5555444433331111 2223000048410010 5100290029002909 5101180000000007 "
    "2720992720992729 5500000000000004 5431111111111111 5555555555554477 "
    # American Express
    "378282246310005 371449635398431 378734493671000 340000000000009 370000000000002 "
    "374251018720018 374245455400126 343434343434343 371111111111114 "
    # Discover
    "6011111111111117 6011000990139424 6011981111111113 6445644564456445 6011000400000000 "
    "6011601160116611 6011000000000004 6500000000000002 6011000000000012 "
    # Diners Club
    "3056930009020004 36227206271667 38520000023237 30569309025904 36006666333344 "
    "36700102000000 36148900647913 36070500001020 30000000000004 "
    # JCB
    "3566002020360505 3530111333300000 3566111111111113 3569990010095841 3528000700000000 "
    "3566000020000410 3541599999092431 "
    # UnionPay
    "6200000000000005 6200000000000047 6205500000000000004 6243030000000001 6250941006528599 "
    "6212345678901265 6212345678901232 6250946000000016 8171999927660000 8171999900000000021 "
    "6250947000000014 "
    # Maestro
    "6759649826438453 6799990100000000019 6771798021000008 6304000000000000 5018000000000009 "
    "6759000000000000005 5000550000000029 6761000000000006 "
    # Mir, Hipercard, Elo, Dankort, RuPay, Troy
    "2200000000000004 2201382000000013 2200770212727079 6062828888666688 6062826786276634 "
    "5066991111111118 6362970000457013 5019717010103742 6073849700004947 9792030000000000"
)


def generated_cards(rng: random.Random, each: int = 3) -> list[str]:
    """`each` numbers for every range and length of every network: random digits after the
    range's first ones, and the Luhn check digit."""
    numbers = []
    for _, prefixes, lengths in CARD_NETWORKS:
        for prefix in prefixes:
            low, _, high = prefix.partition("-")
            for length in lengths:
                for _ in range(each):
                    first = str(rng.randint(int(low), int(high or low))).zfill(len(low))
                    body = first + "".join(str(rng.randrange(10)) for _ in range(length - len(first) - 1))
                    numbers.append(body + _check_digit(body))
    return numbers


def _check_digit(body: str) -> str:
    return next(str(digit) for digit in range(10) if is_luhn_valid(tuple(int(c) for c in body + str(digit))))


def _groups(number: str) -> list[str]:
    """A card's digits in the groups its network prints them in."""
    if len(number) == 15 and number[:2] in ("34", "37"):
        sizes = [4, 6, 5]
    elif len(number) == 14:
        sizes = [4, 6, 4]
    else:
        sizes = [4] * (len(number) // 4) + ([len(number) % 4] if len(number) % 4 else [])
    groups, position = [], 0
    for size in sizes:
        groups.append(number[position : position + size])
        position += size
    return groups


# Joins a transcript writes between a card's groups.
CARD_JOINS = (" ", "-", ".", " - ", ":", "+", "|", "/", "−", "–", "—", "\u00a0", ", ", " and ", "  ")
CARD_QUOTES = (('"', '"'), ("'", "'"), ("“", "”"))


def _spoken_digit(rng: random.Random, digit: str, *, heard_four: bool) -> str:
    if digit == "0":
        return rng.choice(("zero", "oh", "o"))
    if digit == "4" and heard_four:
        return "for"
    return DIGIT_WORDS[int(digit)]


def _spoken(rng: random.Random, groups: list[str], join: str) -> str:
    """Groups said digit by digit, repeats sometimes said "double" or "triple", and a "four"
    now and then heard as "for"."""
    heard_four = rng.random() < 0.3
    said_groups = []
    for group in groups:
        words, index = [], 0
        while index < len(group):
            digit = group[index]
            run = 1
            while index + run < len(group) and group[index + run] == digit and run < 3:
                run += 1
            if run >= 2 and rng.random() < 0.4:
                times = "double" if run == 2 else "triple"
                words.append(f"{times} {_spoken_digit(rng, digit, heard_four=False)}")
                index += run
            else:
                words.append(_spoken_digit(rng, digit, heard_four=heard_four))
                index += 1
        said_groups.append(" ".join(words))
    text = join.join(said_groups)
    return rng.choice((text, text.capitalize(), text.upper()))


def card_forms(rng: random.Random, number: str) -> Iterator[tuple[str, str]]:
    """(form, written) for the ways a transcript writes a card number."""
    groups = _groups(number)
    yield "whole", number
    for join in CARD_JOINS:
        yield f"groups joined by {join!r}", join.join(groups)
    for opening, closing in CARD_QUOTES:
        yield f"quoted groups {opening}{closing}", " ".join(f"{opening}{g}{closing}" for g in groups)
    yield "digit by digit", " ".join(number)
    yield "spoken", _spoken(rng, groups, rng.choice((" ", ", ", " - ", " and ")))
    mixed = [g if rng.random() < 0.5 else " ".join(DIGIT_WORDS[int(d)] for d in g) for g in groups]
    yield "digits and words", " ".join(mixed)
    yield "full-width digits", " ".join("".join(chr(ord("０") + int(d)) for d in g) for g in groups)
    yield "Arabic-Indic digits", "".join(chr(0x0660 + int(d)) for d in number)
    yield "zero-width spaces", "\u200b".join(groups)
    yield "a filler", " ".join(groups[:2]) + ", uh, " + " ".join(groups[2:])


CARD_SENTENCES = (
    "my card number is {} thanks",
    "{}",
    "It's {}, expiring next year.",
    "card: {}.",
    "sure, the number is {} and that is all",
    "(card {})",
    "okay so {}!",
)


def card_samples(rng: random.Random) -> list[Sample]:
    samples = []
    for number in [*PUBLISHED_CARDS, *generated_cards(rng)]:
        for form, written in card_forms(rng, number):
            samples.append(_placed(Kind.CARD, form, rng.choice(CARD_SENTENCES), written))
    return samples


# ── SSNs ──────────────────────────────────────────────────────────────────────────────────


def generated_ssns(rng: random.Random, count: int) -> list[str]:
    """Numbers that could have been issued: area 001 to 899 but 666, group 01 to 99, serial
    0001 to 9999."""
    numbers = []
    while len(numbers) < count:
        area = rng.randint(1, 899)
        if area == 666:
            continue
        numbers.append(f"{area:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}")
    return numbers


def ssn_forms(rng: random.Random, number: str) -> Iterator[tuple[str, str]]:
    groups = [number[:3], number[3:5], number[5:]]
    for join in ("-", " ", "–", "−"):
        yield f"groups joined by {join!r}", join.join(groups)
    yield "digit by digit", " ".join(number)
    yield "spoken", _spoken(rng, groups, rng.choice((" ", ", ", " - ", " and ")))


SSN_SENTENCES = ("my social is {} ok", "SSN {}.", "social security number: {}, right?", "{}")


def ssn_samples(rng: random.Random) -> list[Sample]:
    return [
        _placed(Kind.SSN, form, rng.choice(SSN_SENTENCES), written)
        for number in generated_ssns(rng, 200)
        for form, written in ssn_forms(rng, number)
    ]


# ── e-mail addresses ────────────────────────────────────────────────────────────────────────

# Valid addresses from e-mail validators' test suites and the standards' examples, as written.
PUBLISHED_EMAILS = (
    "simple@example.com",
    "very.common@example.com",
    "x@example.com",
    "long.email-address-with-hyphens@and.subdomains.example.com",
    "user.name+tag+sorting@example.com",
    "name/surname@example.com",
    "example@s.example",
    "mailhost!username@example.org",
    "user%example.com@example.org",
    "user-@example.org",
    "Abc@example.tld",
    "Abc.123@test-example.com",
    "user+mailbox/department=shipping@example.tld",
    "!#$%&'*+-/=?^_`.{|}~@example.tld",
    "jeff@臺網中心.tw",
    "伊昭傑@郵件.商務",
    "राम@मोहन.ईन्फो",
    "юзер@екзампл.ком",
    "θσερ@εχαμπλε.ψομ",
    "葉士豪@臺網中心.tw",
    "jeff葉@臺網中心.tw",
    "ñoñó@example.tld",
    "我買@example.tld",
    "甲斐@黒川.日本",
    "чебурашка@ящик-с-апельсинами.рф",
    "उदाहरण.परीक्ष@domain.with.idn.tld",
    "ιωάννης@εεττ.gr",
    "a@xn--d1acufc.xn--p1ai",
    "user@xn--80ak6aa92e.com",
    "test@xn--bcher-kva.example",
    "$A12345@example.com",
    "!def!xyz%abc@example.com",
    "_somename@example.com",
    "customer/department=shipping@example.com",
    "user@mail2.example.co.uk",
    "first.last@iana.org",
    "1234567890123456789012345678901234567890123456789012345678901234@iana.org",
    "test@123.com",
    "a.b-c_d@a.b-c.co",
    "ทดสอบ@ตัวอย่าง.ไทย",
    "δοκιμή@παράδειγμα.δοκιμή",
    "அஞ்சல்@எடுத்துக்காட்டு.இந்தியா",
    "مثال@مثال.اختبار",
)

LOCAL_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789"
LOCAL_SIGNS = "!#$%&'*+-/=?^_`{|}~"
DOMAINS = (
    "example.com",
    "mail.example.org",
    "example.co.uk",
    "xn--bcher-kva.example",
    "xn--d1acufc.xn--p1ai",
    "пример.рф",
    "उदाहरण.भारत",
    "例え.テスト",
    "exämple.de",
)


def generated_emails(rng: random.Random, count: int) -> list[str]:
    """Dot-atoms of letters, digits and RFC 5322's specials, at the domains above."""
    addresses = []
    for _ in range(count):
        atoms = []
        for _ in range(rng.randint(1, 3)):
            size = rng.randint(1, 8)
            atoms.append(
                "".join(
                    rng.choice(LOCAL_LETTERS if rng.random() < 0.85 else LOCAL_SIGNS) for _ in range(size)
                )
            )
        addresses.append(f"{'.'.join(atoms)}@{rng.choice(DOMAINS)}")
    return addresses


def email_forms(address: str) -> Iterator[tuple[str, str]]:
    yield "as written", address
    decomposed = unicodedata.normalize("NFD", address)
    if decomposed != address:
        yield "decomposed (NFD)", decomposed


EMAIL_SENTENCES = (
    "write to {} please",
    "my e-mail is {}.",
    "<{}>",
    "({})",
    "email:{}",
    "'{}'",
    "{}, thanks",
    "send it to {}!",
)


def email_samples(rng: random.Random) -> list[Sample]:
    return [
        _placed(Kind.EMAIL, form, sentence, written)
        for address in [
            *PUBLISHED_EMAILS,
            *generated_emails(rng, 300),
            "élodie@exemple.fr",
            "josé@example.com",
        ]
        for form, written in email_forms(address)
        for sentence in rng.sample(EMAIL_SENTENCES, 2)
    ]


# ── phone numbers ───────────────────────────────────────────────────────────────────────────

PHONE_REGIONS = _listed(
    "US CA GB DE FR IT ES NL BE CH AT SE NO DK FI IE PT PL CZ AU NZ JP KR CN IN BR MX AR ZA NG "
    "EG IL AE SA TR RU UA SG HK TW TH VN ID PH MY CL CO PE"
)


def example_phones() -> list[phonenumbers.PhoneNumber]:
    """libphonenumber's own example numbers: a fixed line and a mobile for each region."""
    numbers = []
    for region in PHONE_REGIONS:
        for kind in (phonenumbers.PhoneNumberType.FIXED_LINE, phonenumbers.PhoneNumberType.MOBILE):
            number = phonenumbers.example_number_for_type(region, kind)
            if number is not None:
                numbers.append(number)
    return numbers


def generated_us_phones(rng: random.Random, count: int) -> list[phonenumbers.PhoneNumber]:
    numbers: list[phonenumbers.PhoneNumber] = []
    while len(numbers) < count:
        national = f"{rng.randint(201, 989)}{rng.randint(200, 999)}{rng.randint(0, 9999):04d}"
        number = phonenumbers.parse(national, "US")
        if phonenumbers.is_valid_number(number):
            numbers.append(number)
    return numbers


def phone_forms(number: phonenumbers.PhoneNumber) -> Iterator[tuple[str, str]]:
    international = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL)
    yield "international", international
    yield "E.164", phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    if number.country_code == 1:
        national = str(number.national_number)
        area, exchange, line = national[:3], national[3:6], national[6:]
        yield "(area) exchange-line", f"({area}) {exchange}-{line}"
        for join in ("-", ".", " ", "−", "–"):
            yield f"joined by {join!r}", join.join((area, exchange, line))
        yield "whole", national
        yield "1-area-exchange-line", f"1-{area}-{exchange}-{line}"
        yield "+1 dashes", f"+1-{area}-{exchange}-{line}"


PHONE_SENTENCES = ("call me at {} tonight", "my number is {}.", "{}", "phone: {}, thanks")


def phone_samples(rng: random.Random) -> list[Sample]:
    return [
        _placed(Kind.PHONE, form, rng.choice(PHONE_SENTENCES), written)
        for number in [*example_phones(), *generated_us_phones(rng, 100)]
        for form, written in phone_forms(number)
    ]


# ── IBANs ───────────────────────────────────────────────────────────────────────────────────

# The example IBAN of each country in the IBAN registry (SWIFT), as its tables print them.
PUBLISHED_IBANS = _listed(
    "AD1200012030200359100100 AE070331234567890123456 AL47212110090000000235698741 AT611904300234573201 "
    "AZ21NABZ00000000137010001944 BA391290079401028494 BE68539007547034 BG80BNBG96611020345678 "
    "BH67BMAG00001299123456 BR1800360305000010009795493C1 CH9300762011623852957 CR05015202001026284066 "
    "CY17002001280000001200527600 CZ6508000000192000145399 DE89370400440532013000 DK5000400440116243 "
    "DO28BAGR00000001212453611324 EE382200221020145685 EG380019000500000000263180002 "
    "ES9121000418450200051332 FI2112345600000785 FO6264600001631634 FR1420041010050500013M02606 "
    "GB29NWBK60161331926819 GE29NB0000000101904917 GI75NWBK000000007099453 GL8964710001000206 "
    "GR1601101250000000012300695 GT82TRAJ01020000001210029690 HR1210010051863000160 "
    "HU42117730161111101800000000 IE29AIBK93115212345678 IL620108000000099999999 IQ98NBIQ850123456789012 "
    "IS140159260076545510730339 IT60X0542811101000000123456 JO94CBJO0010000000000131000302 "
    "KW81CBKU0000000000001234560101 KZ86125KZT5004100100 LB62099900000001001901229114 "
    "LC55HEMM000100010012001200023015 LI21088100002324013AA LT121000011101001000 LU280019400644750000 "
    "LV80BANK0000435195001 MC5811222000010123456789030 MD24AG000225100013104168 ME25505000012345678951 "
    "MK07250120000058984 MR1300020001010000123456753 MT84MALT011000012345MTLCAST001S "
    "MU17BOMM0101101030300200000MUR NL91ABNA0417164300 NO9386011117947 PK36SCBL0000001123456702 "
    "PL61109010140000071219812874 PS92PALS000000000400123456702 PT50000201231234567890154 "
    "QA58DOHB00001234567890ABCDEFG RO49AAAA1B31007593840000 RS35260005601001611379 "
    "SA0380000000608010167519 SC18SSCB11010000000000001497USD SE4550000000058398257466 "
    "SI56263300012039086 SK3112000000198742637541 SM86U0322509800000000270100 ST68000100010051845310112 "
    "SV62CENR00000000000000700025 TL380080012345678910157 TN5910006035183598478831 "
    "TR330006100519786457841326 UA213223130000026007233566001 VA59001123000012345678 "
    "VG96VPVG0000012345678901 XK051212012345678906 BY13NBRB3600900000002Z00AB00 LY83002048000020100120361 "
    "SD2129010501234001 GB82WEST12345698765432"
)


def generated_ibans(rng: random.Random, each: int) -> list[str]:
    """Each registry example with its digits drawn anew (letters kept where its country's
    format has them) and its check digits made right."""
    ibans = []
    for example in PUBLISHED_IBANS:
        for _ in range(each):
            bban = "".join(str(rng.randrange(10)) if char.isdecimal() else char for char in example[4:])
            country = example[:2]
            check = 98 - int("".join(str(int(c, 36)) for c in bban + country + "00")) % 97
            ibans.append(f"{country}{check:02d}{bban}")
    return ibans


def iban_forms(iban: str) -> Iterator[tuple[str, str]]:
    grouped = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
    yield "whole", iban
    yield "whole, lower case", iban.lower()
    yield "groups of four", grouped
    yield "groups of four, lower case", grouped.lower()


IBAN_SENTENCES = ("my IBAN is {} thanks", "IBAN: {}.", "{}", "pay into {}, please")


def iban_samples(rng: random.Random) -> list[Sample]:
    return [
        _placed(Kind.IBAN, form, rng.choice(IBAN_SENTENCES), written)
        for iban in [*PUBLISHED_IBANS, *generated_ibans(rng, 2)]
        for form, written in iban_forms(iban)
    ]


def documented(seed: int = SEED) -> list[Sample]:
    """Every kind's samples, the same on every run."""
    rng = random.Random(seed)
    return [
        *card_samples(rng),
        *ssn_samples(rng),
        *email_samples(rng),
        *phone_samples(rng),
        *iban_samples(rng),
    ]


# ── benign numbers ──────────────────────────────────────────────────────────────────────────


def _luhn_valid(rng: random.Random, first: str, length: int) -> str:
    """A number of `length` digits beginning with `first`, made to pass Luhn: the worst case
    for a tracking number, which one in ten does by chance."""
    body = first + "".join(str(rng.randrange(10)) for _ in range(length - len(first) - 1))
    return body + _check_digit(body)


def _in_fours(number: str) -> str:
    return " ".join(number[i : i + 4] for i in range(0, len(number), 4))


def tracking_numbers(rng: random.Random) -> list[str]:
    """Tracking numbers in the carriers' forms, the all-digit ones Luhn-valid."""
    numbers = []
    for _ in range(20):
        letters = "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ0123456789") for _ in range(6))
        numbers.append(f"1Z{letters}{rng.randint(0, 99):02d}{rng.randint(0, 10**8 - 1):08d}")  # UPS
        numbers.append(f"T{rng.randint(0, 10**10 - 1):010d}")  # UPS Mail Innovations
        numbers.append(_luhn_valid(rng, str(rng.randint(1, 9)), 12))  # FedEx Express
        numbers.append(_luhn_valid(rng, "0", 15))  # FedEx Ground
        numbers.append(_luhn_valid(rng, "96", 22))  # FedEx Ground 96
        numbers.append(_luhn_valid(rng, "6129", 20))  # FedEx SmartPost
        for prefix in ("9400", "9205", "9407", "9303", "9270", "9361", "9202"):
            usps = _luhn_valid(rng, prefix, rng.choice((20, 22)))
            numbers.append(usps)  # USPS
            numbers.append(_in_fours(usps))
        numbers.append(f"420{rng.randint(10000, 99999)}{_luhn_valid(rng, '9400', 22)}")  # USPS with ZIP
        numbers.append(f"{rng.randint(10**9, 10**10 - 1)}")  # DHL Express
        numbers.append(f"JJD{_luhn_valid(rng, '00', 18)}")  # DHL Parcel
        numbers.append(f"GM{_luhn_valid(rng, '60', 16)}")  # DHL eCommerce
        numbers.append(f"{rng.choice('ABCEHLRV')}{rng.choice('ABCEHLRV')}{rng.randint(10**8, 10**9 - 1)}GB")
        numbers.append(f"TBA{rng.randint(10**11, 10**12 - 1)}")  # Amazon Logistics
        numbers.append(f"C{_luhn_valid(rng, '1', 14)}")  # OnTrac
    return numbers


def order_numbers(rng: random.Random) -> list[str]:
    numbers = []
    for _ in range(60):
        numbers.append(
            f"{rng.randint(111, 114)}-{rng.randint(0, 10**7 - 1):07d}-{rng.randint(0, 10**7 - 1):07d}"
        )
        length = rng.randint(5, 12)
        numbers.append(str(rng.randint(10 ** (length - 1), 10**length - 1)))
        numbers.append(f"#{rng.randint(1000, 99999)}")
        numbers.append(f"PO-{rng.randint(2020, 2030)}-{rng.randint(1, 99999):05d}")
        day = f"{rng.randint(2020, 2030)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
        numbers.append(f"INV-{day}-{rng.randint(1, 9999):04d}")
        numbers.append(f"{rng.randint(10, 99)} {rng.randint(100, 999)} {rng.randint(100, 999)}")
    return numbers


def dates(rng: random.Random) -> list[str]:
    texts = []
    for _ in range(60):
        year, month, day = rng.randint(1990, 2035), rng.randint(1, 12), rng.randint(1, 28)
        hour, minute = rng.randint(0, 23), rng.randint(0, 59)
        texts += [
            f"{year}-{month:02d}-{day:02d}",
            f"{month:02d}/{day:02d}/{year}",
            f"{day:02d}.{month:02d}.{year}",
            f"{year}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00",
            f"{month}/{day}/{year} at {hour}:{minute:02d}",
            f"between {month:02d}/{day:02d}/{year} and {month:02d}/{day + 2:02d}/{year}",
            f"{day} {rng.choice(('January', 'March', 'June', 'October'))} {year}",
        ]
    return texts


def amounts(rng: random.Random) -> list[str]:
    texts = []
    for _ in range(60):
        whole, cents = rng.randint(1, 999_999), rng.randint(0, 99)
        dotted = f"{whole:,}".replace(",", ".")
        texts += [
            f"${whole:,}.{cents:02d}",
            f"{whole:,}.{cents:02d} €".replace(",", " "),
            f"{dotted},{cents:02d} EUR",
            f"USD {whole:,}.{cents:02d}",
            f"£{rng.randint(1, 999)}.{cents:02d} and £{rng.randint(1, 999)}.{cents:02d}",
            f"{rng.randint(1, 99)} x {rng.randint(1, 99)} bottles",
        ]
    return texts


def times(rng: random.Random) -> list[str]:
    texts = []
    for _ in range(60):
        hour, minute, second = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
        texts += [
            f"{hour:02d}:{minute:02d}",
            f"{hour:02d}:{minute:02d}:{second:02d}",
            f"at {rng.randint(1, 12)}:{minute:02d} pm",
            f"from {hour:02d}:{minute:02d} to {(hour + 1) % 24:02d}:{minute:02d}",
        ]
    return texts


BENIGN_SENTENCES = {
    "order": ("your order {} has shipped", "order number {}, thanks", "it is {}"),
    "tracking": ("the tracking number is {}", "tracking {} please", "{}"),
    "date": ("we open on {}", "delivered {}.", "{}"),
    "amount": ("that will be {}", "the total is {}, okay?", "{}"),
    "time": ("see you {}", "the call is at {}", "{}"),
}


def benign(seed: int = SEED) -> list[Benign]:
    """Texts with numbers of every benign category, the same on every run."""
    rng = random.Random(seed)
    made = {
        "order": order_numbers(rng),
        "tracking": tracking_numbers(rng),
        "date": dates(rng),
        "amount": amounts(rng),
        "time": times(rng),
    }
    return [
        Benign(category, rng.choice(BENIGN_SENTENCES[category]).format(number))
        for category, numbers in made.items()
        for number in numbers
    ]


def premises_hold() -> list[str]:
    """What the corpus takes for granted, checked: every published card is a card and every
    IBAN an IBAN (a value that is not would measure nothing)."""
    wrong = [number for number in PUBLISHED_CARDS if not is_card_number(tuple(int(d) for d in number))]
    wrong += [iban for iban in PUBLISHED_IBANS if not is_valid_iban(iban)]
    return wrong
