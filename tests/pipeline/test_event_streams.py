"""An event stream's shape (pipeline.event_streams, docs/events.md): which brokers a session may
name, how its URL is shown, and the ids and topics its messages carry."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipeline.api import EVENTS_URL_UNSUPPORTED, RouteSpec, SessionSpec, shown_spec
from pipeline.event_streams import (
    DEFAULT_EXCHANGE,
    entry_id,
    masked,
    report_id,
    routing_key,
    shown,
)


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
