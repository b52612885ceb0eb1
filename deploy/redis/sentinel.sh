#!/bin/sh
# A sentinel: sentinel.conf with this sentinel's port (SENTINEL_PORT) and the master's
# (MASTER_PORT), written where the sentinel may rewrite it (SENTINEL_CONFIG), then the sentinel
# on it. A fresh copy at each start, as a new sentinel; its peers tell it of any failover since.
set -eu
: "${SENTINEL_PORT:?}" "${MASTER_PORT:?}"
template=${SENTINEL_TEMPLATE:-/etc/redis/switchboard-sentinel.conf}
config=${SENTINEL_CONFIG:-/var/lib/redis/sentinel.conf}
sed -e "s/^port .*/port $SENTINEL_PORT/" \
    -e "s/^\(sentinel monitor switchboard 127\.0\.0\.1\) [0-9]* /\1 $MASTER_PORT /" \
    "$template" > "$config"
exec redis-server "$config" --sentinel
