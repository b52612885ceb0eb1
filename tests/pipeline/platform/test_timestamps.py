"""Every point in time Switchboard writes is RFC 3339 UTC to the microsecond
(pipeline.platform.timestamps)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from pipeline.platform.timestamps import is_rfc3339, rfc3339, rfc3339_or_none


def test_epoch_seconds_and_datetimes_of_any_zone_are_written_alike() -> None:
    moment = datetime(2026, 12, 4, 23, 37, 51, 123456, tzinfo=UTC)
    written = "2026-12-04T23:37:51.123456Z"
    assert rfc3339(moment) == written
    assert rfc3339(moment.timestamp()) == written
    assert rfc3339(moment.astimezone(timezone(timedelta(hours=-5)))) == written
    # A naive datetime (a `timestamp` column) is UTC already.
    assert rfc3339(moment.replace(tzinfo=None)) == written
    assert rfc3339_or_none(None) is None
    assert is_rfc3339(written)


def test_only_that_format_passes() -> None:
    for other in (
        "2026-12-04T23:37:51Z",
        "2026-12-04T23:37:51.123Z",
        "2026-12-04T23:37:51.123456+00:00",
        "2026-12-04 23:37:51.123456Z",
        1.5,
        None,
    ):
        assert not is_rfc3339(other)


def test_the_walk_finds_every_moment_and_refuses_an_epoch_number() -> None:
    from tests.support.times import assert_times_are_rfc3339

    written = "2026-12-04T23:37:51.123456Z"
    answer = {
        "created_at": written,
        "ended_at": None,
        "log": [{"received_at": written, "payload": {"expires_at": 1, "heard": {"first_audio_at": written}}}],
        "entries": [{"at": written}],
    }
    assert sorted(assert_times_are_rfc3339(answer)) == [
        ".created_at",
        ".entries[0].at",
        ".log[0].payload.heard.first_audio_at",
        ".log[0].received_at",
    ]
    with pytest.raises(AssertionError):
        assert_times_are_rfc3339({**answer, "expires_at": 1_800_000_000})
