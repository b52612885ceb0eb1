"""Every Redis client of this process, made from the deployment's Redis address: a plain URL, or
the sentinels that name the master (pipeline/platform/redis_address.py), whose clients ask them again
whenever a connection fails, and so follow a failover. (The gateway and the workers each have
this module: neither layer may import the other, and pipeline/ does no I/O.)"""

from __future__ import annotations

from typing import Any

import redis
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

from pipeline.platform.redis_address import parse_redis_address


class _FollowingConnection(SentinelManagedConnection):
    """A connection that asks the sentinels for the master every time it connects. redis-py 8
    reconnects a dropped connection to the address it had (redis-py #3874, open): after a
    failover it knocked on the dead master for ever."""

    def connect_check_health(self, check_health: bool = True, retry_socket_connect: bool = True) -> None:
        if self._sock is None and self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        super().connect_check_health(check_health=check_health, retry_socket_connect=retry_socket_connect)


def redis_pool(url: str, **options: Any) -> redis.ConnectionPool:
    """A connection pool to the master `url` names (`options`: redis-py's connection options)."""
    address = parse_redis_address(url)
    if not address.through_sentinels:
        return redis.ConnectionPool.from_url(url, **options)
    timeouts = {name: value for name, value in options.items() if name.startswith("socket_")}
    sentinels = Sentinel(list(address.sentinels), sentinel_kwargs=timeouts or None)
    credentials = {"db": address.db, "username": address.username, "password": address.password}
    options = {"connection_class": _FollowingConnection, **options}
    return SentinelConnectionPool(address.master, sentinels, **credentials, **options)


def redis_client(url: str, **options: Any) -> redis.Redis:
    """A client of the master `url` names."""
    if not parse_redis_address(url).through_sentinels:
        return redis.Redis.from_url(url, **options)
    return redis.Redis(connection_pool=redis_pool(url, **options))
