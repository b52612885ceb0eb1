"""Which notifications of a session still go when their delivery is attempted
(pipeline.api.notify.is_withheld): nothing of an erased session's, but a metadata session's."""

from __future__ import annotations

from pipeline.api.notify import is_withheld


def test_a_delivery_of_a_session_erased_on_request_or_by_retention_sends_nothing() -> None:
    """The delivery was decided before the erasure, and waited for its retry past it."""
    assert is_withheld(True, "request")
    assert is_withheld(True, "retention")
    assert is_withheld(True, None)  # erased, reason unknown: what was erased is not sent


def test_a_session_not_erased_or_kept_as_metadata_is_told_as_ever() -> None:
    """A metadata session's erasure is its storage mode: it still owes the app its webhooks."""
    assert not is_withheld(False, None)
    assert not is_withheld(True, "storage")
