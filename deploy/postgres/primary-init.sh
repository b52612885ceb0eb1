#!/bin/sh
# Runs once, when the primary's data folder is first made (the stock image runs every
# /docker-entrypoint-initdb.d/*.sh): the role and the slot the standby streams with, and the
# standby's right to connect for replication.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD '${REPLICATION_PASSWORD}';
SELECT pg_create_physical_replication_slot('standby_1');
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
