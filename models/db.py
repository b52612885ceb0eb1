"""The database handle and the tables. Only `models` imports peewee."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, Protocol

import psycopg2.extensions
from peewee import (
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    DatabaseProxy,
    DateTimeField,
    DoubleField,
    ForeignKeyField,
    IntegerField,
    Model,
    PostgresqlDatabase,
    TextField,
)
from playhouse.postgres_ext import BinaryJSONField

database = DatabaseProxy()

# A blocked row lock or a runaway statement must end the transaction (and let Dramatiq retry)
# rather than hang a worker thread: Dramatiq's TimeLimit cannot interrupt a C call.
LOCK_TIMEOUT_MS = 5_000
STATEMENT_TIMEOUT_MS = 10_000

# A server that vanished without closing its connections (a host down, a network cut) is noticed
# in seconds, not by the kernel's defaults (a connect waits about two minutes, a query's
# unacknowledged bytes about fifteen): a connect gives up on a host after 3 s and libpq tries the
# next host of a multi-host URL; a connection whose bytes go unacknowledged for 10 s, or idle
# with 5 s + 3 × 2 s of keepalives unanswered, is lost, and the message on it waits for the
# database (pipeline.platform.outages). A URL that sets any of them keeps its own.
DEAD_SERVER_DETECTION = {
    "connect_timeout": "3",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}


def connect(database_url: str) -> PostgresqlDatabase:
    """Bind the tables to a database URL (connections open lazily, one per thread)."""
    arguments = parse_database_url(database_url)
    arguments["options"] = f"-c lock_timeout={LOCK_TIMEOUT_MS} -c statement_timeout={STATEMENT_TIMEOUT_MS}"
    for name, value in DEAD_SERVER_DETECTION.items():
        arguments.setdefault(name, value)
    handle = PostgresqlDatabase(**arguments)
    database.initialize(handle)
    return handle


def parse_database_url(url: str) -> dict[str, Any]:
    """Keyword arguments for peewee: ``PostgresqlDatabase(**parse_database_url(url))``.

    libpq parses the URL, so a socket directory in ``?host=``, percent-escapes and any other
    libpq parameter (``sslmode``, ``connect_timeout`` …) mean what they mean to psycopg2.
    """
    options: dict[str, Any] = dict(psycopg2.extensions.parse_dsn(url))
    arguments: dict[str, Any] = {"database": options.pop("dbname", None)}
    if "port" in options and "," not in options["port"]:
        arguments["port"] = int(options.pop("port"))
    # Several hosts (`postgresql://h1:5432,h2:5432/db?target_session_attrs=read-write`) keep their
    # comma-separated hosts and ports as libpq takes them: it tries each in turn for a primary.
    arguments.update(options)
    return arguments


# SQLSTATE of a write on a read-only server: the connection reached a standby, or a primary
# that was demoted under it (a failover). A fresh connection finds the primary again
# (`target_session_attrs=read-write` in a multi-host URL).
_READ_ONLY_SQL_TRANSACTION = "25006"


def is_connection_lost(error: BaseException) -> bool:
    """Whether `error` says this connection cannot serve writes any more, so a fresh one must
    be opened: lost (psycopg2 and peewee both name it OperationalError or InterfaceError), or on
    a server that is read-only now."""
    if type(error).__name__ in ("OperationalError", "InterfaceError"):
        return True
    return _read_only(error)


def _read_only(error: BaseException) -> bool:
    # peewee wraps psycopg2's error: the original is its first argument and its context.
    seen: list[BaseException] = [error]
    for candidate in (error.args[0] if error.args else None, error.__cause__, error.__context__):
        if isinstance(candidate, BaseException):
            seen.append(candidate)
    return any(getattr(candidate, "pgcode", None) == _READ_ONLY_SQL_TRANSACTION for candidate in seen)


def database_answers() -> bool:
    """Whether this thread's connection reaches a server that takes writes now (a fresh
    connection is opened when it does not)."""
    try:
        cursor = database.execute_sql("SELECT NOT pg_is_in_recovery()")
        row = cursor.fetchone()
    except Exception as error:  # noqa: BLE001 (any failure to answer is the answer)
        if is_connection_lost(error):
            reopen()
        return False
    return bool(row and row[0])


def reopen() -> None:
    """Forget this thread's connection (a PostgreSQL restart leaves it dead); the next query
    opens a fresh one."""
    try:
        database.close()
    except Exception:  # noqa: BLE001 (closing a connection that is already gone may fail; it is gone either way)
        pass


def advisory_key(name: str) -> int:
    """The key of the advisory lock named `name`: a signed 64-bit number from its SHA-256 (two
    names sharing a key by chance only make a wait longer)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def utcnow() -> datetime:
    return datetime.now(UTC)


