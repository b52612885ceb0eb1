"""Finding or starting PostgreSQL and Redis, against the real local servers and embedded ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import peewee
import psutil
import psycopg2
import pytest
import redis
from psycopg2 import sql

from models.db import parse_database_url
from switchboard.services import (
    ensure_database,
    resolve_services,
)

LOCAL_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
# Port 1 (tcpmux) is never a database here: a probe there fails at once.
UNREACHABLE = ("127.0.0.1", 1)
REPOSITORY = Path(__file__).resolve().parent.parent

# What another process (a worker, the gateway) does with the URLs it is handed.
CHILD_SCRIPT = """
import json, os, peewee, redis
from models.db import parse_database_url
from workers.emit import ControlPublisher
from pipeline.platform.envelope import Reply

db = peewee.PostgresqlDatabase(**parse_database_url(os.environ["DATABASE_URL"]))
database, = db.execute_sql("select current_database()").fetchone()
client = redis.Redis.from_url(os.environ["REDIS_URL"])
pong = client.ping()
reply = Reply(id="reply_child", request_id="child", status=200, body={"hello": "gateway"})
ControlPublisher(os.environ["REDIS_URL"], "sbtest-child").publish("gw", "", 0, [reply])
_, taken = client.blpop(["sbtest-child:gateway.gw"], timeout=5)
print(json.dumps({"database": database, "pong": pong, "control": json.loads(taken)["items"][0]["body"]}))
"""


@pytest.fixture
def database_name() -> Iterator[str]:
    """A fresh database name on the local server, dropped after the test."""
    name = f"sbtest_{uuid.uuid4().hex[:12]}"
    yield name
    connection = psycopg2.connect(LOCAL_SERVER_URL)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
    connection.close()


def test_local_services_are_found_and_work(tmp_path, database_name):
    """With nothing configured, the local PostgreSQL and Redis are used and answer."""
    messages: list[str] = []
    services = resolve_services(None, None, tmp_path, log=messages.append, database_name=database_name)

    assert services.started == []
    assert messages == []
    assert services.database_url == f"postgresql://postgres@127.0.0.1:5432/{database_name}"
    db = peewee.PostgresqlDatabase(**parse_database_url(services.database_url))
    assert db.execute_sql("select current_database()").fetchone() == (database_name,)
    db.close()
    assert redis.Redis.from_url(services.redis_url).ping()
    services.stop()


def test_configured_urls_are_used_as_is(tmp_path):
    """Configured URLs come back untouched, and nothing is probed or started."""
    services = resolve_services(
        "postgresql://app:secret@db.internal:6543/calls",
        "redis://cache.internal:6380/2",
        tmp_path,
        pg_probe=UNREACHABLE,
        redis_probe=UNREACHABLE,
    )

    assert services.database_url == "postgresql://app:secret@db.internal:6543/calls"
    assert services.redis_url == "redis://cache.internal:6380/2"
    assert services.started == []
    assert not any(tmp_path.iterdir())


def test_database_creation_tolerates_a_concurrent_creator(database_name):
    """Two processes creating the same database at once both succeed."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        creations = [pool.submit(ensure_database, LOCAL_SERVER_URL, database_name) for _ in range(4)]
    for creation in creations:
        creation.result()  # re-raises whatever a creator hit

    connection = psycopg2.connect(LOCAL_SERVER_URL)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (database_name,))
        assert cursor.fetchone() == (1,)
    connection.close()


def test_embedded_servers_serve_other_processes_and_stop(tmp_path):
    """With no local servers, embedded ones start, serve another process, and stop() ends them."""
    messages: list[str] = []
    services = resolve_services(
        None, None, tmp_path, log=messages.append, pg_probe=UNREACHABLE, redis_probe=UNREACHABLE
    )
    try:
        assert services.started == ["postgres", "redis"]
        assert any(m.startswith("started embedded PostgreSQL 16 in") for m in messages)
        assert services.redis_url.startswith("unix://")

        # postmaster.pid's first line is the server's pid.
        postmaster_pid = int((tmp_path / "pg" / "postmaster.pid").read_text().split()[0])
        redis_pid = redis.Redis.from_url(services.redis_url).info("server")["process_id"]

        child = subprocess.run(
            [sys.executable, "-c", CHILD_SCRIPT],
            check=False,  # the assertion below shows the child's stderr
            env={
                **os.environ,
                "PYTHONPATH": str(REPOSITORY),
                "DATABASE_URL": services.database_url,
                "REDIS_URL": services.redis_url,
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert child.returncode == 0, child.stderr
        assert json.loads(child.stdout) == {
            "database": "switchboard",
            "pong": True,
            "control": {"hello": "gateway"},
        }
    finally:
        services.stop()

    assert has_exited(postmaster_pid)
    assert has_exited(redis_pid)
    assert not (tmp_path / "pg" / "postmaster.pid").exists()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(services.redis_url, retry=None).ping()


def has_exited(pid: int) -> bool:
    """Whether a process is gone; a zombie not yet reaped by PID 1 counts as gone."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_parse_database_url_gives_peewee_arguments():
    """A URL with a socket directory in its query becomes PostgresqlDatabase keyword arguments."""
    arguments = parse_database_url("postgresql://postgres:p%40ss@/calls?host=/run/pg%20dir")

    assert arguments == {
        "database": "calls",
        "user": "postgres",
        "password": "p@ss",
        "host": "/run/pg dir",
    }
    assert parse_database_url("postgresql://u@127.0.0.1:5433/db")["port"] == 5433


def test_a_url_of_several_hosts_finds_the_one_that_takes_writes() -> None:
    """`postgresql://h1,h2/db?target_session_attrs=read-write` (libpq's failover URL, as
    deploy/compose.yaml gives every process): the first host does not answer, the second is a
    primary, and that is where the process's queries go."""
    host, port = UNREACHABLE
    url = f"postgresql://postgres@{host}:{port},127.0.0.1:5432/postgres?target_session_attrs=read-write"
    db = peewee.PostgresqlDatabase(**parse_database_url(url))
    assert db.execute_sql("select inet_server_port(), pg_is_in_recovery()").fetchone() == (5432, False)
    db.close()
