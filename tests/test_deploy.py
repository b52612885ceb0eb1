"""deploy/ holds the production topology (two gateways, three workers, Redis with a replica and
three sentinels, PostgreSQL with a standby), every container on the host's network. No container
runs in the suite (deploy/check runs them, by hand: docs/deploy.md), so these tests hold the
files to what Switchboard and the servers read: every process's settings load as the process
would load them, every command parses, every queue has a consumer, every folder a process writes
is its user's, the servers are wired to each other on ports nobody else claims, and the image
installs the lock."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from pipeline.platform.config import settings_from
from pipeline.platform.names import QUEUES
from switchboard.cli import build_parser
from switchboard.services import import_pgserver

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
# PostgreSQL's client programs (pgserver's 16; the image's are Debian's 15, with the same options).
POSTGRES_BIN = Path(str(import_pgserver().__file__)).parent / "pginstall" / "bin"
# A sentinel answers within a second; this is the machine being busy.
SENTINEL_START_S = 20


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))


def _env_example() -> dict[str, str]:
    pairs = (line.partition("=") for line in (DEPLOY / "env.example").read_text().splitlines())
    return {name: value for name, _, value in pairs if name and not name.startswith("#")}


def _with_secrets() -> dict[str, str]:
    """deploy/.env as a deployment fills it in: the example's values, the secrets made up."""
    return {
        **_env_example(),
        "SWITCHBOARD_API_TOKEN": "a-real-token",
        "SWITCHBOARD_PROVIDER_API_KEY": "sk-x",
        "SWITCHBOARD_DATA_KEY": "A" * 43 + "=",
    }


def _interpolated(value: str, env: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME-default}, ${NAME:-default} and ${NAME:?message}, from deploy/.env."""

    def one(match: re.Match[str]) -> str:
        name, operator, rest = match.group(1), match.group(2) or "", match.group(3) or ""
        if name in env and (env[name] or operator != ":-"):
            return env[name]
        if operator in ("-", ":-"):
            return rest
        raise AssertionError(f"{name} is not in deploy/env.example ({operator}{rest})")

    return re.sub(r"\$\{([A-Z0-9_]+)(:\?|:-|-)?([^}]*)\}", one, value)


def _resolved(value: Any) -> Any:
    """A compose value with every ${…} filled from deploy/env.example (no default left unused)."""
    if isinstance(value, str):
        return _interpolated(value, _with_secrets())
    if isinstance(value, list):
        return [_resolved(item) for item in value]
    if isinstance(value, dict):
        return {name: _resolved(item) for name, item in value.items()}
    return value


def _switchboard_services() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in _compose()["services"].items()
        if service.get("image") == "switchboard:latest"
    }


def _environment(service: dict[str, Any]) -> dict[str, str]:
    """What the process sees: deploy/.env (its env_file), then the service's own environment."""
    variables = {name: value for name, value in _with_secrets().items() if value}
    for name, value in service.get("environment", {}).items():
        variables[name] = _interpolated(str(value), _with_secrets())
    return variables


def _event_workers() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in _switchboard_services().items()
        if service["command"][0] == "worker" and "transcript" in service["command"][2].split(",")
    }


def test_the_topology_is_two_gateways_three_workers_redis_with_sentinels_and_a_postgres_standby() -> None:
    services = _resolved(_compose()["services"])
    gateways = {n: s for n, s in _switchboard_services().items() if s["command"][0] == "gateway"}
    assert len(gateways) == 2
    assert len({_environment(s)["SWITCHBOARD_GATEWAY_ID"] for s in gateways.values()}) == 2
    assert len(_event_workers()) == 3
    sentinels = {n: s for n, s in services.items() if s.get("command") == ["sentinel.sh"]}
    assert len(sentinels) == 3
    master_port = services["redis-master"]["environment"]["REDIS_PORT"]
    replica = services["redis-replica"]["command"]
    assert replica[replica.index("--replicaof") + 1 :] == ["127.0.0.1", master_port]
    standby = (DEPLOY / "postgres" / "standby.sh").read_text()
    assert "pg_basebackup" in standby and " -R " in standby
    assert (
        services["postgres-standby"]["environment"]["PRIMARY_PORT"]
        == (services["postgres-primary"]["environment"]["PGPORT"])
    )
    # The sentinels watch the master the processes ask them for, at its port, and agree by a
    # majority.
    watched = re.search(
        r"^sentinel monitor (\S+) (\S+) (\d+) (\d+)$",
        (DEPLOY / "redis" / "sentinel.conf").read_text(),
        re.MULTILINE,
    )
    assert watched is not None
    master_name, host, _port, quorum = watched.groups()
    assert host == "127.0.0.1" and int(quorum) == 2
    assert {s["environment"]["MASTER_PORT"] for s in sentinels.values()} == {master_port}
    for service in _switchboard_services().values():
        assert _environment(service)["SWITCHBOARD_REDIS_SENTINEL_MASTER"] == master_name
    sentinel_ports = {f"127.0.0.1:{s['environment']['SENTINEL_PORT']}" for s in sentinels.values()}
    for service in _switchboard_services().values():
        assert set(_environment(service)["SWITCHBOARD_REDIS_SENTINELS"].split(",")) == sentinel_ports


