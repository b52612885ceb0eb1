"""A fresh machine gets what was tested: every dependency is bounded below its next major
version, the lock (constraints.txt) pins each within those bounds, and the suite runs on exactly
the versions the lock pins. A new major reaches a session through `make upgrade-check`, never a
user through `make test`."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The operators that keep a release of the next major out.
UPPER = {"<", "<=", "==", "==="}


def _requirements() -> list[Requirement]:
    project = PYPROJECT["project"]
    written = [
        *PYPROJECT["build-system"]["requires"],
        *project["dependencies"],
        *(line for extra in project["optional-dependencies"].values() for line in extra),
    ]
    return [Requirement(line) for line in written]


def _lock() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, separator, version = line.partition("==")
        assert separator, f"constraints.txt: {line!r} is not an exact pin"
        pins[canonicalize_name(name)] = Version(version)
    return pins


def _next_major(version: Version) -> Version:
    return Version(str(version.major + 1))


def test_every_dependency_is_bounded_below_its_next_major() -> None:
    """Each requirement (the build's, the package's, every extra's) either pins a version or
    stops below the major after the one the lock holds."""
    lock = _lock()
    unbounded, too_wide = [], []
    for requirement in _requirements():
        operators = {spec.operator for spec in requirement.specifier}
        if not operators & UPPER:
            unbounded.append(str(requirement))
            continue
        locked = lock.get(canonicalize_name(requirement.name))
        for spec in requirement.specifier:
            if spec.operator == "<" and locked is not None and Version(spec.version) > _next_major(locked):
                too_wide.append(f"{requirement} (locked {locked})")
    assert unbounded == [], f"no upper bound: {unbounded}"
    assert too_wide == [], f"bounded past the next major: {too_wide}"


def test_the_lock_pins_every_dependency_within_its_bounds() -> None:
    """Every requirement of the package and its extras is pinned, at a version its own
    specifier allows (the build's setuptools is the build's own, bounded in pyproject.toml)."""
    lock = _lock()
    missing, outside = [], []
    for requirement in _requirements()[len(PYPROJECT["build-system"]["requires"]) :]:
        pinned = lock.get(canonicalize_name(requirement.name))
        if pinned is None:
            missing.append(requirement.name)
        elif not requirement.specifier.contains(pinned, prereleases=True):
            outside.append(f"{requirement} (locked {pinned})")
    assert missing == [], f"not in constraints.txt: {missing}"
    assert outside == [], f"locked outside their bounds: {outside}"


def test_the_suite_runs_on_the_locked_versions() -> None:
    """What is installed where the suite runs is what the lock pins: `make test` installs from
    it, so a difference means a version the suite never passed with."""
    lock = _lock()
    installed = {
        canonicalize_name(dist.metadata["Name"]): Version(dist.version) for dist in metadata.distributions()
    }
    differing = sorted(
        f"{name} {installed[name]} (locked {pinned})"
        for name, pinned in lock.items()
        if name in installed and installed[name] != pinned
    )
    assert differing == []
    project = PYPROJECT["project"]
    needed = [
        Requirement(line) for line in [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    ]
    absent = [r.name for r in needed if canonicalize_name(r.name) not in installed]
    assert absent == [], f"required for the suite but not installed: {absent}"
