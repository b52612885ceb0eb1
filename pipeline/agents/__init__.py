"""Agents as data: a name with immutable numbered versions, each a session spec; which one a
call runs, what changed between two, and a call's own fields over its version's."""
