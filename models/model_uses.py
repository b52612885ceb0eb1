"""Which of a deployment's routes, campaigns and agents name a model (their session's `model` or
its transcription's; an agent's published version), for `switchboard doctor`: a model near its
shutdown is found where it is named before a call finds it."""

from __future__ import annotations

from dataclasses import dataclass

from models.db import database


@dataclass(frozen=True)
class ModelUse:
    """A route or a campaign that names `model` in `field` of its session."""

    kind: str  # "route", "campaign" or "agent" (its published version, `name@n`)
    id: str
    field: str  # "model" or "transcription.model"
    model: str


def models_named(namespace: str) -> list[ModelUse]:
    """The models the deployment's routes, its campaigns still to run and its agents' published
    versions name, by field."""
    rows = database.execute_sql(
        "SELECT 'route', id, spec->>'model', spec->'transcription'->>'model' FROM routes WHERE namespace = %s"
        " UNION ALL"
        " SELECT 'campaign', id, spec->'session'->>'model', spec->'session'->'transcription'->>'model'"
        " FROM campaigns WHERE namespace = %s AND status IN ('scheduled', 'running', 'paused')"
        " UNION ALL"
        " SELECT 'agent', a.name || '@' || v.version, v.spec->>'model', v.spec->'transcription'->>'model'"
        " FROM agents a JOIN agent_versions v"
        " ON v.namespace = a.namespace AND v.agent = a.name AND v.version = a.published_version"
        " WHERE a.namespace = %s AND a.archived_at IS NULL"
        " ORDER BY 1, 2",
        (namespace, namespace, namespace),
    ).fetchall()
    uses: list[ModelUse] = []
    for kind, item_id, model, transcription in rows:
        if model:
            uses.append(ModelUse(kind, item_id, "model", model))
        if transcription:
            uses.append(ModelUse(kind, item_id, "transcription.model", transcription))
    return uses
