"""Sentry gets one report per dead-lettered message, tagged with its session — not one per
failed attempt (a retry may still succeed)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

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
