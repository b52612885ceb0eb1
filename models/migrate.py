"""The migration runner: applies `models/migrations/NNNN_*.py` in order, once each: its
`STATEMENTS`, then its `rewrite(execute)` if it has one."""

from __future__ import annotations

import importlib
import pkgutil

from peewee import PostgresqlDatabase

from models import migrations

# Any constant works; it only has to be the same for every process that migrates.
_MIGRATION_LOCK_KEY = 0x5B_0A_2D


def available() -> list[str]:
    """Migration names in the order they apply."""
    return sorted(m.name for m in pkgutil.iter_modules(migrations.__path__) if m.name[:4].isdigit())


def migrate(handle: PostgresqlDatabase) -> list[str]:
    """Apply pending migrations and return their names. Concurrent callers serialize on an
    advisory lock, so several processes starting together migrate once."""
    applied_now: list[str] = []
    with handle.atomic():
        handle.execute_sql("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
        handle.execute_sql(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in handle.execute_sql("SELECT name FROM schema_migrations")}
        for name in available():
            if name in done:
                continue
            module = importlib.import_module(f"models.migrations.{name}")
            for statement in module.STATEMENTS:
                handle.execute_sql(statement)
            # What SQL cannot compute (a phone number's E.164 form) a migration rewrites in
            # Python, in the same transaction: `rewrite(execute)`.
            rewrite = getattr(module, "rewrite", None)
            if rewrite is not None:
                rewrite(handle.execute_sql)
            handle.execute_sql("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
            applied_now.append(name)
    return applied_now
