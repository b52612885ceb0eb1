"""Webhooks to the app (workers/app_webhooks.py) against real local HTTP servers and the real
PostgreSQL: a redirect is never followed (the host it names hears nothing, and the delivery is a
failed attempt), and a delivery of a session erased since it was queued sends nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from models.sessions import locked_session, new_session
from pipeline.session.state import AppWebhook
from pipeline.session.wire import AdmissionBegun, CallAttached, SessionCreated
from tests.support.calls import GATEWAY, new_session_id

SECRET = "whsec_" + "c2VjcmV0LW9mLXRoZS10ZXN0LWFwcC0zMi1ieXRlcyE="


class Endpoint:
    """A local HTTP server that keeps every request it gets (method, path, headers, body) and
    answers each with `status` (and `location`, for a redirect)."""

    def __init__(self, status: int = 204, location: str | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                endpoint.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": {name.lower(): value for name, value in self.headers.items()},
                        "body": self.rfile.read(length) if length else b"",
                    }
                )
                self.send_response(endpoint.status)
                if endpoint.location is not None:
                    self.send_header("location", endpoint.location)
                self.send_header("content-length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = _answer

            def log_message(self, *_args: Any) -> None:
                return

        self.status = status
        self.location = location
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def elsewhere() -> Iterator[Endpoint]:
    """The host a redirect names: it answers 200 to anything."""
    endpoint = Endpoint(status=200)
    yield endpoint
    endpoint.close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failed_attempt_and_the_host_it_names_hears_nothing(
    worker_runtime: Any, elsewhere: Endpoint, status: int
) -> None:
    """urllib followed a 302 as a GET without the body, sent the signature headers to the other
    host, and counted its 200 as delivered: now the 3xx fails the attempt (tried again as a 5xx
    is), and only the session's own endpoint was asked."""
    from workers.app_webhooks import AppWebhookFailed, post

    redirecting = Endpoint(status=status, location=elsewhere.url)
    try:
        with pytest.raises(AppWebhookFailed) as failed:
            post(redirecting.url, SECRET, "msg_redirected", "call.ended", {"session_id": "sess_x"})
    finally:
        redirecting.close()
    assert f"answered {status} (redirects are not followed)" in str(failed.value)
    [asked] = redirecting.requests  # the fault happened: the app's endpoint answered the redirect
    assert asked["method"] == "POST" and "webhook-signature" in asked["headers"] and asked["body"]
    assert elsewhere.requests == []


def _session_with_webhook(url: str, *, storage: str = "full") -> str:
    session_id = new_session_id()
    now = time.time()
    created = SessionCreated(
        instructions="Be brief.", app_webhook=AppWebhook(url=url, secret=SECRET), storage=storage
    )
    with new_session(session_id, GATEWAY) as session:
        session.apply_host(created, now)
    for event in (AdmissionBegun(), CallAttached(call_id=f"rtc_{session_id}")):
        with locked_session(session_id) as session:
            session.apply_host(event, now)
    return session_id


def _end(session_id: str) -> None:
    from tests.support.calls import deliver

    deliver(session_id, 1, {"type": "switchboard.end_requested", "reason": "app_ended"})


def _deliver(session_id: str, kind: str, data: dict[str, Any]) -> int:
    from workers.app_webhooks import deliver, webhook_id

    return deliver(
        session_id,
        webhook_id(session_id, kind, "1"),
        kind,
        data,
        lambda _provider, _model: None,
        namespace="",
    )


def test_a_delivery_attempted_after_its_session_was_erased_sends_nothing(worker_runtime: Any) -> None:
    """A delivery queued (or waiting for its retry) before the erasure, attempted after it: the
    app hears nothing of it. Before the erasure the same delivery goes (the control)."""
    from models.erasure import erase_session

    app = Endpoint(status=204)
    try:
        session_id = _session_with_webhook(app.url)
        _end(session_id)
        started = {"call_id": "rtc_x", "medium": "sip", "caller": "+13125550187"}
        assert _deliver(session_id, "call.started", started) == 204
        assert len(app.requests) == 1 and b"+13125550187" in app.requests[0]["body"]

        erase_session(session_id, by="test")
        assert _deliver(session_id, "call.started", started) == 0
        asked = {"reason": "wants a person about Quillfeather"}
        assert _deliver(session_id, "attention.requested", asked) == 0
        assert _deliver(session_id, "call.ended", {"reason": "app_ended"}) == 0
        assert len(app.requests) == 1
    finally:
        app.close()


def test_a_metadata_session_still_owes_the_app_its_webhooks_once_erased(worker_runtime: Any) -> None:
    """`storage: "metadata"` is erased by design once the call is over (`storage`): what it owes
    the app still goes (docs/privacy.md)."""
    from models.erasure import erase_session

    app = Endpoint(status=204)
    try:
        session_id = _session_with_webhook(app.url, storage="metadata")
        _end(session_id)
        erase_session(session_id, by="retention", because="retention")
        assert _deliver(session_id, "call.ended", {"reason": "app_ended"}) == 204
        assert len(app.requests) == 1
    finally:
        app.close()
