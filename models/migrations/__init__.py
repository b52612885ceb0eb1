"""Numbered schema migrations: `NNNN_name.py` modules, each with a list `STATEMENTS` of SQL, and
a `rewrite(execute)` when rows must be rewritten by rules SQL does not have."""
