#!/bin/sh
# The primary. On its first start (PGDATA empty): the cluster, owned by `switchboard` (password
# POSTGRES_PASSWORD), its database `switchboard`, and the role and slot the standby streams
# with (password REPLICATION_PASSWORD). Then PostgreSQL on 127.0.0.1:PGPORT with the arguments
# compose gives (wal_level, synchronous_standby_names, …).
set -eu
: "${POSTGRES_PASSWORD:?}" "${REPLICATION_PASSWORD:?}" "${PGPORT:?}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    password_file=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$password_file"
    # Passwords over TCP (initdb's host lines cover replication too); the socket, inside this
    # container alone, is for this script.
    initdb -D "$PGDATA" --username=switchboard --pwfile="$password_file" \
        --auth-host=scram-sha-256 --auth-local=trust --encoding=UTF8 --locale=C.UTF-8
    rm -f "$password_file"
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -k /run/postgresql" start
    psql -v ON_ERROR_STOP=1 -h /run/postgresql -U switchboard -d postgres \
        -v replication_password="$REPLICATION_PASSWORD" <<'SQL'
CREATE DATABASE switchboard;
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'replication_password';
SELECT pg_create_physical_replication_slot('standby_1');
SQL
    pg_ctl -D "$PGDATA" -w -m fast stop
fi
exec postgres -D "$PGDATA" -c listen_addresses=127.0.0.1 -k /run/postgresql "$@"
