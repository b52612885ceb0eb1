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


def _first_party_imports(path: Path) -> set[str]:
    return {name for name in _imports(path) if name.split(".")[0] in FIRST_PARTY}


def test_the_core_of_a_call_names_no_provider() -> None:
    """pipeline/call/ is what every call is: it imports nothing of Switchboard's but itself, so
    no wing and no neutral rule can leak a provider into it."""
    offences = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "pipeline" / "call").rglob("*.py"))
        for name in _first_party_imports(path)
        if not _is_allowed(name, {"pipeline.call"})
    ]
    assert offences == []


@pytest.mark.parametrize("wing", ["realtime", "live"])
def test_a_wing_s_capabilities_stand_on_the_core_alone(wing: str) -> None:
    """A wing's dialect says what its provider can do in the core's terms only: it imports
    neither the other wing nor the neutral rules."""
    path = ROOT / "pipeline" / wing / "dialect.py"
    offences = [name for name in _first_party_imports(path) if not _is_allowed(name, {"pipeline.call"})]
    assert offences == []


def test_only_the_composition_root_maps_a_provider_to_its_wing() -> None:
    """`pipeline.dialects` is the one neutral module that imports the wings' dialects."""
    offences = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        if path.name == "dialects.py" or path.parent.name in {"realtime", "live"}:
            continue
        for name in _first_party_imports(path):
            if _is_allowed(name, {"pipeline.realtime.dialect", "pipeline.live.dialect"}):
                offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offences == []
