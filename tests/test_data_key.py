"""The deployment key at start: a missing or malformed SWITCHBOARD_DATA_KEY stops the processes
with one line naming it (exit 2), the embedded defaults generate one in `.switchboard/` once and
say so, and `switchboard data-keys rotate` re-wraps the sessions' keys under a new one."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pipeline.privacy.sealing import DeploymentKey, open_sealed, seal
from pipeline.session.wire import SessionCreated
from switchboard.data_key import DataKeyError, deployment_keys, key_file
from switchboard.services import Services
from tests.support.calls import GATEWAY, new_session_id

# Nothing listens here: a process that got as far as connecting would fail otherwise than exit 2.
UNREACHABLE_DATABASE = "postgresql://postgres@127.0.0.1:1/nothing"
SHORT_KEY = base64.b64encode(bytes(16)).decode()
START_TIMEOUT_S = 60


def _environment(**settings: str) -> dict[str, str]:
    """The test run's environment without its deployment key (and the SWITCHBOARD_* settings of
    the test's own)."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("SWITCHBOARD_DATA_KEY", "SWITCHBOARD_DATA_KEY_PREVIOUS", "SWITCHBOARD_DATABASE_URL")
    }
    environment.update(settings)
    return environment


def _switchboard(cwd: Path, environment: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", *arguments],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )


# ── stopping at start ──


@pytest.mark.parametrize(
    "command",
    [("worker",), ("demo",), ("replay", "call.jsonl"), ("bench", "latency")],
    ids=["worker", "demo", "replay", "bench"],
)
def test_a_configured_database_without_a_key_stops_the_process_with_one_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    finished = _switchboard(tmp_path, _environment(SWITCHBOARD_DATABASE_URL=UNREACHABLE_DATABASE), *command)
    assert finished.returncode == 2, finished.stdout + finished.stderr
    lines = finished.stderr.splitlines()
    assert len(lines) == 1, finished.stderr
    assert lines[0].startswith("switchboard: SWITCHBOARD_DATA_KEY is not set")
    assert "openssl rand -base64 32" in lines[0]
    assert not (tmp_path / ".switchboard").exists()  # no key made up in its place


@pytest.mark.parametrize(
    ("key", "says"),
    [
        (SHORT_KEY, "SWITCHBOARD_DATA_KEY decodes to 16 bytes; it must be 32"),
        ("correct horse battery staple", "SWITCHBOARD_DATA_KEY is not base64"),
        ("", "SWITCHBOARD_DATA_KEY is empty"),
    ],
    ids=["short", "not-base64", "empty"],
)
def test_a_malformed_key_stops_the_worker_with_one_line_that_does_not_echo_it(
    tmp_path: Path, key: str, says: str
) -> None:
    environment = _environment(SWITCHBOARD_DATABASE_URL=UNREACHABLE_DATABASE, SWITCHBOARD_DATA_KEY=key)
    finished = _switchboard(tmp_path, environment, "worker")
    assert finished.returncode == 2, finished.stdout + finished.stderr
    lines = finished.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"switchboard: {says}"), finished.stderr
    if key:
        assert key not in finished.stderr and key not in finished.stdout


def test_a_malformed_previous_key_stops_the_worker_naming_it(tmp_path: Path) -> None:
    environment = _environment(
        SWITCHBOARD_DATABASE_URL=UNREACHABLE_DATABASE,
        SWITCHBOARD_DATA_KEY=DeploymentKey.generate().text,
        SWITCHBOARD_DATA_KEY_PREVIOUS=SHORT_KEY,
    )
    finished = _switchboard(tmp_path, environment, "worker")
    assert finished.returncode == 2
    assert finished.stderr.splitlines() == [
        "switchboard: SWITCHBOARD_DATA_KEY_PREVIOUS decodes to 16 bytes; it must be 32"
        " (make one with `openssl rand -base64 32`)"
    ]


# ── the embedded defaults ──


