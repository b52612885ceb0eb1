#!/bin/sh
# The standby. On its first start (PGDATA empty): a base backup of the primary (at
# PRIMARY_PORT) written with -R, so it starts as a standby streaming from it through the slot,
# named standby_1 (the name synchronous_standby_names waits for); afterwards, as it is.
# Promote it when the primary is lost:
#   docker-compose -f deploy/compose.yaml exec postgres-standby pg_ctl promote
# and the processes' multi-host URL finds it without a change.
set -eu
: "${REPLICATION_PASSWORD:?}" "${PRIMARY_PORT:?}" "${PGPORT:?}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    until pg_isready -q -h 127.0.0.1 -p "$PRIMARY_PORT"; do sleep 1; done
    # The application name goes in the connection string (pg_basebackup has no option for it),
    # which -R writes into the standby's primary_conninfo.
    PGPASSWORD="$REPLICATION_PASSWORD" pg_basebackup -D "$PGDATA" -R -X stream -S standby_1 \
        -d "host=127.0.0.1 port=$PRIMARY_PORT user=replicator application_name=standby_1"
    chmod 700 "$PGDATA"
fi
exec postgres -D "$PGDATA" -c listen_addresses=127.0.0.1 -k /run/postgresql "$@"
