"""What the workers know of the gateways' liveness: the keys each gateway renews in Redis."""

from __future__ import annotations

from typing import Any

from pipeline.admission import takeover_refusal
from pipeline.platform.names import gateway_alive_key, gateway_registry_key


def takeover_refusal_now(client: Any, namespace: str, dead_gateway: str, new_gateway: str) -> str | None:
    """Why a session may not move from `dead_gateway` to `new_gateway` as things stand now (one
    round trip reads both liveness keys), or None if it may."""
    with client.pipeline(transaction=False) as look:
        look.exists(gateway_alive_key(namespace, dead_gateway))
        look.exists(gateway_alive_key(namespace, new_gateway))
        dead_is_alive, new_is_alive = look.execute()
    return takeover_refusal(
        dead_gateway, new_gateway, dead_is_alive=bool(dead_is_alive), new_is_alive=bool(new_is_alive)
    )


def gateways_alive(client: Any, namespace: str) -> list[str]:
    """The deployment's gateways alive now (their liveness keys renewed), in id order: those a
    call a worker decides to place may be dialled through."""
    members = sorted(
        member.decode() if isinstance(member, bytes) else str(member)
        for member in client.smembers(gateway_registry_key(namespace))
    )
    if not members:
        return []
    with client.pipeline(transaction=False) as look:
        for gateway_id in members:
            look.exists(gateway_alive_key(namespace, gateway_id))
        alive = look.execute()
    return [gateway_id for gateway_id, is_alive in zip(members, alive, strict=True) if is_alive]
