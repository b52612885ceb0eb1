"""Idempotency keys: claimed before a request acts, finished with its answer
(`pipeline.api.idempotency`)."""

from __future__ import annotations

import base64
from typing import Any

import dramatiq

from models import idempotency as idempotency_keys
from pipeline.platform.names import ADMISSION_QUEUE
from workers import runtime
from workers.actors.shared import REQUEST_POLICY, answer_request

_runtime = runtime.current()


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="claim_idempotency_key", **REQUEST_POLICY)
def claim_idempotency_key(
    request_id: str, gateway_id: str, owner: str, key: str, fingerprint: str, claim_id: str, now: float
) -> None:
    """Claim an Idempotency-Key for a request about to act, or say why it must not act (and
    the stored answer, base64, when it is a replay): see `pipeline.api.idempotency`."""

    def claim() -> tuple[int, dict[str, Any]]:
        namespace = _runtime.settings.broker_namespace
        claimed = idempotency_keys.claim(namespace, owner, key, fingerprint, claim_id, now)
        answer = claimed.answer
        stored = None
        if answer is not None:
            stored = {
                "status": answer.status,
                "headers": answer.headers,
                "body": base64.b64encode(answer.body).decode(),
            }
        return 200, {"verdict": str(claimed.verdict), "answer": stored}

    answer_request(request_id, gateway_id, claim)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="finish_idempotency_key", **REQUEST_POLICY)
def finish_idempotency_key(
    request_id: str,
    gateway_id: str,
    owner: str,
    key: str,
    claim_id: str,
    answer: dict[str, Any] | None = None,
) -> None:
    """Store the answer of the request holding a key's claim (`answer`: status, headers, body
    in base64), or, without one, let the claim go (the request did nothing)."""

    def finish() -> tuple[int, dict[str, Any]]:
        namespace = _runtime.settings.broker_namespace
        if answer is None:
            idempotency_keys.release(namespace, owner, key, claim_id)
            return 200, {"kept": False}
        kept = idempotency_keys.StoredAnswer(
            status=int(answer["status"]),
            headers=[(str(name), str(value)) for name, value in answer["headers"]],
            body=base64.b64decode(answer["body"]),
        )
        return 200, {"kept": idempotency_keys.finish(namespace, owner, key, claim_id, kept)}

    answer_request(request_id, gateway_id, finish)
