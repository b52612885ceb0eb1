"""A calling window: open by the contact's own wall clock, checked as a request body, and its
next opening exact across daylight-saving changes in any zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.outbound.window import Weekday, Window, is_open, is_timezone, next_open, window_zone

PROPERTY_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ZONES = sorted(zone for zone in available_timezones() if is_timezone(zone))
NEW_YORK = ZoneInfo("America/New_York")
WEEKDAYS = [day.value for day in Weekday]


def _window(**fields: object) -> Window:
    return Window.model_validate({"days": WEEKDAYS[:5], "start": "09:00", "end": "17:00", **fields})


def _local(instant: datetime, zone: str = "America/New_York") -> datetime:
    return instant.astimezone(ZoneInfo(zone)).replace(tzinfo=None)


# ── the request body ──────────────────────────────────────────────────────────────────


def test_a_window_reads_its_days_and_hours() -> None:
    """A window is its days, its start and end as HH:MM, and an optional zone."""
    window = _window(timezone="Europe/Paris")
    assert window.days == tuple(Weekday)[:5]
    assert (window.start_minute, window.end_minute) == (540, 1_020)


def test_a_window_may_run_until_midnight() -> None:
    """An end of 24:00 is the end of the day it starts."""
    assert _window(start="18:00", end="24:00").end_minute == 1_440


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"days": []}, "no days never opens"),
        ({"days": ["mon", "mon"]}, "named twice"),
        ({"days": ["monday"]}, "Input should be"),
        ({"start": "22:00", "end": "06:00"}, "cannot run across midnight"),
        ({"start": "09:00", "end": "09:00"}, "cannot run across midnight"),
        ({"start": "9:00"}, "not a time of day"),
        ({"end": "17:60"}, "not a time of day"),
        ({"start": "24:00"}, "start 24:00"),
        ({"timezone": "Mars/Olympus"}, "not an IANA time zone"),
        ({"timezone": "localtime"}, "not an IANA time zone"),
        ({"colour": "blue"}, "Extra inputs are not permitted"),
    ],
)
def test_a_malformed_window_or_one_that_never_opens_is_refused(
    fields: dict[str, object], message: str
) -> None:
    """No days, start not before end (across midnight), a malformed time or zone: refused, saying why."""
    with pytest.raises(ValidationError, match=message):
        _window(**fields)


@pytest.mark.parametrize("name", ["", "America", "../etc/passwd", "Factory", "localtime", "x" * 100])
def test_only_a_place_s_zone_is_a_timezone(name: str) -> None:
    """A directory, a path, the machine's own zone and tzdata's placeholder are no place's zone."""
    assert not is_timezone(name)


def test_the_contact_s_zone_wins_over_the_window_s_then_utc() -> None:
    """The contact's own zone, else the window's, else UTC."""
    window = _window(timezone="Europe/Paris")
    assert window_zone(window, "Asia/Tokyo") == ZoneInfo("Asia/Tokyo")
    assert window_zone(window, None) == ZoneInfo("Europe/Paris")
    assert window_zone(_window(), None) == ZoneInfo("UTC")


# ── open and next open ────────────────────────────────────────────────────────────────


def test_a_window_is_open_on_the_contact_s_wall_clock() -> None:
    """At 14:00 UTC on a Tuesday a 09:00-17:00 window is open in New York (10:00) and Paris
    (16:00); two hours earlier not in New York (08:00), an hour later not in Paris (17:00)."""
    tuesday = datetime(2024, 6, 4, 14, 0, tzinfo=UTC)
    assert is_open(_window(), "America/New_York", tuesday)
    assert not is_open(_window(), "America/New_York", tuesday - timedelta(hours=2))
    assert is_open(_window(), "Europe/Paris", tuesday)
    assert not is_open(_window(), "Europe/Paris", tuesday + timedelta(hours=1))


def test_start_is_in_the_window_and_end_is_not() -> None:
    """Open from start inclusive to end exclusive."""
    window = _window(timezone="UTC")
    monday = datetime(2024, 6, 3, tzinfo=UTC)
    assert is_open(window, None, monday.replace(hour=9))
    assert not is_open(window, None, monday.replace(hour=8, minute=59, second=59, microsecond=999_999))
    assert is_open(window, None, monday.replace(hour=16, minute=59, second=59))
    assert not is_open(window, None, monday.replace(hour=17))


