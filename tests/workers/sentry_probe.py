"""Run in its own process by test_sentry (Sentry's state is process-wide): a worker with
Switchboard's Sentry setup processes one message that always fails, and the Sentry events it
produced are printed as JSON. `--unfiltered` uses a stock Sentry setup instead, for contrast."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import dramatiq
import sentry_sdk
from dramatiq.middleware import Retries
from sentry_sdk.integrations.dramatiq import DramatiqIntegration
from sentry_sdk.transport import Transport

from pipeline.config import Settings
from switchboard.observability import init_sentry
from workers.broker import make_broker
from workers.middleware import ReportDeadLetters, SessionTag


class MemoryTransport(Transport):
    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.envelopes: list[Any] = []

    def capture_envelope(self, envelope: Any) -> None:
        self.envelopes.append(envelope)


def main(redis_url: str, namespace: str, unfiltered: bool) -> None:
    transport = MemoryTransport()
    if unfiltered:
        sentry_sdk.init(transport=transport, integrations=[DramatiqIntegration()])
    else:
        init_sentry(Settings(), "worker", transport=transport)
    broker = make_broker(redis_url, namespace=namespace)
    broker.add_middleware(SessionTag())
    broker.add_middleware(ReportDeadLetters(), before=Retries)
    dramatiq.set_broker(broker)
    attempts: list[float] = []

    @dramatiq.actor(queue_name="probe", max_retries=2, min_backoff=10, max_backoff=20)
    def always_fails(envelope: dict[str, Any]) -> None:
        attempts.append(time.time())
        raise RuntimeError("the database said no")

    worker = dramatiq.Worker(broker, worker_timeout=50, worker_threads=1)
    worker.start()
    always_fails.send({"session_id": "sess_probe", "seq": 1})
    deadline = time.monotonic() + 20
    while len(attempts) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the last attempt's reports
    worker.stop()
    broker.close()
    sentry_sdk.flush()
    events = [
        item.payload.json
        for envelope in transport.envelopes
        for item in envelope.items
        if item.type == "event"
    ]
    print(
        json.dumps(
            {
                "attempts": len(attempts),
                "events": [
                    {
                        "tags": event.get("tags") or {},
                        "logger": event.get("logger"),
                        "exception": ((event.get("exception") or {}).get("values") or [{}])[-1].get("value"),
                    }
                    for event in events
                ],
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--unfiltered" in sys.argv)
