"""A module with no TOOLS list, for the registry's tests."""
