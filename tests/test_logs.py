"""A caller's card number, SSN or e-mail never reaches a log line in the clear: `redact_logs()`
puts a RedactingFilter on the root logger's handlers, which see what every child logger logs."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.logs import RedactingFilter, redact_logs

CARD = "4111 1111 1111 1111"
CARD_MASK = "•••• •••• •••• 1111"
SSN = "123-45-6789"
SSN_MASK = "•••-••-6789"
EMAIL = "john@example.com"
EMAIL_MASK = "j•••@example.com"


@pytest.fixture
def output() -> Iterator[io.StringIO]:
    """The root logger as `logging.basicConfig` leaves it (one stream handler), redacted; the
    root's handlers, filters and level are put back afterwards. (pytest adds its own capturing
    handlers to the root for each phase of a test: a filter put on them is taken off again.)"""
    root = logging.getLogger()
    handlers, filters, level = root.handlers[:], root.filters[:], root.level
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root.handlers = [handler]
    root.filters = []
    root.setLevel(logging.INFO)
    redact_logs()
    try:
        yield stream
    finally:
        for each in {*root.handlers, *handlers}:
            for installed in [f for f in each.filters if isinstance(f, RedactingFilter)]:
                each.removeFilter(installed)
        root.removeHandler(handler)
        for each in handlers:
            if each not in root.handlers:
                root.addHandler(each)
        root.filters = filters
        root.setLevel(level)


def _handler_of(stream: io.StringIO) -> logging.Handler:
    [handler] = [
        each
        for each in logging.getLogger().handlers
        if isinstance(each, logging.StreamHandler) and each.stream is stream
    ]
    return handler


# A child logger, as every module logs on: its records reach the root's handlers by propagation.
logger = logging.getLogger("switchboard.test_logs")


def test_a_card_number_given_as_an_argument_is_masked(output: io.StringIO) -> None:
    logger.info("charging card %s for %d cents", CARD, 1250)
    line = output.getvalue()
    assert CARD not in line
    assert "1111 1111 1111" not in line
    assert line == f"switchboard.test_logs INFO charging card {CARD_MASK} for 1250 cents\n"


def test_a_card_number_in_an_f_string_is_masked(output: io.StringIO) -> None:
    card = CARD
    logger.warning(f"the caller read out {card}, twice")
    line = output.getvalue()
    assert CARD not in line
    assert f"the caller read out {CARD_MASK}, twice" in line


def test_a_card_number_read_out_in_words_is_masked(output: io.StringIO) -> None:
    spoken = "four one one one one one one one one one one one one one one one"
    logger.info("transcript: my card is %s", spoken)
    line = output.getvalue()
    assert spoken not in line
    assert CARD_MASK in line


def test_a_card_number_in_an_exception_s_message_is_masked_in_the_traceback(output: io.StringIO) -> None:
    card = CARD
    try:
        raise ValueError(f"the processor declined {card}")
    except ValueError:
        logger.exception("payment failed")
    text = output.getvalue()
    assert "Traceback (most recent call last)" in text
    assert f"ValueError: the processor declined {CARD_MASK}" in text
    assert CARD not in text


def test_a_stack_is_masked(output: io.StringIO) -> None:
    logger.info("where from", stack_info=True)  # the caller's card: 4111 1111 1111 1111
    text = output.getvalue()
    assert "Stack (most recent call last)" in text
    assert f"# the caller's card: {CARD_MASK}" in text
    assert CARD not in text


def test_an_ssn_and_an_e_mail_are_masked(output: io.StringIO) -> None:
    logger.info("verified %s for %s", SSN, EMAIL)
    line = output.getvalue()
    assert SSN not in line
    assert EMAIL not in line
    assert f"verified {SSN_MASK} for {EMAIL_MASK}" in line


def test_plain_messages_are_unchanged(output: io.StringIO) -> None:
    logger.info("gateway listening")
    logger.info("session %s ended after %d ms on %s", "sess_01HXYZ", 12345, "127.0.0.1:8080")
    assert output.getvalue().splitlines() == [
        "switchboard.test_logs INFO gateway listening",
        "switchboard.test_logs INFO session sess_01HXYZ ended after 12345 ms on 127.0.0.1:8080",
    ]


def test_a_broken_format_still_logs_a_line_and_leaks_nothing(
    output: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    logger.info("%d digits of %s", CARD)  # noqa: PLE1206 - a %d for a string, an argument short
    logger.info("after")
    lines = output.getvalue().splitlines()
    assert len(lines) == 2
    assert "unformattable log message" in lines[0]
    assert CARD not in lines[0]
    assert "1111" not in lines[0]
    assert lines[1] == "switchboard.test_logs INFO after"
    assert "Logging error" not in capsys.readouterr().err


def test_installing_twice_leaves_one_filter(output: io.StringIO) -> None:
    redact_logs()
    redact_logs()
    handler = _handler_of(output)
    assert sum(isinstance(each, RedactingFilter) for each in handler.filters) == 1
    logger.info("card %s", CARD)
    assert output.getvalue() == f"switchboard.test_logs INFO card {CARD_MASK}\n"


def test_every_root_handler_is_redacted(output: io.StringIO) -> None:
    second = io.StringIO()
    added = logging.StreamHandler(second)
    logging.getLogger().addHandler(added)
    try:
        redact_logs()
        logger.info("card %s", CARD)
    finally:
        logging.getLogger().removeHandler(added)
    assert CARD_MASK in output.getvalue()
    assert second.getvalue() == f"card {CARD_MASK}\n"


def test_a_failed_message_is_named_by_its_actor_and_id_never_its_arguments(output: io.StringIO) -> None:
    """Dramatiq logs each failed attempt with the message, whose arguments are a call's content
    (an attention reason the app gave): the line names the message, and says nothing of them."""
    import dramatiq

    message: dramatiq.Message[Any] = dramatiq.Message(
        queue_name="app_webhooks",
        actor_name="notify_app",
        args=(),
        kwargs={"data": {"reason": "the caller wants to cancel the Lisbon trip"}},
        options={},
    )
    logging.getLogger("dramatiq.worker.WorkerThread").error(
        "Failed to process message %s with unhandled exception.", message
    )
    line = output.getvalue()
    assert "Lisbon" not in line and "reason" not in line
    assert f"notify_app(message {message.message_id})" in line
