"""A calling window: the days and hours a contact may be called, in the contact's own time.

A window is open at an instant when, on the wall clock of the zone it is read in, the day is
one of its `days` and the time is at or after `start` and before `end`. The zone is the
contact's own when it has one (said with the contact, or known from its number); else the
window's `timezone`; else UTC. Reading the wall clock at each instant is what keeps it right
across daylight-saving changes: on a spring-forward day a window from 02:30 opens at 03:00
(the first instant its wall clock is past 02:30); on a fall-back day the hour that repeats is
in the window both times.

`next_open` is the earliest instant at or after `now` the window is open. A window opens at
an instant whose wall clock reads `start`, or at a change of the zone's UTC offset that jumps
the wall clock into the window, so those are the only instants it needs to look at.

Instants go in and come out as aware datetimes (out in UTC). The zone rules come from the
system's IANA database (`zoneinfo`), read once and cached: the one input here that is not an
argument.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Weekday(StrEnum):
    """The days of the week, Monday first (as `datetime.weekday()` counts them)."""

    MON = "mon"
    TUE = "tue"
    WED = "wed"
    THU = "thu"
    FRI = "fri"
    SAT = "sat"
    SUN = "sun"


_WEEKDAYS = tuple(Weekday)

# "HH:MM", 00:00 to 23:59; an end may also be 24:00 (until midnight).
_CLOCK = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")
_MIDNIGHT_AFTER = "24:00"
MINUTES_IN_A_DAY = 1_440

# IANA names are ASCII letters, digits, "_", "-", "+" and "/"; the longest is 32 characters.
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-/]{1,64}")
# In the database's list but no place's zone: the machine's own ("localtime") and tzdata's
# placeholder for an unset clock ("Factory").
_NOT_PLACES = frozenset({"localtime", "Factory"})

# How far ahead `next_open` looks. A window with one day a week opens within 7 days; a
# daylight-saving change can swallow one day's opening (a window 02:00-02:30 on the Sunday
# the clocks go forward) and a zone can skip a date (Pacific/Apia skipped 2011-12-30), which
# puts it off one more week at most.
SEARCH_DAYS = 16
# Zone offsets are sampled this often to find their changes: no zone changes twice within it.
_OFFSET_SAMPLE = timedelta(hours=1)


@cache
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones()) - _NOT_PLACES


def is_timezone(name: str) -> bool:
    """Whether `name` is an IANA time zone this machine knows (`Europe/Paris`, `UTC`)."""
    return _ZONE_NAME.fullmatch(name) is not None and name in _known_zones()


def _minutes(clock: str) -> int:
    if clock == _MIDNIGHT_AFTER:
        return MINUTES_IN_A_DAY
    matched = _CLOCK.fullmatch(clock)
    if matched is None:
        raise ValueError(f"{clock[:20]!r} is not a time of day (HH:MM, 00:00 to 23:59)")
    return int(matched[1]) * 60 + int(matched[2])


class Window(BaseModel):
    """The days and the hours of the day a contact may be called, on its own wall clock
    (`timezone` is for contacts with no zone of their own)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    timezone: str | None = None
    days: tuple[Weekday, ...] = Field(max_length=7)
    start: str
    end: str

    @field_validator("timezone")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        if value is not None and not is_timezone(value):
            raise ValueError(f"{value[:64]!r} is not an IANA time zone (such as 'America/New_York')")
        return value

    @field_validator("days")
    @classmethod
    def _some_days(cls, days: tuple[Weekday, ...]) -> tuple[Weekday, ...]:
        if not days:
            raise ValueError("a window with no days never opens: name at least one (mon … sun)")
        if len(set(days)) != len(days):
            raise ValueError("a day is named twice")
        return days

    @field_validator("start")
    @classmethod
    def _start(cls, value: str) -> str:
        if value == _MIDNIGHT_AFTER:
            raise ValueError("start 24:00 is the next day's 00:00: a window starts at 00:00 to 23:59")
        _minutes(value)
        return value

    @field_validator("end")
    @classmethod
    def _end(cls, value: str) -> str:
        _minutes(value)
        return value

    @model_validator(mode="after")
    def _start_before_end(self) -> Window:
        if self.start_minute >= self.end_minute:
            raise ValueError(
                f"start {self.start} is not before end {self.end}: a window cannot run across "
                "midnight (it ends by 24:00 on the day it starts)"
            )
        return self

    @property
    def start_minute(self) -> int:
        """Minutes after midnight the window opens."""
        return _minutes(self.start)

    @property
    def end_minute(self) -> int:
        """Minutes after midnight it closes (1,440 for 24:00)."""
        return _minutes(self.end)