def test_next_open_skips_to_the_next_day_of_the_window() -> None:
    """On Friday evening, a weekday window next opens on Monday morning."""
    friday_evening = datetime(2024, 6, 7, 22, 0, tzinfo=UTC)
    opens = next_open(_window(), "America/New_York", friday_evening)
    assert _local(opens) == datetime(2024, 6, 10, 9, 0)
    assert opens.tzinfo == UTC


def test_a_window_opens_when_the_clock_jumps_over_its_start() -> None:
    """On the spring-forward Sunday, 02:30-04:00 opens at 03:00 (02:30 never happens)."""
    window = _window(days=["sun"], start="02:30", end="04:00")
    opens = next_open(window, "America/New_York", datetime(2024, 3, 9, 12, tzinfo=UTC))
    assert opens == datetime(2024, 3, 10, 7, 0, tzinfo=UTC)
    assert _local(opens) == datetime(2024, 3, 10, 3, 0)


def test_a_window_the_clock_jumps_over_whole_opens_a_week_later() -> None:
    """02:00-02:30 on the spring-forward Sunday never happens: the next Sunday's does."""
    window = _window(days=["sun"], start="02:00", end="02:30")
    opens = next_open(window, "America/New_York", datetime(2024, 3, 9, 12, tzinfo=UTC))
    assert _local(opens) == datetime(2024, 3, 17, 2, 0)


def test_the_hour_the_clock_repeats_is_in_the_window_both_times() -> None:
    """On the fall-back Sunday, after 01:30 EDT the window 00:30-01:30 opens again at 01:00 EST."""
    window = _window(days=["sun"], start="00:30", end="01:30")
    after_first_pass = datetime(2024, 11, 3, 5, 31, tzinfo=UTC)  # 01:31 EDT
    assert not is_open(window, "America/New_York", after_first_pass)
    assert next_open(window, "America/New_York", after_first_pass) == datetime(2024, 11, 3, 6, 0, tzinfo=UTC)


def test_a_skipped_date_puts_the_window_off_a_week() -> None:
    """Samoa skipped Friday 30 December 2011: a Friday window opened on 6 January."""
    window = _window(days=["fri"], start="10:00", end="11:00")
    opens = next_open(window, "Pacific/Apia", datetime(2011, 12, 28, tzinfo=UTC))
    assert _local(opens, "Pacific/Apia") == datetime(2012, 1, 6, 10, 0)


def test_a_naive_datetime_is_refused() -> None:
    """An instant without a zone names no instant."""
    with pytest.raises(ValueError, match="no time zone"):
        is_open(_window(), None, datetime(2024, 6, 4, 14))


@st.composite
def windows(draw: st.DrawFn) -> Window:
    days = draw(st.lists(st.sampled_from(WEEKDAYS), min_size=1, max_size=7, unique=True))
    start = draw(st.integers(0, 1_439))
    end = draw(st.integers(start + 1, 1_440))
    clock = "{:02d}:{:02d}".format
    return Window(
        timezone=draw(st.none() | st.sampled_from(ZONES)),
        days=tuple(Weekday(day) for day in days),
        start=clock(*divmod(start, 60)),
        end=clock(*divmod(end, 60)),
    )


INSTANTS = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@PROPERTY_SETTINGS
@given(windows(), st.none() | st.sampled_from(ZONES), INSTANTS, st.floats(0, 1))
def test_next_open_is_the_first_open_instant_from_now(
    window: Window, zone: str | None, now: datetime, between: float
) -> None:
    """In any zone on any date: next_open is not before now, the window is open then, it is
    now exactly when the window is open now, and the window is closed at any instant between."""
    opens = next_open(window, zone, now)
    assert opens >= now
    assert is_open(window, zone, opens)
    assert (opens == now) == is_open(window, zone, now)
    inside = now + (opens - now) * between
    if inside < opens:
        assert not is_open(window, zone, inside)


@PROPERTY_SETTINGS
@given(windows(), st.sampled_from(ZONES), INSTANTS)
def test_the_window_is_closed_just_before_it_opens(window: Window, zone: str, now: datetime) -> None:
    """A second before a next opening that is not now, the window is closed: it is the start of
    an opening, not a point inside one."""
    opens = next_open(window, zone, now)
    if opens > now:
        assert not is_open(window, zone, max(now, opens - timedelta(seconds=1)))
