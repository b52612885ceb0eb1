"""Settings, read from the environment by the entry points and validated here.

Every variable is `SWITCHBOARD_<FIELD>` (upper case). Unset database and Redis URLs mean
"find local servers, or start embedded ones" (see `switchboard.services`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from pipeline.call.errors import BadInput
from pipeline.call.http_tools import AllowedHosts
from pipeline.call.limits import (
    DEFAULT_COMPACTION_INPUT_TOKENS,
    DEFAULT_MAXIMUM_OUTPUT_TOKENS,
    DEFAULT_USAGE_BUDGET_TOKENS,
    MAXIMUM_SESSION_SECONDS,
)
from pipeline.model_catalog.entries import Api, Catalog, CatalogError, read_catalog
from pipeline.platform.cost import ModelPrices
from pipeline.platform.redis_address import parse_redis_address, sentinel_url

PREFIX = "SWITCHBOARD_"
# The schemes the database URL may have (psycopg2's libpq); Redis's are pipeline.platform.redis_address's.
DATABASE_SCHEMES = ("postgresql://", "postgres://")


class ConfigError(BadInput):
    code = "invalid_configuration"


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    _catalog: Catalog = PrivateAttr()
    # What a call on each model is charged at, made once per model: asked on every transaction.
    _priced: dict[str, ModelPrices | None] = PrivateAttr(default_factory=dict)

    database_url: str | None = None
    redis_url: str | None = None
    # Sentinels that know the Redis master (with its name): every Redis client follows a
    # failover (pipeline/platform/redis_address.py). The same as a redis+sentinel:// redis_url.
    redis_sentinels: str | None = None
    redis_sentinel_master: str | None = None
    data_dir: Path = Path(".switchboard")

    # Broker: the wake-up consumer blocks when idle; "stock" is Dramatiq's polling consumer,
    # kept for comparison in benchmarks.
    broker_namespace: str = "switchboard"
    broker_consumer: Literal["wake", "stock"] = "wake"
    # A killed worker's unacknowledged messages come back after this; live workers heartbeat on
    # every fetch (at least once a second when idle), so it only has to cover a stall or two.
    broker_heartbeat_timeout_ms: int = Field(default=3_000, ge=1_000)
    worker_threads: int = Field(default=8, ge=1, le=64)
    # Comma-separated module paths whose TOOLS lists make the tool registry.
    tool_modules: str = "workers.tools.reference"
    # A tool body's time limit (the seeds' 30 s at most; tests shorten it). A Live delegation's
    # handler runs under the same.
    tool_timeout_ms: int = Field(default=30_000, ge=100, le=30_000)
    # Comma-separated module paths whose DELEGATION_HANDLERS lists make the delegation handlers
    # a Live session may name.
    delegation_modules: str = "workers.tools.reference_delegations"
    # What an http tool may reach although it is not on the public internet: comma-separated
    # host names, addresses and CIDR networks (pipeline/call/http_tools.py says what is refused
    # without them: private, loopback over https, link-local, metadata …).
    tool_allow_hosts: AllowedHosts = Field(default_factory=AllowedHosts)

    provider: Literal["simulated", "openai"] = "simulated"
    provider_api_key: str | None = None
    provider_base_url: str = "http://127.0.0.1:8710/v1"
    provider_ws_url: str = "ws://127.0.0.1:8711/v1"
    # The models a session gets when it names none (each must be in the model catalog, of its
    # API): the Realtime one, the Live one (same address and key), and the one that transcribes
    # a Realtime caller (docs/providers.md, "The model catalog", says why this one).
    provider_model: str = "gpt-realtime-2.1"
    live_model: str = "gpt-live-1.1"
    transcription_model: str = "gpt-transcribe"
    # An operator's catalog file (the shape of pipeline/model_catalog/models.toml): its entries
    # replace the shipped ones by id, or add to them.
    model_catalog: Path | None = None
    # The most Live sessions in a call at once, per model ({"gpt-live-1.1": 100}): each Live
    # model has a concurrency cap of its own at the provider, and the next call is refused at
    # admission, with its reason, rather than by the provider mid-dial. A model not named has none.
    live_max_sessions: dict[str, int] = Field(default_factory=dict)

    gateway_id: str = "gw1"
    # On SIGTERM a gateway drains: it takes no new calls, hands its calls to a peer and stops
    # once they are moved, or after this many seconds (a second SIGTERM stops it at once).
    drain_seconds: int = Field(default=30, ge=0, le=3600)
    gateway_host: str = "127.0.0.1"
    gateway_port: int = Field(default=8700, ge=0, le=65535)
    api_token: str = "switchboard-dev-token"
    # Signs the live tokens every gateway hands out and checks; by default derived from the
    # API token (which all gateways of a deployment share).
    live_token_secret: str | None = None

    # Phone calls (the SIP front door): the secret the provider signs its webhooks with (the
    # door is closed without it), the SIP header whose number picks the route, and the most
    # phone calls the deployment answers at once (the next caller is turned away with 503).
    webhook_secret: str | None = None
    route_header: str = Field(default="To", min_length=1, max_length=100)
    max_phone_calls: int = Field(default=1_000, ge=1)
    # Calls going out: at most this many at once across the deployment, and this many of the
    # `max_phone_calls` lines always kept for callers (a dial waits while taking one would
    # leave fewer free).
    max_outbound: int = Field(default=20, ge=0)
    reserve_inbound: int = Field(default=0, ge=0)
    # Days after a call ended that the retention sweep erases its content, for sessions whose
    # privacy policy names no `retention_days` (None: kept until erased on request).
    retention_days: int | None = Field(default=None, ge=1, le=3650)

    # Prometheus metrics: the gateway serves its own on /metrics (a reading key); workers on a
    # machine share a directory (default: data_dir/metrics/<namespace>) and each serves the sum
    # on its own loopback port (0: any free port, printed when it is ready).
    metrics: bool = True
    metrics_dir: Path | None = None
    worker_metrics_host: str = "127.0.0.1"
    worker_metrics_port: int = Field(default=0, ge=0, le=65535)
    # A worker's own probes (workers/health.py): off unless a port is given (0: any free port,
    # printed when it is ready); each worker on a machine needs a port of its own.
    worker_health_host: str = "127.0.0.1"
    worker_health_port: int | None = Field(default=None, ge=0, le=65535)

    # Webhooks to the app (a session's `webhook`): how often a delivery is tried again, and the
    # backoff between tries, before it becomes a dead letter (`switchboard dlq replay` re-sends
    # it with the same id); and the price table a call's cost is computed from (per model:
    # {"text": {"input", "cached", "output"}, "audio": {…}} in dollars per million tokens).
    app_webhook_retries: int = Field(default=8, ge=0, le=30)
    app_webhook_min_backoff_ms: int = Field(default=1_000, ge=10)
    app_webhook_max_backoff_ms: int = Field(default=300_000, ge=10)
    # Event streams to the app's broker (a session's `events`): how often a sweep that the broker
    # did not take is tried again, and the backoff between tries, before it is a dead letter
    # (`switchboard dlq replay` sweeps again from the first message not confirmed).
    event_stream_retries: int = Field(default=8, ge=0, le=30)
    event_stream_min_backoff_ms: int = Field(default=1_000, ge=10)
    event_stream_max_backoff_ms: int = Field(default=300_000, ge=10)
    prices: dict[str, ModelPrices] = Field(default_factory=dict)

    @field_validator("database_url")
    @classmethod
    def _a_postgresql_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(DATABASE_SCHEMES):
            raise ValueError("must be a PostgreSQL URL, postgresql://USER@HOST:PORT/DATABASE")
        return value

    @field_validator("redis_url")
    @classmethod
    def _a_redis_url(cls, value: str | None) -> str | None:
        if value is not None:
            parse_redis_address(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _sentinels_make_the_redis_url(cls, values: object) -> object:
        """SWITCHBOARD_REDIS_SENTINELS with _SENTINEL_MASTER are the same as a
        redis+sentinel:// URL in SWITCHBOARD_REDIS_URL (which they then must not contradict)."""
        if not isinstance(values, dict):
            return values
        sentinels, master = values.get("redis_sentinels"), values.get("redis_sentinel_master")
        if sentinels is None and master is None:
            return values
        if sentinels is None or master is None:
            raise ValueError("SWITCHBOARD_REDIS_SENTINELS and SWITCHBOARD_REDIS_SENTINEL_MASTER go together")
        url = sentinel_url(str(sentinels), str(master))
        if values.get("redis_url") not in (None, url):
            raise ValueError("give SWITCHBOARD_REDIS_URL or the sentinels, not both")
        return {**values, "redis_url": url}

    @field_validator("tool_allow_hosts", mode="before")
    @classmethod
    def _hosts_from_the_list(cls, value: object) -> object:
        return AllowedHosts.parse(value) if isinstance(value, str) else value

    @field_validator("prices", "live_max_sessions", mode="before")
    @classmethod
    def _as_json(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("live_max_sessions")
    @classmethod
    def _positive_caps(cls, value: dict[str, int]) -> dict[str, int]:
        for model, cap in value.items():
            if cap < 1:
                raise ValueError(f"{model}: a cap is at least 1")
        return value

    @model_validator(mode="after")
    def _defaults_in_the_catalog(self) -> Settings:
        """The catalog is read here, once per process (a file that does not parse stops it,
        naming the entry), and each default model must be in it, of its API."""
        try:
            catalog = read_catalog(self.model_catalog)
        except CatalogError as error:
            raise ValueError(str(error)) from error
        defaults: tuple[tuple[str, str, Api], ...] = (
            ("provider_model", self.provider_model, "realtime"),
            ("live_model", self.live_model, "live"),
            ("transcription_model", self.transcription_model, "transcription"),
        )
        for setting, model, api in defaults:
            entry = catalog.get(model)
            if entry is None or entry.api != api:
                known = ", ".join(each.id for each in catalog.of_api(api))
                raise ValueError(
                    f"{PREFIX}{setting.upper()}: {model!r} is not a {api} model in the catalog ({known})"
                )
        for model in self.live_max_sessions:
            entry = catalog.get(model)
            if entry is None or entry.api != "live":
                raise ValueError(f"{PREFIX}LIVE_MAX_SESSIONS: {model!r} is not a Live model in the catalog")
        self._catalog = catalog
        return self

    # The deployment key that wraps every session's data key (base64 of 32 bytes), and the one
    # before it while a rotation runs (`switchboard data-keys rotate`). Read and checked by
    # `switchboard.data_key` at start; kept out of the settings' repr.
    data_key: str | None = Field(default=None, repr=False)
    data_key_previous: str | None = Field(default=None, repr=False)

    sentry_dsn: str | None = None
    sentry_environment: str = "development"
    # Traces are on when an OTLP endpoint is set (the standard OTEL_* variables,
    # switchboard.tracing). With this, a turn's span also carries what was said and answered,
    # as the session's privacy boundary redacted it; without, no transcript text at all.
    trace_content: bool = False

    max_output_tokens: int | Literal["inf"] = DEFAULT_MAXIMUM_OUTPUT_TOKENS
    max_session_seconds: int = Field(default=MAXIMUM_SESSION_SECONDS, ge=1)
    compaction_input_tokens: int = Field(default=DEFAULT_COMPACTION_INPUT_TOKENS, ge=1)
    usage_budget_tokens: int = Field(default=DEFAULT_USAGE_BUDGET_TOKENS, ge=1)

    @field_validator("max_output_tokens")
    @classmethod
    def _provider_range(cls, value: int | str) -> int | str:
        if isinstance(value, int) and not 1 <= value <= 4_096:
            raise ValueError("must be 1..4096 or 'inf' (the provider's range)")
        return value

    @model_validator(mode="after")
    def _openai_needs_a_key(self) -> Settings:
        if self.provider == "openai" and not self.provider_api_key:
            raise ValueError("provider 'openai' needs SWITCHBOARD_PROVIDER_API_KEY")
        return self

    @property
    def provider_key(self) -> str:
        """The bearer key sent to the provider (the simulator accepts any non-empty key)."""
        return self.provider_api_key or "sk-simulated"

    def model_for(self, provider: str) -> str:
        """The model a session of this provider (a session spec's `provider`) talks to when it
        names none."""
        return {"realtime": self.provider_model, "live": self.live_model}[provider]

    @property
    def catalog(self) -> Catalog:
        """The model catalog: the shipped one, with the operator's file on top."""
        return self._catalog

    def served_by(self, provider: str, chosen: str) -> str:
        """The model a session was served by: the one it chose, else its provider's default
        (a session stored before models were chosen per session)."""
        return chosen or self.model_for(provider)

    def price_of(self, provider: str, chosen: str) -> ModelPrices | None:
        """What a session's usage is charged at (see `prices_for`)."""
        return self.prices_for(self.served_by(provider, chosen))

    def prices_for(self, model: str) -> ModelPrices | None:
        """What a call on `model` is charged at: the operator's negotiated rate
        (SWITCHBOARD_PRICES) when it has one, else the catalog's; None when neither has one."""
        if model in self._priced:
            return self._priced[model]
        negotiated = self.prices.get(model)
        entry = self._catalog.get(model)
        priced = negotiated or (None if entry is None or entry.prices is None else entry.prices.for_calls())
        self._priced[model] = priced
        return priced


def settings_from(environ: Mapping[str, str]) -> Settings:
    """Build settings from an environment mapping; a bad value is a `ConfigError` naming it."""
    values: dict[str, str] = {}
    for name, value in environ.items():
        if name.startswith(PREFIX) and value != "":
            values[name[len(PREFIX) :].lower()] = value
    if values.get("provider") == "openai":
        values.setdefault("provider_base_url", "https://api.openai.com/v1")
        values.setdefault("provider_ws_url", "wss://api.openai.com/v1")
        if "provider_api_key" not in values and environ.get("OPENAI_API_KEY"):
            values["provider_api_key"] = environ["OPENAI_API_KEY"]
    unknown = set(values) - set(Settings.model_fields)
    if unknown:
        raise ConfigError(f"unknown settings: {', '.join(PREFIX + n.upper() for n in sorted(unknown))}")
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        # pydantic prefixes a validator's own message with "Value error, "; the message is enough.
        problems = "; ".join(
            f"{PREFIX}{'.'.join(map(str, e['loc'])).upper() or 'SETTINGS'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        )
        raise ConfigError(problems) from exc
