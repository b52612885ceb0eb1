"""Numbered schema migrations: `NNNN_name.py` modules, each with a list `STATEMENTS` of SQL."""
