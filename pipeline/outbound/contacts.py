"""A campaign's contacts: who is called, in which zone, with which vars; read from JSON or CSV.

A CSV file has a header row. One column is the number to call: `to` (or `number`, or
`phone`; case and surrounding spaces do not matter). An optional `timezone` column gives a
contact's IANA zone; every other column is a var, named by its header (which must be a var
name). An empty cell is no var for that contact; an empty `timezone` is no zone of its own.

Each row is taken or refused on its own, by its line number and the reason: a number that is
not a valid one (`pipeline.phone.numbers`), an unknown time zone, more than `MAXIMUM_VARS` vars
filled, a value too long, a number the file had already (in any spelling: a number is kept and
compared in its E.164 form), or a row with more or fewer cells than the header. Blank lines
are skipped, and so are the cells of a column with no name (a spreadsheet's trailing comma).

A file that cannot be read as contacts at all (no number column, a column named twice, a
header that is not a var name, malformed CSV) or that has more than `MAXIMUM_CONTACTS` rows is
refused whole with `MalformedRequest` (422): a campaign gets all of its list or none of it.

`iter_contacts` reads row by row, holding one row and the numbers seen so far (for the
duplicates), so a caller can page 100,000 rows into the database as they come; it raises
only when the file's header is wrong or its rows run past the bound, so a caller writing rows
as they come does so inside one transaction.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, field_validator

from pipeline.call.errors import MalformedNumber, MalformedRequest
from pipeline.outbound.numbers import timezone_of
from pipeline.outbound.vars import MAXIMUM_VAR_NAME_CHARS, VAR_NAME, ContactVars, checked_vars
from pipeline.outbound.window import Window, is_timezone
from pipeline.phone.numbers import E164Number, e164

# A campaign dials at most this many contacts: a day's work for 100 lines at 1,000 calls each.
# A list longer than that is two campaigns (and one mistake costs less).
MAXIMUM_CONTACTS = 100_000
# A header of more columns than this is no contact list (20 vars and the number and zone fit
# many times over); it is refused before any row is read.
MAXIMUM_COLUMNS = 64

NUMBER_COLUMNS = ("to", "number", "phone")
TIMEZONE_COLUMN = "timezone"


class Contact(BaseModel):
    """One person a campaign calls: the number, the vars its session is filled with, and its
    zone when its number does not tell (or tells wrong)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    to: E164Number
    vars: ContactVars = {}
    timezone: str | None = None

    @field_validator("timezone")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        if value is not None and not is_timezone(value):
            raise ValueError(f"{value[:64]!r} is not an IANA time zone (such as 'America/New_York')")
        return value

    @property
    def zone(self) -> str | None:
        """The contact's own zone: the one it says, else its number's (None when the number
        spans several zones or none)."""
        return self.timezone if self.timezone is not None else timezone_of(self.to)


def zone_refusal(contact: Contact, window: Window | None) -> str | None:
    """Why a contact cannot be called within a window, or None: with no zone of its own and
    none in the window, the window would be read in UTC, which is nobody's business hours."""
    if window is None or window.timezone is not None or contact.zone is not None:
        return None
    return (
        f"{contact.to}: its number does not tell its time zone (none, or several); "
        "give the contact a timezone, or the window one"
    )


@dataclass(frozen=True, slots=True)
class RefusedRow:
    """A CSV row not taken: the line it starts on (the header is line 1) and why."""

    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class _Header:
    number: int
    timezone: int | None
    vars: tuple[tuple[int, str], ...]
    width: int


