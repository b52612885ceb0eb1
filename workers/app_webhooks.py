"""Webhooks to the app that owns a call: signed (Standard Webhooks), with a stable id, tried
again with backoff until the app answers 2xx, then a dead letter like any other message.

The message carries no secret (dead letters are shown by `switchboard dlq show`): the session's
webhook is read from PostgreSQL when the delivery is made, and so is `call.ended`'s report —
the durable record as it is then: transcript, tool steps, end reason and who, usage and cost.
So is the session's erased mark: a delivery of a session erased since it was queued sends nothing
(`pipeline.api.notify.is_withheld`), whether it waited on a queue or in a worker's memory for its retry.

A redirect is never followed: the request would go to a host the session did not name, with its
signature, and (as urllib follows a 302) as a GET without its body, whose 200 would count as
delivered. A 3xx is a failed attempt, tried again as a 5xx is.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from models.db import SessionRow, database
from models.records import session_record
from models.releases import read_across
from pipeline.api.notify import is_withheld
from pipeline.api.signing import signature
from pipeline.call.errors import Fault
from pipeline.platform.cost import ModelPrices, cost_usd
from pipeline.platform.timestamps import rfc3339
from pipeline.session.state import SessionState, Usage

# What a session is charged at, by its provider and the model it chose (Settings.price_of).
PriceOf = Callable[[str, str], ModelPrices | None]

logger = logging.getLogger(__name__)

DELIVERY_TIMEOUT_S = 10.0
# What of a refusal's answer is kept in the error (it reaches the dead letter).
MAXIMUM_ANSWER_CHARS = 300


class AppWebhookFailed(Fault):
    """The app did not take the delivery (not 2xx, or not reachable): it is tried again."""

    code = "app_webhook_failed"


def webhook_id(session_id: str, kind: str, key: str) -> str:
    """The notification's id, the same however often it is delivered or replayed."""
    return "msg_" + hashlib.sha256(f"{session_id}:{kind}:{key}".encode()).hexdigest()[:32]


def deliver(
    session_id: str,
    delivery_id: str,
    kind: str,
    data: dict[str, Any],
    price_of: PriceOf,
    *,
    namespace: str,
) -> int:
    """POST one notification to the session's webhook (a session of the deployment `namespace`);
    its HTTP status (raises unless 2xx). Its cost is priced at what `price_of` says the session's
    model costs (by its provider and the model it chose)."""
    row = SessionRow.get_or_none((SessionRow.id == session_id) & (SessionRow.namespace == namespace))
    if row is None:
        return 0  # the session is gone: nobody to tell
    if is_withheld(row.erased_at is not None, row.erased_because):
        logger.info("%s %s: not sent, its session %s was erased", kind, delivery_id, session_id)
        return 0
    state = read_across(SessionState, row.state, "stored session state")
    if state.app_webhook is None:
        return 0
    payload: dict[str, Any] = {"session_id": session_id, **data}
    if kind == "call.ended":
        payload["report"] = report(
            session_id, state, price_of(str(state.provider), state.model.id), namespace=namespace
        )
    return post(state.app_webhook.url, state.app_webhook.secret, delivery_id, kind, payload)


def deliver_for_campaign(campaign_id: str, delivery_id: str, kind: str, data: dict[str, Any]) -> int:
    """POST one notification about a campaign (`campaign.completed`) to the webhook its calls'
    session names; its HTTP status (raises unless 2xx). A campaign without one tells nobody."""
    row = database.execute_sql("SELECT spec FROM campaigns WHERE id = %s", (campaign_id,)).fetchone()
    if row is None:
        return 0
    webhook = (row[0].get("session") or {}).get("webhook")
    if not isinstance(webhook, dict) or not webhook.get("url") or not webhook.get("secret"):
        return 0
    payload = {"campaign_id": campaign_id, **data}
    return post(str(webhook["url"]), str(webhook["secret"]), delivery_id, kind, payload)


def post(url: str, secret: str, delivery_id: str, kind: str, payload: dict[str, Any]) -> int:
    """Sign and POST one notification (Standard Webhooks); its HTTP status, or `AppWebhookFailed`."""
    now = time.time()
    # The header is integer seconds, as Standard Webhooks signs it; the body's timestamp is the
    # same moment as every other time Switchboard writes (RFC 3339 UTC).
    timestamp = int(now)
    body = json.dumps({"type": kind, "timestamp": rfc3339(now), "data": payload}, default=str)
    headers = {
        "content-type": "application/json",
        "user-agent": "Switchboard webhooks",
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, delivery_id, timestamp, body),
    }
    request = urllib.request.Request(url, data=body.encode(), method="POST", headers=headers)
    try:
        # Whatever is not 2xx, a 3xx included, comes back as an HTTPError.
        with _OPENER.open(request, timeout=DELIVERY_TIMEOUT_S) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        answer = error.read()[:MAXIMUM_ANSWER_CHARS].decode(errors="replace")
        refused = " (redirects are not followed)" if _is_redirect(error.code) else ""
        raise AppWebhookFailed(
            f"{kind} {delivery_id}: the app answered {error.code}{refused}: {answer}"
        ) from None
    except (urllib.error.URLError, OSError) as error:
        raise AppWebhookFailed(
            f"{kind} {delivery_id}: the app could not be reached ({type(error).__name__})"
        ) from None


def _is_redirect(status: int) -> bool:
    return 300 <= status < 400


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect: urllib then raises the 3xx as an `HTTPError`."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


# urllib's usual handlers (proxies from the environment, HTTPS), without following redirects.
_OPENER = urllib.request.build_opener(_NoRedirects)


def report(
    session_id: str, state: SessionState, prices: ModelPrices | None, *, namespace: str
) -> dict[str, Any]:
    """The end-of-call report: what the record holds, the model that served the call, and what
    the call cost."""
    record = session_record(session_id, namespace=namespace)
    usage = read_across(Usage, record["usage"], "stored usage") if record["usage"] else state.usage
    return {
        "status": record["status"],
        "end_reason": record["end_reason"],
        "ended_by": record["ended_by"],
        "created_at": record["created_at"],
        "ended_at": record["ended_at"],
        "transcript": [{"role": t["role"], "text": t["text"]} for t in record["transcript"] if not t["late"]],
        "tool_steps": record["tool_steps"],
        "model": record["model"],
        "agent": record["agent"],
        "voice": record["voice"],
        "usage": usage.model_dump(),
        "cost_usd": cost_usd(usage, prices),
        "heard_latency": record["heard_latency"],
        "why": record["why"],
    }