def test_the_embedded_defaults_generate_a_key_once_and_reuse_it(tmp_path: Path) -> None:
    environment = _environment()
    first = _switchboard(tmp_path, environment, "data-keys", "check")
    assert first.returncode == 0, first.stderr
    path = tmp_path / ".switchboard" / "data.key"
    generated = [line for line in first.stdout.splitlines() if "generated a deployment key" in line]
    assert len(generated) == 1 and str(Path(".switchboard") / "data.key") in generated[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = DeploymentKey.of(base64.b64decode(path.read_text()))
    assert json.loads(first.stdout.splitlines()[-1]) == {"key_ids": [key.key_id]}

    again = _switchboard(tmp_path, environment, "data-keys", "check")
    assert again.returncode == 0, again.stderr
    assert "generated" not in again.stdout
    assert json.loads(again.stdout) == {"key_ids": [key.key_id]}
    assert DeploymentKey.of(base64.b64decode(path.read_text())) == key
    assert sorted(item.name for item in path.parent.iterdir()) == ["data.key"]  # nothing left aside


def test_a_key_that_is_set_wins_over_the_generated_one_and_the_previous_follows(tmp_path: Path) -> None:
    said: list[str] = []
    generated = deployment_keys({}, embedded=True, state_dir=tmp_path, log=said.append)
    assert len(said) == 1 and str(key_file(tmp_path)) in said[0]
    assert deployment_keys({}, embedded=True, state_dir=tmp_path, log=said.append) == generated
    assert len(said) == 1

    current, previous = DeploymentKey.generate(), DeploymentKey.generate()
    environment = {"SWITCHBOARD_DATA_KEY": current.text, "SWITCHBOARD_DATA_KEY_PREVIOUS": previous.text}
    assert deployment_keys(environment, embedded=True, state_dir=tmp_path) == (current, previous)
    assert deployment_keys(environment, embedded=False, state_dir=tmp_path) == (current, previous)
    same = {**environment, "SWITCHBOARD_DATA_KEY_PREVIOUS": current.text}
    assert deployment_keys(same, embedded=False, state_dir=tmp_path) == (current,)
    blank_previous = {**environment, "SWITCHBOARD_DATA_KEY_PREVIOUS": " "}
    assert deployment_keys(blank_previous, embedded=False, state_dir=tmp_path) == (current,)


def test_a_damaged_key_file_stops_the_embedded_defaults_naming_it(tmp_path: Path) -> None:
    key_file(tmp_path).write_text("not a key\n")
    with pytest.raises(
        DataKeyError, match=r"SWITCHBOARD_DATA_KEY is not set and the key in .* is not base64"
    ):
        deployment_keys({}, embedded=True, state_dir=tmp_path)
    with pytest.raises(DataKeyError, match="configured database"):
        deployment_keys({}, embedded=False, state_dir=tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()


# ── rotation ──


def test_data_keys_rotate_re_wraps_the_deployment_s_session_keys(services: Services, tmp_path: Path) -> None:
    from models.data_keys import create_session_key, session_private_key
    from models.db import connect
    from models.sessions import new_session

    connect(services.database_url)
    old, new = DeploymentKey.generate(), DeploymentKey.generate()
    namespace = f"rotate-{uuid.uuid4().hex[:8]}"
    sealed: dict[str, str] = {}
    for _ in range(3):
        session_id = new_session_id()
        with new_session(session_id, GATEWAY, namespace) as session:
            session.apply_host(SessionCreated(instructions="Hi."), time.time())
        public = create_session_key(session_id, [old])
        sealed[session_id] = seal("4111 1111 1111 1111", public_key=public, session_id=session_id)
    environment = _environment(
        SWITCHBOARD_DATABASE_URL=services.database_url,
        SWITCHBOARD_REDIS_URL=services.redis_url,
        SWITCHBOARD_BROKER_NAMESPACE=namespace,
        SWITCHBOARD_DATA_KEY=new.text,
    )

    without_previous = _switchboard(tmp_path, environment, "data-keys", "rotate")
    assert without_previous.returncode == 2
    assert (
        old.key_id in without_previous.stderr and "SWITCHBOARD_DATA_KEY_PREVIOUS" in without_previous.stderr
    )
    bad = _switchboard(
        tmp_path, {**environment, "SWITCHBOARD_DATA_KEY_PREVIOUS": SHORT_KEY}, "data-keys", "rotate"
    )
    assert bad.returncode == 2 and "SWITCHBOARD_DATA_KEY_PREVIOUS decodes to 16 bytes" in bad.stderr

    environment["SWITCHBOARD_DATA_KEY_PREVIOUS"] = old.text
    rotated = _switchboard(tmp_path, environment, "data-keys", "rotate")
    assert rotated.returncode == 0, rotated.stderr
    assert json.loads(rotated.stdout) == {"rotated": 3, "key_id": new.key_id}
    for session_id, value in sealed.items():
        private = session_private_key(session_id, [new])
        assert open_sealed(value, private_key=private, session_id=session_id) == "4111 1111 1111 1111"
    again = _switchboard(tmp_path, environment, "data-keys", "rotate")
    assert json.loads(again.stdout) == {"rotated": 0, "key_id": new.key_id}


def test_data_keys_new_prints_a_key_a_deployment_accepts(tmp_path: Path) -> None:
    made = _switchboard(tmp_path, _environment(), "data-keys", "new")
    assert made.returncode == 0
    key = made.stdout.strip()
    assert len(base64.b64decode(key)) == 32
    environment = _environment(SWITCHBOARD_DATABASE_URL=UNREACHABLE_DATABASE, SWITCHBOARD_DATA_KEY=key)
    checked = _switchboard(tmp_path, environment, "data-keys", "check")
    assert checked.returncode == 0 and json.loads(checked.stdout) == {
        "key_ids": [DeploymentKey.of(base64.b64decode(key)).key_id]
    }
    assert not (tmp_path / ".switchboard").exists()
