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


def connect(database_url: str) -> PostgresqlDatabase:
    """Bind the tables to a database URL (connections open lazily, one per thread)."""
    arguments = parse_database_url(database_url)
    arguments["options"] = f"-c lock_timeout={LOCK_TIMEOUT_MS} -c statement_timeout={STATEMENT_TIMEOUT_MS}"
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


def is_connection_lost(error: BaseException) -> bool:
    """psycopg2 and peewee both name a lost connection OperationalError or InterfaceError."""
    return type(error).__name__ in ("OperationalError", "InterfaceError")


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

    `models.sessions.LockedSession` is the one there is; those tables' modules take this type,
    not that class, because `models.sessions` imports them."""

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
