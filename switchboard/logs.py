"""Log lines never carry a caller's card number, SSN, e-mail, phone number or IBAN in the clear.

`redact_logs()` puts one `RedactingFilter` on every handler of the root logger. A handler, not
a logger: Python applies a logger's filters only to records logged on that very logger, never
to records propagated up from its children (`workers.actors`, `gateway.app`, …), while a
handler's filters see every record the handler emits, wherever it was logged. So the filter
goes on the root's handlers, after `logging.basicConfig` made them. A handler added later, or
one on a logger that does not propagate to the root, is not covered: add the filter to it too.

A Dramatiq message among a record's arguments is shown as its actor and id only: Dramatiq logs
each failed attempt as "Failed to process message notify_app(…)" with every argument, and those
are a call's content (an attention reason, a transcript), which a log keeps beyond any erasure.

The filter formats the message once (`record.getMessage()`), redacts it with every kind
(`pipeline.privacy.detect.redact`) and leaves the record holding only the redacted text
(`record.msg`, `record.args = None`); a traceback is formatted into `record.exc_text` (which a
`logging.Formatter` prints instead of formatting `exc_info` again) and redacted, and so is
`record.stack_info`. It never raises: what cannot be formatted is logged masked whole
(`detect.fail_closed`), so a broken log call still says something and leaks nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import dramatiq

from pipeline.privacy import detect

# Set on a record once redacted: the root's other handlers need not redact it again.
_REDACTED = "_switchboard_redacted"


def redacted(text: str) -> str:
    """`text` with every sensitive value masked; masked whole if detection itself fails."""
    # Every kind needs a digit (written or spoken) or an "@"; most log lines have none.
    if not detect.could_hold_value(text):
        return text
    try:
        return detect.redact(text, detect.ALL_KINDS)
    except Exception:  # noqa: BLE001 - pure, it should not fail; if it does, nothing leaks
        return detect.fail_closed(text)


class RedactingFilter(logging.Filter):
    """Replaces a record's message, traceback and stack with their redacted forms; never
    drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _REDACTED, False):
            return True
        record.args = _without_contents(record.args)
        record.msg = redacted(_message_of(record))
        record.args = None
        if record.exc_info:
            try:
                text = record.exc_text or logging.Formatter().formatException(record.exc_info)
            except Exception:  # noqa: BLE001 - a traceback that cannot be formatted: say so
                text = "(the exception could not be formatted)"
            record.exc_text = redacted(text)
        elif record.exc_text:
            record.exc_text = redacted(record.exc_text)
        if record.stack_info:
            record.stack_info = redacted(record.stack_info)
        setattr(record, _REDACTED, True)
        return True


# What a worker logs a message as: the message itself, or the proxy a consumer hands its worker.
_MESSAGES = (dramatiq.Message, dramatiq.MessageProxy)


class _MessageNamed:
    """A Dramatiq message as a log line names it: its actor and id, never its arguments."""

    def __init__(self, message: dramatiq.Message[Any] | dramatiq.MessageProxy) -> None:
        self.text = f"{message.actor_name}(message {message.message_id})"

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def _without_contents(args: Any) -> Any:
    if isinstance(args, tuple) and any(isinstance(arg, _MESSAGES) for arg in args):
        return tuple(_MessageNamed(arg) if isinstance(arg, _MESSAGES) else arg for arg in args)
    if isinstance(args, _MESSAGES):
        return _MessageNamed(args)
    return args


def _message_of(record: logging.LogRecord) -> str:
    """The record's message formatted, or, when its arguments do not fit its format, the
    format and arguments masked whole (letters and digits)."""
    try:
        return record.getMessage()
    except Exception:  # noqa: BLE001 - arguments that do not fit the format, a __str__ that fails
        pass
    try:
        unformatted = f"{record.msg!s} % {record.args!r}"
    except Exception:  # noqa: BLE001 - not even a string: still a line, nothing of it
        unformatted = "(a message that could not be made a string)"
    return f"(unformattable log message) {detect.fail_closed(unformatted)}"


def redact_logs() -> None:
    """Puts one RedactingFilter on every handler of the root logger (again: no second one)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(each, RedactingFilter) for each in handler.filters):
            handler.addFilter(RedactingFilter())
