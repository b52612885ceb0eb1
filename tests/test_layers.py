"""The import direction of DESIGN.md holds: pipeline ← models ← workers; the gateway and the
simulator never reach into models or workers; the pure core imports nothing with I/O."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"pipeline", "models", "workers", "gateway", "simulator", "switchboard", "bench", "tests"}

# What each package may import of Switchboard's own, and (for the core) of anything else.
ALLOWED_FIRST_PARTY = {
    "pipeline": {"pipeline"},
    "models": {"pipeline", "models"},
    "workers": {"pipeline", "models", "workers"},
    "gateway": {"pipeline", "gateway"},
    "simulator": {"simulator"},
}
PIPELINE_THIRD_PARTY = {"pydantic"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _is_allowed(name: str, allowed: set[str]) -> bool:
    return any(name == rule or name.startswith(rule + ".") for rule in allowed)


@pytest.mark.parametrize("package", sorted(ALLOWED_FIRST_PARTY))
def test_each_package_imports_only_what_its_layer_may(package: str) -> None:
    """No module reaches into a layer above or beside it."""
    offences = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imports(path):
            if name.split(".")[0] in FIRST_PARTY and not _is_allowed(name, ALLOWED_FIRST_PARTY[package]):
                offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offences == []


def test_the_pure_core_imports_only_the_standard_library_and_pydantic() -> None:
    """pipeline/ does no I/O: nothing but the standard library, pydantic and itself."""
    offences = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in PIPELINE_THIRD_PARTY or top == "pipeline":
                continue
            offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offences == []
