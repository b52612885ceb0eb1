"""Sentry gets one report per dead-lettered message, tagged with its session — not one per
failed attempt (a retry may still succeed) — and nothing a caller said in the clear."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from switchboard.observability import _reported, _scrubbed_breadcrumb
from switchboard.services import Services


def _probe(services: Services, namespace: str, *extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.workers.sentry_probe",
            services.redis_url,
            f"{namespace}-sentry",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_message_that_fails_every_attempt_is_reported_once(services: Services, namespace: str) -> None:
    report = _probe(services, namespace)

    assert report["attempts"] == 3
    [event] = report["events"]
    assert (
        event["exception"]
        == "always_fails dead-lettered after 3 retries: RuntimeError('the database said no')"
    )
    assert event["tags"]["session_id"] == "sess_probe"
    assert event["tags"]["dead_letter"] == "true"
    assert event["tags"]["actor"] == "always_fails"


def test_a_stock_setup_reports_every_attempt(services: Services, namespace: str) -> None:
    """The contrast that makes the test above mean something."""
    report = _probe(services, f"{namespace}-stock", "--unfiltered")
    assert report["attempts"] == 3
    assert len(report["events"]) > 1


CARD = "4111 1111 1111 1111"
CARD_MASK = "•••• •••• •••• 1111"
SSN = "123-45-6789"
EMAIL = "john@example.com"


def test_what_a_caller_said_reaches_sentry_masked(services: Services, namespace: str) -> None:
    """A card number in the exception's message, an SSN in a local variable of the failing
    frame and an e-mail in the message's payload: none of them is in what is sent."""
    report = _probe(services, f"{namespace}-sensitive", "--sensitive")

    assert report["attempts"] == 3
    [event] = report["events"]
    assert event["exception"] == (
        f"always_fails dead-lettered after 3 retries: RuntimeError('the processor declined {CARD_MASK}')"
    )
    assert event["tags"]["session_id"] == "sess_probe"
    sent = report["sent"]
    assert CARD_MASK in sent
    assert CARD not in sent
    assert "1111 1111 1111" not in sent
    assert SSN not in sent
    assert EMAIL not in sent


def test_a_stock_setup_sends_what_a_caller_said(services: Services, namespace: str) -> None:
    """The positive control: the probe sees a leak where there is one."""
    report = _probe(services, f"{namespace}-sensitive-stock", "--sensitive", "--unfiltered")

    assert report["attempts"] == 3
    assert CARD in report["sent"]
    assert SSN in report["sent"]  # the failing frame's local variables
    assert EMAIL in report["sent"]


def test_an_event_is_scrubbed_everywhere_and_copied_only_where_it_changed() -> None:
    """Every string, however deep (dict keys, lists, tuples): what nothing changed in stays the
    same object; a per-attempt report is still dropped."""
    untouched = {"process": "worker", "seq": 1, "ok": [True, None, 2.5]}
    event: Any = {
        "message": f"card {CARD}",
        "logentry": {"message": "verified %s", "params": [SSN], "formatted": f"verified {SSN}"},
        "extra": {"said": (EMAIL, "plain"), f"key {CARD}": 1},
        "breadcrumbs": {"values": [{"message": f"read {CARD}", "data": {"to": EMAIL}}]},
        "tags": untouched,
    }
    scrubbed = _reported(event, {})
    assert scrubbed is not None
    text = json.dumps(scrubbed, ensure_ascii=False)
    assert CARD not in text
    assert SSN not in text
    assert EMAIL not in text
    assert scrubbed["message"] == f"card {CARD_MASK}"
    assert scrubbed["logentry"]["params"] == ["•••-••-6789"]
    assert scrubbed["extra"]["said"] == ("j•••@example.com", "plain")
    assert scrubbed["tags"] is untouched
    assert event["message"] == f"card {CARD}"  # the event handed in is not changed
    assert _reported({"logger": "dramatiq.worker.WorkerThread", "message": "x"}, {}) is None
    crumb = _scrubbed_breadcrumb({"message": f"said {CARD}", "data": {"to": EMAIL}}, {})
    assert crumb == {"message": f"said {CARD_MASK}", "data": {"to": "j•••@example.com"}}
