from __future__ import annotations

from typing import Any

import pytest

from switchboard.services import Services


@pytest.fixture(scope="session")
def database(services: Services) -> Any:
    """The migrated test database, bound to the models."""
    from models.db import connect

    return connect(services.database_url)