def test_a_sentinel_starts_on_its_port_watching_the_master_at_its_port(tmp_path: Path) -> None:
    """sentinel.sh, run as the container runs it, with a real redis-server: the sentinel answers
    on SENTINEL_PORT and watches the master `switchboard` at MASTER_PORT."""
    sentinel_port, master_port = _free_port(), _free_port()
    bundled = Path(sys.executable).parent / "redis-server"
    binaries = str(bundled.parent) if bundled.exists() else ""
    sentinel = subprocess.Popen(
        ["sh", str(DEPLOY / "redis" / "sentinel.sh")],
        env={
            "PATH": f"{binaries}:{os.environ['PATH']}",
            "SENTINEL_PORT": str(sentinel_port),
            "MASTER_PORT": str(master_port),
            "SENTINEL_TEMPLATE": str(DEPLOY / "redis" / "sentinel.conf"),
            "SENTINEL_CONFIG": str(tmp_path / "sentinel.conf"),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=sentinel_port, decode_responses=True)
        deadline = time.monotonic() + SENTINEL_START_S
        while True:
            try:
                watched = client.sentinel_master("switchboard")
                break
            except redis.ConnectionError:
                assert sentinel.poll() is None, "the sentinel exited"
                assert time.monotonic() < deadline, "the sentinel did not answer"
                time.sleep(0.05)
        assert (watched["ip"], int(watched["port"]), int(watched["quorum"])) == ("127.0.0.1", master_port, 2)
        client.close()
    finally:
        sentinel.terminate()
        sentinel.wait(10)


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _script(name: str) -> str:
    """A deploy/ shell script with its continued lines joined."""
    return (DEPLOY / name).read_text().replace("\\\n", " ")


@pytest.mark.parametrize("name", sorted(_switchboard_services()))
def test_every_process_s_settings_load_and_follow_a_failover(name: str) -> None:
    """Unknown or malformed SWITCHBOARD_* names stop a process at start: these would."""
    service = _switchboard_services()[name]
    settings = settings_from(_environment(service))
    assert settings.database_url is not None
    hosts = settings.database_url.partition("@")[2].partition("/")[0].split(",")
    assert len(hosts) == 2 and "target_session_attrs=read-write" in settings.database_url
    if service["command"][0] == "gateway":
        # nginx is the door; a gateway is reached only through it.
        assert settings.gateway_host == "127.0.0.1"


@pytest.mark.parametrize("name", sorted(_switchboard_services()))
def test_every_process_writes_only_in_its_user_s_home(name: str) -> None:
    """The image runs as uid 10001, which owns its home and nothing else: the data folder and a
    worker's metrics folder are there, whatever the working directory."""
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    user = re.search(r"useradd --system --uid 10001 --home-dir (\S+) --create-home (\S+)", dockerfile)
    assert user is not None and re.search(rf"^USER {user[2]}$", dockerfile, re.MULTILINE)
    home = Path(user[1])
    assert re.search(rf"^ENV SWITCHBOARD_DATA_DIR={home}$", dockerfile, re.MULTILINE)
    settings = settings_from(_environment(_switchboard_services()[name]))
    assert settings.data_dir.is_absolute() and settings.data_dir.is_relative_to(home)
    assert settings.metrics_dir is not None and settings.metrics_dir.is_relative_to(home)


def test_every_container_uses_the_host_network_on_loopback_at_a_port_of_its_own() -> None:
    """With the host's network, two containers on one port would take turns failing to start."""
    services = _resolved(_compose()["services"])
    claimed: dict[str, str] = {}

    def claim(port: str, by: str) -> None:
        assert port.isdigit(), (by, port)
        assert port not in claimed, f"{by} and {claimed.get(port)} both listen on {port}"
        claimed[port] = by

    for name, service in services.items():
        assert service["network_mode"] == "host", name
        environment = _environment(service) if name in _switchboard_services() else service["environment"]
        for variable in (
            "PGPORT",
            "REDIS_PORT",
            "SWITCHBOARD_GATEWAY_PORT",
            "SWITCHBOARD_WORKER_HEALTH_PORT",
            "SWITCHBOARD_WORKER_METRICS_PORT",
        ):
            if variable in environment and variable in service.get("environment", {}):
                claim(environment[variable], f"{name} ({variable})")
        if "LISTEN" in environment:
            address, _, port = environment["LISTEN"].rpartition(":")
            assert address == "127.0.0.1", "the example's door is loopback; production sets its own"
            claim(port, name)
    # PostgreSQL 2, Redis and its sentinels 5, gateways 2, workers' probes 6 and metrics 6, nginx.
    assert len(claimed) == 2 + 5 + 2 + 6 + 6 + 1
    # Each server is told to listen on loopback at its port.
    assert "-c listen_addresses=127.0.0.1" in _script("postgres/primary.sh")
    assert "-c listen_addresses=127.0.0.1" in _script("postgres/standby.sh")
    assert "bind 127.0.0.1" in (DEPLOY / "redis" / "sentinel.conf").read_text()
    for name in ("redis-master", "redis-replica"):
        command = services[name]["command"]
        assert command[command.index("--bind") + 1] == "127.0.0.1"
        assert command[command.index("--port") + 1] == services[name]["environment"]["REDIS_PORT"]


def test_the_standby_streams_under_the_name_the_primary_waits_for() -> None:
    """A commit on the primary waits for the standby `synchronous_standby_names` names: a standby
    that connects under another name holds every commit for ever."""
    primary = _resolved(_compose()["services"]["postgres-primary"])
    waits_for = [
        argument.partition("=")[2]
        for argument in primary["command"]
        if argument.startswith("synchronous_standby_names=")
    ]
    assert waits_for == ["standby_1"]
    backup = _script("postgres/standby.sh")
    assert "application_name=standby_1" in backup and "-S standby_1" in backup
    assert "pg_create_physical_replication_slot('standby_1')" in _script("postgres/primary.sh")


@pytest.mark.parametrize(
    ("script", "program"),
    [
        ("postgres/standby.sh", "pg_basebackup"),
        ("postgres/primary.sh", "initdb"),
        ("postgres/primary.sh", "pg_ctl"),
    ],
)
def test_the_postgres_scripts_give_their_programs_only_options_they_have(script: str, program: str) -> None:
    """pg_basebackup has no --application-name (the name goes in the connection string)."""
    helped = subprocess.run(
        [str(POSTGRES_BIN / program), "--help"], capture_output=True, text=True, check=True
    ).stdout
    offered = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", helped))
    invocations = [
        line.strip() for line in _script(script).splitlines() if re.match(rf"\s*(\S+=\S+ )?{program} ", line)
    ]
    assert invocations, f"{script} does not run {program}"
    for invocation in invocations:
        words = shlex.split(invocation)
        for word in words[words.index(program) + 1 :]:
            # A word with a space is an option's value (pg_ctl -o "-c …").
            if word.startswith("-") and " " not in word:
                assert word.partition("=")[0] in offered, f"{program} has no option {word} ({script})"


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


def test_the_image_installs_what_the_suite_passed_with() -> None:
    """Every pip install of the build takes the lock (constraints.txt), which the build context
    lets in."""
    dockerfile = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    installs = re.findall(r"pip install [^&\n]*", dockerfile)
    assert len(installs) >= 2
    for install in installs:
        assert "-c constraints.txt" in install, install
    assert re.search(r"^COPY constraints\.txt ", dockerfile, re.MULTILINE)
    patterns = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and line[0] != "#"]
    assert patterns[0] == "*" and "!constraints.txt" in patterns[1:]


def test_gateways_are_probed_on_readyz_which_the_api_serves() -> None:
    probe = _compose()["x-gateway-healthcheck"]["test"]
    assert any("/readyz" in part and "SWITCHBOARD_GATEWAY_PORT" in part for part in probe)
    from gateway.openapi import document

    assert "/readyz" in document()["paths"]
    worker_probe = _compose()["x-worker-healthcheck"]["test"]
    assert any("/readyz" in part and "SWITCHBOARD_WORKER_HEALTH_PORT" in part for part in worker_probe)
