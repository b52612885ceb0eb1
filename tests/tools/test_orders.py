"""lookup_order on a real, migrated PostgreSQL: the demo shop's orders."""

from __future__ import annotations

from datetime import date

from models.db import connect
from models.migrate import available
from switchboard.services import Services
from workers.tools import run_tool
from workers.tools.reference import lookup_order


def test_the_demo_orders_migration_is_picked_up() -> None:
    """The runner lists 0003_demo_orders among the migrations it applies."""
    assert "0003_demo_orders" in available()


def test_order_4417_is_found(services: Services) -> None:
    """Order 4417 has shipped and arrives on a Friday, with its items."""
    connect(services.database_url)
    outcome = run_tool(lookup_order, '{"order_id": "4417"}')
    assert outcome.status == "succeeded", outcome.error
    order = outcome.result
    assert order["found"] is True
    assert (order["order_id"], order["status"]) == ("4417", "shipped")
    assert order["carrier"]
    assert date.fromisoformat(order["eta"]).isoweekday() == 5
    assert {"sku": "KTL-02", "name": "Stovetop kettle", "quantity": 1} in order["items"]


def test_an_unknown_order_is_an_answer_not_an_error(services: Services) -> None:
    """An order that does not exist succeeds with found: false."""
    connect(services.database_url)
    outcome = run_tool(lookup_order, '{"order_id": "9999"}')
    assert outcome.status == "succeeded"
    assert outcome.result == {"found": False, "order_id": "9999"}
