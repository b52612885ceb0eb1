"""A tool module that imports a dependency that is not installed, for the registry's tests."""

import switchboard_dependency_that_is_not_installed  # noqa: F401

TOOLS: list[object] = []
