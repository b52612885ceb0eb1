"""The demo shop's orders (`demo_orders`), as the `lookup_order` reference tool reads them."""

from __future__ import annotations

from typing import Any

from models.db import database

FIND_ORDER = "SELECT order_id, status, carrier, eta, items FROM demo_orders WHERE order_id = %s"


def find_order(order_id: str) -> dict[str, Any] | None:
    """The order as JSON-ready values (`eta` an ISO date or None), or None when there is none."""
    # Tool bodies run on short-lived threads, and peewee keeps one connection per thread: a
    # connection opened here is closed here, and one the caller already had is left open.
    opened_here = database.is_closed()
    try:
        row = database.execute_sql(FIND_ORDER, (order_id,)).fetchone()
    finally:
        if opened_here:
            database.close()
    if row is None:
        return None
    found_id, status, carrier, eta, items = row
    return {
        "order_id": found_id,
        "status": status,
        "carrier": carrier,
        "eta": eta.isoformat() if eta is not None else None,
        "items": items,
    }
