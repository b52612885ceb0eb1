"""A module whose TOOLS holds something that is not a Tool, for the registry's tests."""

TOOLS = ["echo"]