def window_zone(window: Window | None, zone: str | None) -> ZoneInfo:
    """The zone a window is read in for a contact: the contact's own, else the window's, else UTC."""
    name = zone if zone is not None else (window.timezone if window is not None else None)
    if name is None:
        return ZoneInfo("UTC")
    if not is_timezone(name):
        raise ValueError(f"{name[:64]!r} is not an IANA time zone")
    return ZoneInfo(name)


def utc_instant(now: datetime) -> datetime:
    """An aware instant in UTC; ValueError for a naive datetime (it names no instant)."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"{now.isoformat()} has no time zone: instants are aware datetimes")
    return now.astimezone(UTC)


def _is_open_in(window: Window, tz: ZoneInfo, instant: datetime) -> bool:
    local = instant.astimezone(tz)
    minute = local.hour * 60 + local.minute
    # The bounds are whole minutes, so comparing the minute the wall clock is in is exact.
    return _WEEKDAYS[local.weekday()] in window.days and window.start_minute <= minute < window.end_minute


def is_open(window: Window, zone: str | None, now: datetime) -> bool:
    """Whether the window is open at `now` for a contact in `zone` (None: the window's own)."""
    return _is_open_in(window, window_zone(window, zone), utc_instant(now))


def _openings(window: Window, tz: ZoneInfo, first: date, days: int) -> list[datetime]:
    """The instants whose wall clock reads `start` on the window's days (two on a date whose
    clock goes back over it; none that the clock jumps over)."""
    at = time(window.start_minute // 60, window.start_minute % 60)
    instants = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        if _WEEKDAYS[day.weekday()] not in window.days:
            continue
        for fold in (0, 1):
            wall = datetime.combine(day, at, tzinfo=tz).replace(fold=fold)
            instant = wall.astimezone(UTC)
            # A wall time the clock jumps over maps to one it does show: not an opening.
            if instant.astimezone(tz).replace(tzinfo=None) == wall.replace(tzinfo=None):
                instants.append(instant)
    return instants


def _offset(tz: ZoneInfo, instant: datetime) -> timedelta | None:
    return instant.astimezone(tz).utcoffset()


def _offset_changes(tz: ZoneInfo, since: datetime, until: datetime) -> list[datetime]:
    """The instants in (since, until] at which the zone's UTC offset changes (tzdata's changes
    fall on whole seconds)."""
    changes = []
    before = since.replace(microsecond=0)
    while before < until:
        after = before + _OFFSET_SAMPLE
        if _offset(tz, before) != _offset(tz, after):
            low, high = before, after
            while high - low > timedelta(seconds=1):
                middle = low + timedelta(seconds=(high - low).total_seconds() // 2)
                if _offset(tz, middle) == _offset(tz, low):
                    low = middle
                else:
                    high = middle
            changes.append(high)
        before = after
    return changes


def next_open(window: Window, zone: str | None, now: datetime) -> datetime:
    """The earliest instant at or after `now` the window is open for a contact in `zone`: `now`
    itself when it is open."""
    now = utc_instant(now)
    tz = window_zone(window, zone)
    if _is_open_in(window, tz, now):
        return now
    # From the day before now's local date: a wall time then can be after now in UTC terms
    # only across an offset change, which is looked at too.
    first = now.astimezone(tz).date() - timedelta(days=1)
    candidates = [
        *_openings(window, tz, first, SEARCH_DAYS + 2),
        *_offset_changes(tz, now, now + timedelta(days=SEARCH_DAYS)),
    ]
    opened = [instant for instant in candidates if instant > now and _is_open_in(window, tz, instant)]
    if not opened:
        raise ValueError(f"the window does not open within {SEARCH_DAYS} days of {now.isoformat()}")
    return min(opened)
