"""Reading what another release wrote (pipeline.platform.releases), logged once per name."""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from pydantic import BaseModel

from pipeline.platform.releases import across_releases, first_report

logger = logging.getLogger(__name__)

Model = TypeVar("Model", bound=BaseModel)


def read_across(model: type[Model], data: bytes | str | dict[str, Any], what: str) -> Model:
    """`data` (a stored state, a message) as `model`, whichever release wrote it."""
    value, dropped = across_releases(model, data)
    if dropped and (line := first_report(what, dropped)):
        logger.warning(line)
    return value
