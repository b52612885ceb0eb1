"""The model catalog as the API answers it: every model Switchboard knows, its API, limits,
prices, voices and shutdown date (pipeline/model_catalog)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from starlette.requests import Request
from starlette.responses import Response

from gateway.routes.answers import Answer
from gateway.routes.table import Operation

if TYPE_CHECKING:
    from gateway.ports import ModelsPort


class CatalogModel(Answer):
    """One model of the catalog (docs/providers.md, "The model catalog")."""

    id: str
    api: Literal["realtime", "live", "transcription"]
    context_tokens: int | None
    output_tokens: int | None
    prices: dict[str, object] | None
    voices: list[str]
    reasoning_efforts: list[str]
    deprecated_on: str | None
    shutdown_date: str | None
    replacement: str | None
    source: str
    checked_on: str


class Models(Answer):
    models: list[CatalogModel]


async def list_models(api: ModelsPort, _request: Request) -> Response:
    """Every model of the deployment's catalog, in the catalog's order."""
    return Models.model_validate(
        {"models": [entry.answer() for entry in api.catalog.entries.values()]}
    ).sent()


ROUTES = (
    Operation(
        "GET",
        "/v1/models",
        "The models Switchboard knows: API, limits, prices, voices, shutdown dates",
        "models",
        {200: "the model catalog"},
        list_models,
        answer=Models,
    ),
)
