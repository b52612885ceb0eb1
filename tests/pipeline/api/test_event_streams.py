"""An event stream's shape (pipeline.api.event_streams, docs/events.md): which brokers a session may
name, how its URL is shown, and the ids and topics its messages carry."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipeline.api.event_streams import (
    DEFAULT_EXCHANGE,
    Waiting,
    backoff_ms,
    broker_key,
    entry_id,
    gives_up_after_ms,
    masked,
    report_id,
    routing_key,
    shown,
)
from pipeline.api.requests import EVENTS_URL_UNSUPPORTED, RouteSpec, SessionSpec, shown_spec


@pytest.mark.parametrize(
    "url",
    [
        "amqp://guest:guest@127.0.0.1:5672//",
        "amqps://app:pw@mq.example.com/prod",
        "redis://:pw@127.0.0.1:6379/3",
        "rediss://cache.example.com:6380/0",
        "sqs://AKIAEXAMPLE:secret@",
        "sqs://",
    ],
)
def test_a_session_may_stream_to_amqp_sqs_or_redis(url: str) -> None:
    """Each broker kombu offers an app is taken, with the default topic exchange."""
    spec = SessionSpec.model_validate({"instructions": "x", "events": {"url": url}})
    assert spec.events is not None and (spec.events.url, spec.events.exchange) == (url, DEFAULT_EXCHANGE)


@pytest.mark.parametrize(
    "url", ["https://app:pw@example.com/hook", "kafka://broker:9092", "amqp://", "not a url", "memory://"]
)
def test_any_other_url_is_refused_with_its_own_code_and_not_echoed(url: str) -> None:
    """A URL that names no offered broker fails as events_url_unsupported, without the URL."""
    with pytest.raises(ValidationError) as refused:
        SessionSpec.model_validate({"instructions": "x", "events": {"url": url}})
    [error] = refused.value.errors()
    assert error["type"] == EVENTS_URL_UNSUPPORTED and error["loc"] == ("events", "url")
    assert "pw" not in error["msg"] and "example.com" not in error["msg"]


def test_a_route_s_session_may_stream_too() -> None:
    """A route's session takes `events` as a session does."""
    route = RouteSpec.model_validate(
        {"number": "+18005550100", "session": {"instructions": "x", "events": {"url": "redis://127.0.0.1/1"}}}
    )
    assert route.session.events is not None


def test_an_exchange_name_is_a_plain_name() -> None:
    """An exchange with spaces or slashes is refused."""
    with pytest.raises(ValidationError):
        SessionSpec.model_validate(
            {"instructions": "x", "events": {"url": "redis://h/1", "exchange": "a b/c"}}
        )


@pytest.mark.parametrize(
    ("url", "shown_as"),
    [
        ("amqp://guest:guest@127.0.0.1:5672//", "amqp://guest:***@127.0.0.1:5672//"),
        ("redis://:pw@127.0.0.1:6379/3", "redis://:***@127.0.0.1:6379/3"),
        ("sqs://AKIAEXAMPLE:secret@", "sqs://AKIAEXAMPLE:***@"),
        ("amqp://127.0.0.1:5672//", "amqp://127.0.0.1:5672//"),
    ],
)
def test_a_url_is_shown_with_its_password_masked(url: str, shown_as: str) -> None:
    """The password (or SQS secret key) is `***`; a URL without one is shown as it is."""
    assert masked(url) == shown_as


def test_a_spec_is_shown_without_the_password() -> None:
    """A route's (or campaign's) session spec shows its events URL masked, its exchange kept."""
    spec = {"instructions": "x", "events": {"url": "amqp://u:p@h//", "exchange": "calls"}}
    assert shown_spec(spec)["events"] == {"url": "amqp://u:***@h//", "exchange": "calls"}
    assert shown_spec({"instructions": "x"}) == {"instructions": "x"}
    assert shown(None) is None


def test_a_spec_is_shown_without_its_webhook_secret() -> None:
    """A secret is given once and answered back to no key: a route's or a campaign's webhook
    shows its URL only."""
    secret = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"
    spec = {"instructions": "x", "webhook": {"url": "https://app.example.com/hooks", "secret": secret}}
    assert shown_spec(spec)["webhook"] == {"url": "https://app.example.com/hooks"}
    assert secret not in str(shown_spec(spec))


def test_message_ids_and_topics_are_stable() -> None:
    """An entry's id is the session and its seq, the report's the session and `report`; the
    topic is `session.` and the kind."""
    assert entry_id("sess_1", 7) == "sess_1:7"
    assert report_id("sess_1") == "sess_1:report"
    assert routing_key("turn.user") == "session.turn.user"


def test_a_broker_is_left_alone_longer_after_each_failed_try_up_to_the_maximum() -> None:
    """The back-off doubles from the minimum with each failure in a row, and stays at the maximum."""
    assert [backoff_ms(failures, 1_000, 10_000) for failures in range(1, 7)] == [
        1_000,
        2_000,
        4_000,
        8_000,
        10_000,
        10_000,
    ]
    assert backoff_ms(10_000, 1_000, 300_000) == 300_000  # no overflow however long it was down


def test_a_stream_waits_for_its_broker_as_long_as_its_retries_back_offs_add_up_to() -> None:
    """8 retries from 1 s: 1 + 2 + … + 128 = 255 s; none: it is given up after its first failure."""
    assert gives_up_after_ms(8, 1_000, 300_000) == 255_000
    assert gives_up_after_ms(2, 50, 200) == 150
    assert gives_up_after_ms(3, 1_000, 2_000) == 5_000
    assert gives_up_after_ms(0, 1_000, 300_000) == 0


def test_a_broker_is_named_by_a_digest_never_by_its_url() -> None:
    """The URL may hold a password: the key is a digest of the URL and the exchange, one per both."""
    url = "amqp://app:s3cret@mq.example.com:5672/prod"
    key = broker_key(url, DEFAULT_EXCHANGE)
    assert "s3cret" not in key and "mq.example.com" not in key and len(key) == 32
    assert key == broker_key(url, DEFAULT_EXCHANGE)
    assert key != broker_key(url, "other.exchange")
    assert key != broker_key("amqp://app:s3cret@mq.example.com:5672/test", DEFAULT_EXCHANGE)


def test_a_waiting_sweep_is_read_back_as_it_was_sent_and_anything_else_is_no_wait() -> None:
    """What the waiting sweep's message carries comes back whole; a malformed one starts afresh."""
    waiting = Waiting(since_ms=1_700_000_000_000, token="a1b2")
    assert Waiting.from_json(waiting.as_json()) == waiting
    for malformed in (None, {}, {"since_ms": "1", "token": "x"}, {"since_ms": 1, "token": ""}, [1, "x"]):
        assert Waiting.from_json(malformed) is None  # type: ignore[arg-type]
