"""A campaign's contacts: checked one by one in JSON, and read from CSV row by row, each bad row
refused by its line and reason, a file that is no contact list refused whole."""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.call.errors import MalformedRequest
from pipeline.outbound.contacts import (
    MAXIMUM_CONTACTS,
    Contact,
    RefusedRow,
    iter_contacts,
    parse_contacts_csv,
    zone_refusal,
)
from pipeline.outbound.window import Window

# ── JSON ────────────────────────────────────────────────────────────────────────────────


def test_a_contact_is_a_number_its_vars_and_its_zone() -> None:
    """A contact's vars are made strings; its zone is checked."""
    contact = Contact.model_validate({"to": "+14155550123", "vars": {"name": "Dana", "balance": 12}})
    assert contact == Contact(to="+14155550123", vars={"name": "Dana", "balance": "12"}, timezone=None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"to": "4155550123"}, "not an E.164 number"),
        ({"to": "+14155550123", "timezone": "Pacific/Atlantis"}, "not an IANA time zone"),
        ({"to": "+14155550123", "vars": {"vip": True}}, "a var is a string or a number"),
        ({"to": "+14155550123", "name": "Dana"}, "Extra inputs are not permitted"),
        ({"vars": {}}, "Field required"),
    ],
)
def test_a_contact_body_that_is_wrong_is_refused_saying_why(body: dict[str, object], message: str) -> None:
    """A number, a zone, vars or a field that is wrong: a 422 naming it."""
    with pytest.raises(ValidationError, match=message):
        Contact.model_validate(body)


def test_a_contact_s_own_zone_wins_over_its_number_s() -> None:
    """The zone it says, else its number's, else none (a number in several zones)."""
    assert Contact(to="+14155550123").zone == "America/Los_Angeles"
    assert Contact(to="+14155550123", timezone="Europe/Paris").zone == "Europe/Paris"
    assert Contact(to="+12085550123").zone is None


def test_a_contact_with_no_zone_needs_the_window_to_have_one() -> None:
    """In a window with no zone, a contact whose number does not tell its zone is refused."""
    bare = Window.model_validate({"days": ["mon"], "start": "09:00", "end": "17:00"})
    zoned = bare.model_copy(update={"timezone": "America/Denver"})
    idaho = Contact(to="+12085550123")
    assert "give the contact a timezone" in (zone_refusal(idaho, bare) or "")
    assert zone_refusal(idaho, zoned) is None
    assert zone_refusal(idaho, None) is None
    assert zone_refusal(Contact(to="+14155550123"), bare) is None


# ── CSV ─────────────────────────────────────────────────────────────────────────────────


def test_a_csv_gives_its_contacts_with_vars_and_zones() -> None:
    """The number column, an optional timezone, every other column a var; empty cells are no var."""
    contacts, refused = parse_contacts_csv(
        "to,timezone,first_name,plan\n+14155550123,,Dana,gold\n+33612345678,Europe/Paris,Léa,\n"
    )
    assert refused == ()
    assert contacts == (
        Contact(to="+14155550123", vars={"first_name": "Dana", "plan": "gold"}),
        Contact(to="+33612345678", vars={"first_name": "Léa"}, timezone="Europe/Paris"),
    )


@pytest.mark.parametrize("header", ["to", "number", "Phone", " TO ", "\ufeffto"])
def test_the_number_column_may_be_to_number_or_phone(header: str) -> None:
    """Any of the three names, any case, spaces around it, a spreadsheet's byte-order mark before it."""
    contacts, _ = parse_contacts_csv(f"{header},name\r\n+14155550123,Dana\r\n")
    assert contacts == (Contact(to="+14155550123", vars={"name": "Dana"}),)


def test_each_bad_row_is_refused_by_its_line_and_reason_and_the_rest_taken() -> None:
    """Not E.164, no valid number, an unknown zone, a long value, a repeated number (in another
    spelling too), the wrong number of cells."""
    text = (
        "to,timezone,name\n"  # line 1
        "+14155550123,,Dana\n"  # 2: taken
        "4155550124,,Sam\n"  # 3
        "+14155550125,Mars/Olympus,Ana\n"  # 4
        "\n"  # 5: blank, skipped
        f"+14155550126,,{'x' * 201}\n"  # 6
        "+14155550123,,Dana again\n"  # 7
        "+14155550127,,Bo,extra\n"  # 8
        '+14155550128,,"two\nlines"\n'  # 9-10: taken, a value over two lines
        "+14155550128,,twice\n"  # 11
        "+1415,,Short\n"  # 12
        "+44 20 7123 4567,,Ada\n"  # 13: taken, as +442071234567
        "+4402071234567,,Ada again\n"  # 14: the same number, with the trunk prefix
    )
    contacts, refused = parse_contacts_csv(text)
    assert [contact.to for contact in contacts] == ["+14155550123", "+14155550128", "+442071234567"]
    assert contacts[1].vars == {"name": "two\nlines"}
    assert [(row.line, row.reason) for row in refused] == [
        (
            3,
            "'4155550124' is not an E.164 number (a '+', the country code and the number, as in "
            "+14155550123; spaces, dashes, dots and parentheses between the digits are taken)",
        ),
        (4, "'Mars/Olympus' is not an IANA time zone (such as 'America/New_York')"),
        (6, "var 'name' is 201 characters long; at most 200"),
        (7, "+14155550123 is on line 2 already"),
        (8, "4 cells; the header has 3"),
        (11, "+14155550128 is on line 9 already"),
        (12, "'+1415' is not a valid phone number: too short for a number of +1"),
        (14, "+442071234567 is on line 13 already"),
    ]


