"""What names a model (models/model_uses.py) and `switchboard doctor`: the deployment's routes
and its campaigns still to run are found by the model their session names, and doctor lists
those whose model shuts down within 30 days (or has), with the deployment's defaults, exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from models import agents, campaigns, outbound, phone
from models.model_uses import ModelUse, models_named
from pipeline.api.requests import RouteSpec
from pipeline.outbound.contacts import Contact
from pipeline.outbound.specs import CampaignSettings
from pipeline.privacy.sealing import DeploymentKey
from switchboard.services import Services


def _route(namespace: str, number: str, **session: Any) -> str:
    spec = RouteSpec.model_validate({"number": number, "session": {"instructions": "Answer.", **session}})
    return phone.add_route(namespace, spec).id


def _campaign(namespace: str, **session: Any) -> str:
    outbound.use_keys([DeploymentKey.generate()])
    outbound.add_trunk(namespace, "main", "sips:trunk.example.com", "agent", "pw", "+12125550100")
    campaign_id = f"camp_{uuid.uuid4().hex}"
    spec = CampaignSettings.model_validate(
        {"name": "reminders", "session": {"instructions": "Remind.", "provider": "live", **session}}
    )
    campaigns.create(namespace, campaign_id, spec, [Contact(to="+12125550101")])
    return campaign_id


def test_routes_and_running_campaigns_are_found_by_the_model_they_name(database: Any) -> None:
    namespace = f"uses-{uuid.uuid4().hex[:8]}"
    plain = _route(namespace, "+12125550001")
    named = _route(
        namespace, "+12125550002", model="gpt-realtime-2.1-mini", transcription={"model": "whisper-1"}
    )
    campaign_id = _campaign(namespace, model="gpt-live-1")
    other = _route(f"other-{uuid.uuid4().hex[:8]}", "+12125550003", model="gpt-realtime")
    agents.create_agent(namespace, "desk")
    agents.add_version(namespace, "desk", {"instructions": "Hi.", "model": "gpt-realtime"}, "ada")
    agents.add_version(namespace, "desk", {"instructions": "Hi.", "model": "gpt-realtime-2.1"}, "ada")
    agents.publish(namespace, "desk", 2, "ada")  # only the published version is named

    uses = models_named(namespace)

    assert sorted(uses, key=lambda use: (use.kind, use.id, use.field)) == [
        ModelUse("agent", "desk@2", "model", "gpt-realtime-2.1"),
        ModelUse("campaign", campaign_id, "model", "gpt-live-1"),
        ModelUse("route", named, "model", "gpt-realtime-2.1-mini"),
        ModelUse("route", named, "transcription.model", "whisper-1"),
    ]
    assert plain not in {use.id for use in uses} and other not in {use.id for use in uses}
    campaigns.set_status(namespace, campaign_id, "cancel")
    assert [use.kind for use in models_named(namespace)] == [
        "agent",
        "route",
        "route",
    ]  # a cancelled one is done


def _doctor(
    services: Services, namespace: str, catalog: Path | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
        "SWITCHBOARD_BROKER_NAMESPACE": namespace,
    }
    if catalog is not None:
        environment["SWITCHBOARD_MODEL_CATALOG"] = str(catalog)
    return subprocess.run(
        [sys.executable, "-m", "switchboard", "doctor"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_doctor_lists_what_names_a_model_shutting_down(
    database: Any, services: Services, tmp_path: Path
) -> None:
    namespace = f"doctor-{uuid.uuid4().hex[:8]}"
    today = datetime.now(UTC).date()
    catalog = tmp_path / "models.toml"
    catalog.write_text(
        '[[model]]\nid = "gpt-realtime-soon"\napi = "realtime"\ncontext_tokens = 32_000\n'
        f'shutdown_date = {(today + timedelta(days=12)).isoformat()}\nreplacement = "gpt-realtime-2.1"\n'
        f'source = "a test"\nchecked_on = {today.isoformat()}\n'
    )
    clean = _doctor(services, namespace, catalog)
    assert clean.returncode == 0, clean.stderr
    assert "no default, route or campaign names a model shutting down" in clean.stdout

    route_id = _route(namespace, "+12125550009", model="gpt-realtime-soon")
    _route(namespace, "+12125550010", model="gpt-realtime-2.1")
    found = _doctor(services, namespace, catalog)

    assert found.returncode == 1, found.stderr
    assert found.stdout.splitlines() == [
        f"route {route_id} (model): gpt-realtime-soon shuts down in 12 days"
        f" ({(today + timedelta(days=12)).isoformat()}); its replacement is gpt-realtime-2.1"
    ]
    assert "1 to change" in found.stderr
    # A default near its shutdown is named as one.
    with_default = subprocess.run(
        [sys.executable, "-m", "switchboard", "doctor"],
        env={
            **os.environ,
            "SWITCHBOARD_DATABASE_URL": services.database_url,
            "SWITCHBOARD_REDIS_URL": services.redis_url,
            "SWITCHBOARD_BROKER_NAMESPACE": f"doctor-{uuid.uuid4().hex[:8]}",
            "SWITCHBOARD_MODEL_CATALOG": str(catalog),
            "SWITCHBOARD_PROVIDER_MODEL": "gpt-realtime-soon",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert with_default.returncode == 1
    assert with_default.stdout.startswith(
        "default SWITCHBOARD_PROVIDER_MODEL (gpt-realtime-soon): gpt-realtime-soon"
    )
