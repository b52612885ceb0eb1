"""deploy/ holds the production topology (two gateways, three workers, Redis with a replica and
three sentinels, PostgreSQL with a standby). No container runs here, so these tests hold the
files to what Switchboard reads: every process's settings load as the process would load them,
every command parses, every queue has a consumer, and the servers are wired to each other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.config import settings_from
from pipeline.names import QUEUES
from switchboard.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))


def _env_example() -> dict[str, str]:
    pairs = (line.partition("=") for line in (DEPLOY / "env.example").read_text().splitlines())
    return {name: value for name, _, value in pairs if name and not name.startswith("#")}


def _interpolated(value: str, env: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME-default} and ${NAME:?message}, from deploy/.env."""

    def one(match: re.Match[str]) -> str:
        name, operator, rest = match.group(1), match.group(2) or "", match.group(3) or ""
        if name in env:
            return env[name]
        if operator == "-":
            return rest
        raise AssertionError(f"{name} is not in deploy/env.example ({operator}{rest})")

    return re.sub(r"\$\{([A-Z_]+)(:\?|-)?([^}]*)\}", one, value)


def _switchboard_services() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in _compose()["services"].items()
        if service.get("image") == "switchboard:latest"
    }


def _environment(service: dict[str, Any]) -> dict[str, str]:
    """What the process sees: deploy/.env (its env_file, filled with the example's values,
    the secrets made up), then the service's own environment."""
    example = {
        **_env_example(),
        "SWITCHBOARD_API_TOKEN": "a-real-token",
        "SWITCHBOARD_PROVIDER_API_KEY": "sk-x",
    }
    example["SWITCHBOARD_DATA_KEY"] = "A" * 43 + "="
    variables = {name: value for name, value in example.items() if value}
    for name, value in service.get("environment", {}).items():
        variables[name] = _interpolated(str(value), example)
    return variables


def test_the_topology_is_two_gateways_three_workers_redis_with_sentinels_and_a_postgres_standby() -> None:
    services = _compose()["services"]
    gateways = {n: s for n, s in _switchboard_services().items() if s["command"][0] == "gateway"}
    assert len(gateways) == 2
    assert len({_environment(s)["SWITCHBOARD_GATEWAY_ID"] for s in gateways.values()}) == 2
    assert services["worker"]["deploy"]["replicas"] == 3
    sentinels = [s for s in services.values() if "redis-sentinel" in " ".join(s.get("command", []))]
    assert len(sentinels) == 3
    assert "--replicaof" in services["redis-replica"]["command"]
    standby = (DEPLOY / "postgres" / "standby.sh").read_text()
    assert "pg_basebackup" in standby and " -R " in standby
    # The sentinels watch the master the processes ask them for, and agree by a majority.
    watched = re.search(
        r"sentinel monitor (\S+) (\S+) (\d+) (\d+)", (DEPLOY / "redis" / "sentinel.conf").read_text()
    )
    assert watched is not None
    master_name, host, _port, quorum = watched.groups()
    assert host in services and int(quorum) == 2
    for service in _switchboard_services().values():
        assert _environment(service)["SWITCHBOARD_REDIS_SENTINEL_MASTER"] == master_name


@pytest.mark.parametrize("name", sorted(_switchboard_services()))
def test_every_process_s_settings_load_and_follow_a_failover(name: str) -> None:
    """Unknown or malformed SWITCHBOARD_* names stop a process at start: these would."""
    service = _switchboard_services()[name]
    settings = settings_from(_environment(service))
    assert settings.database_url is not None
    hosts = settings.database_url.partition("@")[2].partition("/")[0].split(",")
    assert len(hosts) == 2 and "target_session_attrs=read-write" in settings.database_url
    if service["command"][0] == "gateway":
        assert settings.gateway_host == "0.0.0.0"


def test_every_command_parses_and_every_queue_has_a_consumer() -> None:
    consumed: set[str] = set()
    for service in _switchboard_services().values():
        command = [str(word) for word in service["command"]]
        build_parser().parse_args(command)
        if command[0] == "worker":
            consumed |= set(command[command.index("--queues") + 1].split(","))
    assert consumed == set(QUEUES)


def test_the_image_holds_every_package() -> None:
    """The Dockerfile copies each top-level package pyproject.toml installs."""
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    copied = set(re.findall(r"^COPY (\w+) \1$", (DEPLOY / "Dockerfile").read_text(), re.MULTILINE))
    assert {package.partition(".")[0] for package in packages} == copied


def test_the_installed_package_holds_every_module_and_data_file() -> None:
    """The image installs the package as a wheel, not from the checkout as the virtualenv does:
    a folder of modules pyproject.toml does not list, or a data file no package-data pattern
    takes, is missing there (workers once died in the image on `pipeline.outbound`)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    tops = {package.partition(".")[0] for package in listed}
    found = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for top in tops
        for path in (ROOT / top).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert found == listed
    data = setuptools.get("package-data", {})
    for top in tops:
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and path.suffix not in (".py", ".pyc"):
                package = ".".join(path.parent.relative_to(ROOT).parts)
                assert any(path.match(pattern) for pattern in data.get(package, [])), (
                    f"{path.relative_to(ROOT)} is not in the wheel:"
                    f" no package-data pattern of {package} takes it"
                )


def test_gateways_are_probed_on_readyz_which_the_api_serves() -> None:
    probe = _compose()["x-gateway-healthcheck"]["test"]
    assert any("/readyz" in part for part in probe)
    from gateway.openapi import document

    assert "/readyz" in document()["paths"]