def test_a_row_with_more_than_twenty_vars_filled_is_refused() -> None:
    """Vars are counted per row: empty cells do not count."""
    names = [f"v{i}" for i in range(21)]
    full = ",".join("x" for _ in names)
    sparse = ",".join("x" if i < 20 else "" for i in range(21))
    contacts, refused = parse_contacts_csv(
        f"to,{','.join(names)}\n+14155550123,{full}\n+14155550124,{sparse}\n"
    )
    assert refused == (RefusedRow(2, "21 vars; at most 20"),)
    assert len(contacts) == 1


def test_a_column_with_no_name_is_ignored() -> None:
    """A trailing comma in a spreadsheet's export is no var."""
    contacts, refused = parse_contacts_csv("to,name,\n+14155550123,Dana,\n")
    assert (contacts, refused) == ((Contact(to="+14155550123", vars={"name": "Dana"}),), ())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("\n\n", "the file is empty"),
        ("name,plan\nDana,gold\n", "no number column"),
        ("to;name\n+14155550123;Sam\n", "the columns are separated by ';', not commas"),
        ("to\tname\n+14155550123\tSam\n", "the columns are separated by '\\t', not commas"),
        ("to,phone\n+14155550123,+14155550124\n", "2 number columns ('to', 'phone')"),
        ("to,name,Name\n", "names 'name' twice"),
        ("to,first name\n", "column 'first name' is not a var name"),
        ("to," + ",".join(f"c{i}" for i in range(64)) + "\n", "65 columns; at most 64"),
        ('to,name\n+14155550123,"unclosed\n', "not CSV (unexpected end of data)"),
        ('to,name\n+14155550123,"a"b\n', "line 2: not CSV"),
    ],
)
def test_a_file_that_is_no_contact_list_is_refused_whole(text: str, message: str) -> None:
    """No header, no number column or two, a column named twice, a header that is no var name,
    malformed CSV: MalformedRequest (422), saying what to fix."""
    with pytest.raises(MalformedRequest, match=re.escape(message)):
        parse_contacts_csv(text)


def _rows(count: int) -> Iterator[str]:
    yield "to,name\n"
    for index in range(count):
        yield f"+1415{2_000_000 + index:07d},Contact {index}\n"


def test_a_hundred_thousand_rows_are_read_and_one_more_refuses_the_file() -> None:
    """The bound is the file's rows: 100,000 are read (each number parsed by libphonenumber:
    about 4 s of CPU, 20 s allowed on a shared machine), 100,001 refuse the whole file with a
    message saying to split it."""
    started = time.perf_counter()
    read = sum(1 for item in iter_contacts(_rows(MAXIMUM_CONTACTS)) if isinstance(item, Contact))
    assert read == MAXIMUM_CONTACTS
    assert time.perf_counter() - started < 20
    with pytest.raises(MalformedRequest, match=r"more than 100,000 rows \(line 100002\): .* split the list"):
        for _ in iter_contacts(_rows(MAXIMUM_CONTACTS + 1)):
            pass


def test_rows_are_given_as_they_are_read() -> None:
    """iter_contacts reads no further than the row it gives: a caller can page rows into the
    database while the file is still arriving."""
    consumed = []

    def lines() -> Iterator[str]:
        for line in ["to\n", "+14155550123\n", "+14155550124\n"]:
            consumed.append(line)
            yield line
        raise AssertionError("read past the rows asked for")

    contacts = iter_contacts(lines())
    assert next(contacts) == Contact(to="+14155550123")
    assert len(consumed) == 2


VALUES = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40).filter(lambda v: v != "")
CONTACTS = st.lists(
    st.tuples(
        # Valid numbers, in their E.164 form: San Francisco's and Manhattan's.
        st.integers(2_000_000, 9_999_999).map(lambda n: f"+1415{n}")
        | st.integers(2_000_000, 9_999_999).map(lambda n: f"+1212{n}"),
        st.none() | st.sampled_from(["Europe/Paris", "America/Chicago", "Asia/Tokyo"]),
        st.lists(VALUES | st.just(""), min_size=3, max_size=3),
    ),
    max_size=20,
    unique_by=lambda row: row[0],
)


@settings(max_examples=200)
@given(CONTACTS)
def test_contacts_written_as_csv_read_back_as_they_were(
    rows: list[tuple[str, str | None, list[str]]],
) -> None:
    """Any contacts (values with commas, quotes, line breaks), written by Python's csv writer,
    read back as the same contacts, none refused."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["phone", "timezone", "a", "b", "c"])
    for number, zone, values in rows:
        writer.writerow([number, zone or "", *values])
    contacts, refused = parse_contacts_csv(out.getvalue())
    assert refused == ()
    assert contacts == tuple(
        Contact(
            to=number,
            timezone=zone,
            vars={name: value for name, value in zip("abc", values, strict=True) if value != ""},
        )
        for number, zone, values in rows
    )
