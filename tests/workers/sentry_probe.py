"""Run in its own process by test_sentry (Sentry's state is process-wide): a worker with
Switchboard's Sentry setup processes one message that always fails, and the Sentry events it
produced are printed as JSON. `--unfiltered` uses a stock Sentry setup instead, for contrast.
`--sensitive` makes the failure carry what a caller said: a card number in the exception's
message, an SSN in a local variable and an e-mail in the message's payload; every item sent is
then printed too, serialized, to be searched for them."""

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

from pipeline.platform.config import Settings
from switchboard.observability import init_sentry
from workers.broker import make_broker
from workers.middleware import ReportDeadLetters, SessionTag


class MemoryTransport(Transport):
    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.envelopes: list[Any] = []

    def capture_envelope(self, envelope: Any) -> None:
        self.envelopes.append(envelope)


# Built, not written out, so that only the values (not the probe's source lines, which Sentry
# quotes around each frame) can carry them.
CARD = " ".join(["4111", *["1111"] * 3])
SSN = "-".join(["123", "45", "6789"])
EMAIL = "@".join(["john", "example.com"])


def main(redis_url: str, namespace: str, unfiltered: bool, sensitive: bool = False) -> None:
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
        if sensitive:
            ssn = SSN  # a local variable of the failing frame, as a lookup would leave one
            if ssn:
                raise RuntimeError(f"the processor declined {envelope['card']}")
        raise RuntimeError("the database said no")

    worker = dramatiq.Worker(broker, worker_timeout=50, worker_threads=1)
    worker.start()
    payload: dict[str, Any] = {"session_id": "sess_probe", "seq": 1}
    if sensitive:
        payload |= {"card": CARD, "email": EMAIL}
    always_fails.send(payload)
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
    # Every item of every envelope as it would go over the wire, its JSON's "\u2022" read
    # back as "•" (what it stands for; a digit or a letter is never escaped).
    sent = "\n".join(
        _readable(item.payload.get_bytes()) for envelope in transport.envelopes for item in envelope.items
    )
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
                **({"sent": sent} if sensitive else {}),
            }
        )
    )


def _readable(sent: bytes) -> str:
    text = sent.decode("utf-8", "replace")
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--unfiltered" in sys.argv, "--sensitive" in sys.argv)
