"""A worker's tool modules are found from the working directory, as `python -m switchboard`
finds them, and one that will not import stops the worker with one line naming it and why."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from switchboard.services import Services

SCRIPT = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "switchboard"


def _worker(
    services: Services, namespace: str, folder: Path, modules: str
) -> subprocess.CompletedProcess[str]:
    """`switchboard worker` as a user runs it (the installed script), from `folder`."""
    script = SCRIPT if SCRIPT.exists() else Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "switchboard"
    environment = {
        **os.environ,
        "SWITCHBOARD_DATABASE_URL": services.database_url,
        "SWITCHBOARD_REDIS_URL": services.redis_url,
        "SWITCHBOARD_BROKER_NAMESPACE": f"{namespace}-toolmodules",
        "SWITCHBOARD_TOOL_MODULES": modules,
        "SWITCHBOARD_METRICS": "false",
    }
    return subprocess.run(
        [str(script), "worker"],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("import nothing_here\n", "failed to import: No module named 'nothing_here'"),
        ("TOOLS = [\n", "failed to import: SyntaxError"),
        ("raise RuntimeError('the CRM is down')\n", "failed to import: RuntimeError: the CRM is down"),
        ("TOOLS = [1]\n", "TOOLS holds a int, not a Tool"),
    ],
)
def test_a_tool_module_in_the_working_directory_that_cannot_serve_is_one_line(
    services: Services, namespace: str, tmp_path: Path, source: str, said: str
) -> None:
    """Each is found where the user put it (beside them, not "no tool module"), and said."""
    (tmp_path / "desk_tools.py").write_text(source)
    started = _worker(services, namespace, tmp_path, "desk_tools")
    assert started.returncode == 2, started.stderr[-2000:]
    assert "Traceback" not in started.stderr
    [line] = [line for line in started.stderr.splitlines() if line.startswith("switchboard:")]
    assert "tool module 'desk_tools'" in line and said in line, line


def test_a_tool_module_that_does_not_exist_is_named(
    services: Services, namespace: str, tmp_path: Path
) -> None:
    started = _worker(services, namespace, tmp_path, "no_such_tools")
    assert started.returncode == 2
    assert "Traceback" not in started.stderr
    assert "no tool module 'no_such_tools'" in started.stderr
