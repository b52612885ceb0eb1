"""What counts as a connection that can no longer serve writes, checked against the errors a
real PostgreSQL raises through peewee."""

from __future__ import annotations

from typing import Any

import peewee
import pytest

from models.db import database as handle
from models.db import database_answers, is_connection_lost


def test_a_write_on_a_read_only_server_asks_for_a_fresh_connection(database: Any) -> None:
    # What a worker meets when its connection reached a standby, or a primary demoted under it.
    with pytest.raises(peewee.InternalError) as raised, handle.atomic():
        handle.execute_sql("SET TRANSACTION READ ONLY")
        handle.execute_sql("CREATE TEMPORARY TABLE read_only_probe (n int)")
    assert is_connection_lost(raised.value)


def test_other_failures_are_not_a_lost_connection(database: Any) -> None:
    with pytest.raises(peewee.ProgrammingError) as raised, handle.atomic():
        handle.execute_sql("SELECT no_such_column FROM pg_class")
    assert not is_connection_lost(raised.value)
    with pytest.raises(peewee.IntegrityError) as integrity, handle.atomic():
        handle.execute_sql("CREATE TEMPORARY TABLE unique_probe (n int UNIQUE)")
        handle.execute_sql("INSERT INTO unique_probe VALUES (1), (1)")
    assert not is_connection_lost(integrity.value)


def test_a_terminated_connection_is_lost_and_the_next_check_reconnects(database: Any) -> None:
    assert database_answers()
    (pid,) = handle.execute_sql("SELECT pg_backend_pid()").fetchone()
    # Another connection ends this one, as a server restart or a failover does.
    other = peewee.PostgresqlDatabase(**handle.obj.connect_params, database=handle.obj.database)
    other.execute_sql("SELECT pg_terminate_backend(%s)", (pid,))
    other.close()
    with pytest.raises(peewee.OperationalError) as raised:
        handle.execute_sql("SELECT 1")
    assert is_connection_lost(raised.value)
    assert not database_answers()  # this attempt finds the connection dead, and drops it
    assert database_answers()  # the next opens a fresh one
    (fresh,) = handle.execute_sql("SELECT pg_backend_pid()").fetchone()
    assert fresh != pid
