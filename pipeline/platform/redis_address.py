"""Where Redis is: a plain URL (redis://, rediss://, unix://), or the sentinels that know which
server is the master now (`redis+sentinel://HOST:PORT,HOST:PORT/MASTER[/DB]`, or the settings
SWITCHBOARD_REDIS_SENTINELS and SWITCHBOARD_REDIS_SENTINEL_MASTER, which make that URL).

Every Redis client of every process is made from one of these (gateway/redis_clients.py,
workers/redis_clients.py): with sentinels, a client asks them for the master when it connects and
again whenever its connection fails, so it follows a failover without a restart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

SENTINEL_SCHEME = "redis+sentinel://"
PLAIN_SCHEMES = ("redis://", "rediss://", "unix://")
# A master's name as Sentinel's configuration takes it (no spaces, no slashes).
_MASTER_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
DEFAULT_SENTINEL_PORT = 26379


@dataclass(frozen=True)
class RedisAddress:
    """A plain URL (`url`), or sentinels with the master's name, database and credentials."""

    url: str = ""
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None

    @property
    def through_sentinels(self) -> bool:
        return bool(self.sentinels)


def parse_redis_address(url: str) -> RedisAddress:
    """The address a URL names; a `ValueError` saying what is wrong with it otherwise."""
    if url.startswith(PLAIN_SCHEMES):
        return RedisAddress(url=url)
    if not url.startswith(SENTINEL_SCHEME):
        raise ValueError(
            "must be a Redis URL, redis://HOST:PORT/DB, unix:///PATH or "
            "redis+sentinel://HOST:PORT,HOST:PORT/MASTER[/DB]"
        )
    rest = url[len(SENTINEL_SCHEME) :]
    credentials, _, rest = rest.rpartition("@") if "@" in rest.partition("/")[0] else ("", "", rest)
    hosts, _, path = rest.partition("/")
    parts = [part for part in path.split("/") if part]
    if not parts or len(parts) > 2:
        raise ValueError("a redis+sentinel:// URL names the master after the hosts: …/MASTER[/DB]")
    master = parts[0]
    if not _MASTER_NAME.fullmatch(master):
        raise ValueError(f"{master!r} is not a Sentinel master's name")
    if len(parts) == 2 and not parts[1].isdigit():
        raise ValueError(f"the database must be a number, not {parts[1]!r}")
    username, password = _credentials(credentials)
    return RedisAddress(
        sentinels=parse_sentinels(hosts),
        master=master,
        db=int(parts[1]) if len(parts) == 2 else 0,
        username=username,
        password=password,
    )


def parse_sentinels(hosts: str) -> tuple[tuple[str, int], ...]:
    """`HOST:PORT,HOST:PORT` (a port left out is Sentinel's 26379)."""
    found: list[tuple[str, int]] = []
    for each in (part.strip() for part in hosts.split(",")):
        if not each:
            continue
        split = urlsplit(f"//{each}")
        try:
            port = split.port or DEFAULT_SENTINEL_PORT
        except ValueError:
            raise ValueError(f"{each!r} is not HOST:PORT") from None
        if not split.hostname or split.path or split.username:
            raise ValueError(f"{each!r} is not HOST:PORT")
        found.append((split.hostname, port))
    if not found:
        raise ValueError("names no sentinel: HOST:PORT,HOST:PORT")
    return tuple(found)


def sentinel_url(sentinels: str, master: str) -> str:
    """The URL the two settings SWITCHBOARD_REDIS_SENTINELS and _SENTINEL_MASTER make."""
    if not _MASTER_NAME.fullmatch(master):
        raise ValueError(f"{master!r} is not a Sentinel master's name")
    hosts = ",".join(
        f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in parse_sentinels(sentinels)
    )
    return f"{SENTINEL_SCHEME}{hosts}/{master}"


def _credentials(text: str) -> tuple[str | None, str | None]:
    if not text:
        return None, None
    user, colon, password = text.partition(":")
    return (unquote(user) or None), (unquote(password) if colon else None)
