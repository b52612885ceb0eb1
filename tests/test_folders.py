"""A process that cannot write its folder (the data folder, a worker's metrics folder) stops at
start with one line naming the folder and the setting that chose it (exit 2), before it reaches
any server: deploy/'s image once ran its workers as uid 10001 in root's /app, where each died on
`.switchboard/metrics` with a PermissionError traceback and was restarted into the same."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchboard.services import Services

# A refused start stops before any server is reached; a start that got further takes longer.
EXIT_TIMEOUT_S = 60
# What the kernel says to a process that may not write the folder: the image's user in root's
# folder (EACCES), or root in an immutable one (EPERM).
REFUSED = ("Permission denied", "Operation not permitted")


@pytest.fixture
def roots_folder() -> Iterator[Path]:
    """A folder like the image's /app to the image's user: it may enter and read it, not write
    in it. Root writes anywhere but in an immutable folder (chattr +i), so that is the suite's as
    root; anyone else is refused a folder of mode 0555."""
    with tempfile.TemporaryDirectory(prefix="switchboard-readonly-") as name:
        folder = Path(name)
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i", str(folder)], check=True)
        else:
            folder.chmod(0o555)
        try:
            yield folder
        finally:
            if os.geteuid() == 0:
                subprocess.run(["chattr", "-i", str(folder)], check=True)
            folder.chmod(0o755)


def _start(folder: Path, environment: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    """`switchboard ARGUMENTS` started in `folder`."""
    return subprocess.run(
        [sys.executable, "-m", "switchboard", *arguments],
        env=environment,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
        check=False,
    )


def _worker_environment(services: Services, **settings: str) -> dict[str, str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("SWITCHBOARD_")}
    environment.update(
        SWITCHBOARD_DATABASE_URL=services.database_url,
        SWITCHBOARD_REDIS_URL=services.redis_url,
        SWITCHBOARD_DATA_KEY=os.environ["SWITCHBOARD_DATA_KEY"],
        SWITCHBOARD_METRICS="true",
    )
    environment.update(settings)
    return environment


def _one_line(finished: subprocess.CompletedProcess[str]) -> str:
    """The refusal: exit 2, one line on stderr and no traceback, nothing started."""
    output = finished.stdout + finished.stderr
    assert finished.returncode == 2, output
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, output
    assert "Traceback" not in output and "ready" not in finished.stdout, output
    return lines[0]


def test_a_worker_in_a_working_directory_it_cannot_write_names_the_data_folder(
    services: Services, roots_folder: Path
) -> None:
    """deploy/ as it shipped: no folder set, so the metrics land in `.switchboard` under the
    working directory, which the process may not write."""
    finished = _start(roots_folder, _worker_environment(services), "worker", "--queues", "reads")
    line = _one_line(finished)
    folder = roots_folder / ".switchboard" / "metrics" / "switchboard"
    assert line.startswith("switchboard: SWITCHBOARD_DATA_DIR: cannot write the folder "), line
    assert f" {folder} (" in line and any(reason in line for reason in REFUSED), line
    assert "SWITCHBOARD_METRICS_DIR" in line, "the setting for the metrics alone is not offered"


def test_a_worker_whose_metrics_folder_it_cannot_write_names_that_setting(
    services: Services, roots_folder: Path, tmp_path: Path
) -> None:
    folder = roots_folder / "metrics"
    environment = _worker_environment(
        services, SWITCHBOARD_METRICS_DIR=str(folder), SWITCHBOARD_DATA_DIR=str(tmp_path)
    )
    line = _one_line(_start(roots_folder, environment, "worker", "--queues", "reads"))
    assert line.startswith(f"switchboard: SWITCHBOARD_METRICS_DIR: cannot write the folder {folder} ("), line
    assert any(reason in line for reason in REFUSED), line


def test_a_metrics_folder_under_a_file_is_refused_the_same_way(services: Services, tmp_path: Path) -> None:
    """Not a permission: the path cannot be a folder at all, whoever asks."""
    plain_file = tmp_path / "plain-file"
    plain_file.write_text("not a folder\n")
    folder = plain_file / "metrics"
    environment = _worker_environment(services, SWITCHBOARD_METRICS_DIR=str(folder))
    line = _one_line(_start(tmp_path, environment, "worker", "--queues", "reads"))
    assert line.startswith(f"switchboard: SWITCHBOARD_METRICS_DIR: cannot write the folder {folder} ("), line
    assert "Not a directory" in line, line


def test_the_embedded_defaults_key_file_in_a_folder_it_cannot_write_names_the_data_folder(
    roots_folder: Path,
) -> None:
    """No database configured: the deployment key is generated into the data folder, which
    here the process may not write."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("SWITCHBOARD_")}
    line = _one_line(_start(roots_folder, environment, "worker"))
    folder = roots_folder / ".switchboard"
    assert line.startswith(f"switchboard: SWITCHBOARD_DATA_DIR: cannot write the folder {folder} ("), line