def _header(cells: list[str]) -> _Header:
    names = [cell.strip() for cell in cells]
    if names:
        # Spreadsheets write UTF-8 CSV with a byte-order mark before the first header.
        names[0] = names[0].removeprefix("\ufeff").strip()
    if len(names) > MAXIMUM_COLUMNS:
        raise MalformedRequest(f"the header has {len(names)} columns; at most {MAXIMUM_COLUMNS}")
    folded = [name.casefold() for name in names]
    twice = sorted({name for name in folded if name and folded.count(name) > 1})
    if twice:
        raise MalformedRequest(f"the header names {', '.join(map(repr, twice))} twice")
    numbers = [index for index, name in enumerate(folded) if name in NUMBER_COLUMNS]
    if not numbers:
        if len(names) == 1 and any(separator in names[0] for separator in ";\t|"):
            # A spreadsheet of another locale writes ';' between columns: the header is one cell.
            found = next(separator for separator in ";\t|" if separator in names[0])
            raise MalformedRequest(
                f"the columns are separated by {found!r}, not commas: save the file as CSV with commas"
            )
        raise MalformedRequest("the header has no number column: name it 'to' (or 'number', 'phone')")
    if len(numbers) > 1:
        named = ", ".join(repr(names[index]) for index in numbers)
        raise MalformedRequest(f"the header has {len(numbers)} number columns ({named}): keep one")
    timezone = folded.index(TIMEZONE_COLUMN) if TIMEZONE_COLUMN in folded else None
    var_columns = []
    for index, name in enumerate(names):
        # A column with no name (a spreadsheet's trailing comma) holds nothing to read.
        if index in (numbers[0], timezone) or not name:
            continue
        if not VAR_NAME.fullmatch(name):
            raise MalformedRequest(
                f"column {name[: MAXIMUM_VAR_NAME_CHARS + 10]!r} is not a var name (a letter or _, "
                f"then letters, digits or _; at most {MAXIMUM_VAR_NAME_CHARS}): rename it"
            )
        var_columns.append((index, name))
    return _Header(numbers[0], timezone, tuple(var_columns), len(names))


def _row(header: _Header, cells: list[str]) -> Contact | str:
    """The row's contact, or why it is refused."""
    if len(cells) != header.width:
        return f"{len(cells)} cells; the header has {header.width}"
    try:
        number = e164(cells[header.number].strip())
    except MalformedNumber as refused:
        return str(refused)
    timezone = cells[header.timezone].strip() if header.timezone is not None else ""
    if timezone and not is_timezone(timezone):
        return f"{timezone[:64]!r} is not an IANA time zone (such as 'America/New_York')"
    filled = {name: cells[index] for index, name in header.vars if cells[index] != ""}
    try:
        vars = checked_vars(filled)
    except ValueError as refused:
        return str(refused)
    return Contact(to=number, vars=vars, timezone=timezone or None)


def iter_contacts(lines: Iterable[str]) -> Iterator[Contact | RefusedRow]:
    """The CSV's contacts and refused rows, in file order (see the module docstring). `lines`
    is the file's lines, as a file opened with `newline=""` gives them."""
    for row in iter_numbered_contacts(lines):
        yield row if isinstance(row, RefusedRow) else row.contact


@dataclass(frozen=True, slots=True)
class NumberedContact:
    """A CSV row taken: the line it starts on (the header is line 1) and its contact."""

    line: int
    contact: Contact


def iter_numbered_contacts(lines: Iterable[str]) -> Iterator[NumberedContact | RefusedRow]:
    """`iter_contacts`, each contact with the line its row starts on."""
    # Strict: a quote left open or a stray one after a closing quote refuses the file, instead of
    # silently running rows together.
    reader = csv.reader(lines, strict=True)
    seen: dict[str, int] = {}
    rows = 0
    header: _Header | None = None
    ended = 0
    try:
        for cells in reader:
            line = ended + 1
            ended = reader.line_num
            if not cells or all(cell.strip() == "" for cell in cells):
                continue
            if header is None:
                header = _header(cells)
                continue
            rows += 1
            if rows > MAXIMUM_CONTACTS:
                raise MalformedRequest(
                    f"the file has more than {MAXIMUM_CONTACTS:,} rows (line {line}): a campaign "
                    "takes at most that many contacts; split the list into campaigns"
                )
            taken = _row(header, cells)
            if isinstance(taken, str):
                yield RefusedRow(line, taken)
            elif taken.to in seen:
                yield RefusedRow(line, f"{taken.to} is on line {seen[taken.to]} already")
            else:
                seen[taken.to] = line
                yield NumberedContact(line, taken)
    except csv.Error as malformed:
        raise MalformedRequest(f"line {reader.line_num}: not CSV ({malformed})") from malformed
    if header is None:
        raise MalformedRequest("the file is empty: it needs a header row and a row per contact")


def parse_contacts_csv(text: str) -> tuple[tuple[Contact, ...], tuple[RefusedRow, ...]]:
    """The contacts a CSV text gives, and its refused rows (see `iter_contacts`)."""
    contacts: list[Contact] = []
    refused: list[RefusedRow] = []
    # Lines end only at \r and \n, as CSV's do: a U+2028 inside a value is part of it.
    for item in iter_contacts(io.StringIO(text, newline="")):
        if isinstance(item, RefusedRow):
            refused.append(item)
        else:
            contacts.append(item)
    return tuple(contacts), tuple(refused)
