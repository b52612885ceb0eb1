"""Dramatiq middleware: the session id travels to Sentry as a tag."""

from __future__ import annotations

from typing import Any

import dramatiq
import sentry_sdk


class SessionTag(dramatiq.Middleware):
    """Tags the Sentry scope of each message with the session it concerns."""

    def before_process_message(self, broker: dramatiq.Broker, message: dramatiq.Message[Any]) -> None:
        session_id = _session_of(message)
        if session_id is not None:
            sentry_sdk.set_tag("session_id", session_id)


def _session_of(message: dramatiq.Message[Any]) -> str | None:
    if "session_id" in message.kwargs:
        return str(message.kwargs["session_id"])
    for argument in message.args:
        if isinstance(argument, dict) and isinstance(argument.get("session_id"), str):
            return str(argument["session_id"])
    return None
