#!/bin/sh
# The standby: on first start, a base backup of the primary written with -R (so it starts
# as a standby streaming from it, through the slot); afterwards, the stock entrypoint as is.
# Promote it when the primary is lost: `docker compose exec postgres-standby pg_ctl promote`
# (run as the postgres user) — the workers' multi-host URL finds the new primary by itself.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    until pg_isready -h postgres-primary -U "$POSTGRES_USER"; do sleep 1; done
    PGPASSWORD="$REPLICATION_PASSWORD" pg_basebackup -h postgres-primary -U replicator \
        -D "$PGDATA" -R -X stream -S standby_1 --application-name=standby_1
    chown -R postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
fi
exec docker-entrypoint.sh "$@"
