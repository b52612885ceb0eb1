"""Notifications to the apps that own calls and campaigns, on their own queue: an app that is
slow or down never holds up a call."""

from __future__ import annotations

from typing import Any

import dramatiq

from pipeline.platform.names import APP_WEBHOOKS_QUEUE
from workers import app_webhooks, runtime
from workers.actors.shared import deployment

_runtime = runtime.current()


@dramatiq.actor(queue_name=APP_WEBHOOKS_QUEUE, actor_name="notify_campaign", max_retries=8)
def notify_campaign(campaign_id: str, delivery_id: str, kind: str, data: dict[str, Any]) -> None:
    """Deliver one notification of a campaign to its app (retried with backoff, then a dead letter)."""
    app_webhooks.deliver_for_campaign(campaign_id, delivery_id, kind, data)


@dramatiq.actor(queue_name=APP_WEBHOOKS_QUEUE, actor_name="notify_app", max_retries=8)
def notify_app(session_id: str, delivery_id: str, kind: str, data: dict[str, Any]) -> None:
    """Tell the app that owns a call (its session's webhook); raises until it answers 2xx, so
    Dramatiq tries again with backoff, then dead-letters it (a replay keeps its id)."""
    settings = _runtime.settings
    app_webhooks.deliver(session_id, delivery_id, kind, data, settings.price_of, namespace=deployment())