class SessionTransaction(Protocol):
    """What the tables a session owns (compactions, timers, tool steps) need of the transaction
    that holds its row lock: the session's id, and SQL run inside the transaction.

    `models.sessions.LockedSession` is the one there is; those tables' modules (and
    `models.event_log`, `models.applied`) take this type, not that class, because
    `models.sessions` imports them."""

    @property
    def id(self) -> str: ...

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        """Run SQL inside the transaction, after the writes it holds back, and answer the cursor."""

    def defer(self, sql: str, parameters: Any = ()) -> None:
        """Hold a write back for the transaction's next round trip."""


class _Table(Model):
    class Meta:
        database = database


class SessionRow(_Table):
    id = CharField(primary_key=True, max_length=64)
    status = CharField(max_length=16, index=True)
    generation = IntegerField(default=1)
    # The highest seq applied; every logged event up to it is applied, in order.
    applied_seq = BigIntegerField(default=0)
    # The highest seq logged; above applied_seq means early events wait for a gap.
    logged_seq = BigIntegerField(default=0)
    # How many events (sequenced or not) have been applied: the order of the fold.
    applied_count = BigIntegerField(default=0)
    owning_gateway = CharField(max_length=128)
    # The broker namespace of the deployment that created it (deployments may share a database).
    namespace = CharField(max_length=128, default="")
    provider_call_id = CharField(max_length=256, null=True, index=True)
    instructions = TextField(default="")
    state = BinaryJSONField()
    usage = BinaryJSONField(default=dict)
    end_reason = CharField(max_length=128, null=True)
    created_at = DateTimeField(default=utcnow)
    updated_at = DateTimeField(default=utcnow)
    ended_at = DateTimeField(null=True)
    # Set when the session's content was erased (on request, or by the retention sweep).
    erased_at = DateTimeField(null=True)
    erased_because = CharField(max_length=16, null=True)

    class Meta:
        table_name = "sessions"


class SessionEventRow(_Table):
    id = BigAutoField()
    session = ForeignKeyField(SessionRow, column_name="session_id", on_delete="CASCADE")
    # The gateway's number for this event; NULL for host inputs (creation, timers, admission).
    seq = BigIntegerField(null=True)
    provider_event_id = CharField(max_length=256, null=True)
    kind = CharField(max_length=128)
    payload = BinaryJSONField()
    generation = IntegerField()
    received_at = DoubleField()
    # The worker's transaction start (before the row lock) and the write, on the database's clock.
    taken_at = DoubleField(null=True)
    applied_at = DoubleField(null=True)
    disposition = CharField(max_length=16)
    # Position in the fold (1-based); NULL while pending.
    applied_order = BigIntegerField(null=True)
    controls = BinaryJSONField(default=list)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "session_events"


class TranscriptItemRow(_Table):
    id = BigAutoField()
    session = ForeignKeyField(SessionRow, column_name="session_id", on_delete="CASCADE")
    role = CharField(max_length=16)
    text = TextField()
    provider_item_id = CharField(max_length=256)
    response_id = CharField(max_length=256, null=True)
    seq = BigIntegerField(null=True)
    late = BooleanField(default=False)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "transcript_items"


class IncidentRow(_Table):
    id = BigAutoField()
    session = ForeignKeyField(SessionRow, column_name="session_id", null=True, on_delete="CASCADE")
    code = CharField(max_length=128, index=True)
    severity = CharField(max_length=16)
    summary = TextField()
    context = BinaryJSONField(default=dict)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "incidents"


TABLES = (SessionRow, SessionEventRow, TranscriptItemRow, IncidentRow)
