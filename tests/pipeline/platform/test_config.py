"""Settings from the environment, and the HTTP API's request schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.api.requests import SessionSpec
from pipeline.call.errors import BadInput
from pipeline.call.limits import DEFAULT_MAXIMUM_OUTPUT_TOKENS, MAXIMUM_SESSION_SECONDS
from pipeline.platform.config import ConfigError, settings_from
from pipeline.platform.redis_address import parse_redis_address

# ── settings_from ────────────────────────────────────────────────────────────────────────


def test_an_empty_environment_gives_the_defaults() -> None:
    """With no SWITCHBOARD_ variables every setting has its default."""
    settings = settings_from({"PATH": "/usr/bin", "HOME": "/root"})

    assert settings.provider == "simulated"
    assert settings.provider_key == "sk-simulated"
    assert settings.database_url is None
    assert settings.redis_url is None
    assert settings.data_dir == Path(".switchboard")
    assert settings.broker_consumer == "wake"
    assert settings.worker_threads == 8
    assert settings.gateway_port == 8700
    assert settings.max_output_tokens == DEFAULT_MAXIMUM_OUTPUT_TOKENS
    assert settings.max_session_seconds == MAXIMUM_SESSION_SECONDS


def test_switchboard_variables_are_parsed() -> None:
    """SWITCHBOARD_ variables are read case-insensitively into typed settings."""
    settings = settings_from(
        {
            "SWITCHBOARD_DATABASE_URL": "postgresql://sb@localhost/sb",
            "SWITCHBOARD_WORKER_THREADS": "4",
            "SWITCHBOARD_GATEWAY_PORT": "0",
            "SWITCHBOARD_BROKER_CONSUMER": "stock",
            "SWITCHBOARD_DATA_DIR": "/tmp/sb",
            "SWITCHBOARD_MAX_OUTPUT_TOKENS": "inf",
            "SWITCHBOARD_MAX_SESSION_SECONDS": "120",
        }
    )

    assert settings.database_url == "postgresql://sb@localhost/sb"
    assert settings.worker_threads == 4
    assert settings.gateway_port == 0
    assert settings.broker_consumer == "stock"
    assert settings.data_dir == Path("/tmp/sb")
    assert settings.max_output_tokens == "inf"
    assert settings.max_session_seconds == 120


def test_an_empty_variable_counts_as_unset() -> None:
    """A SWITCHBOARD_ variable set to the empty string leaves its default."""
    assert settings_from({"SWITCHBOARD_WORKER_THREADS": ""}).worker_threads == 8


def test_an_unknown_switchboard_variable_is_refused() -> None:
    """An unknown SWITCHBOARD_ variable is a ConfigError naming it."""
    with pytest.raises(ConfigError, match=r"SWITCHBOARD_WORKER_THREAD\b"):
        settings_from({"SWITCHBOARD_WORKER_THREAD": "4"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SWITCHBOARD_WORKER_THREADS", "many"),
        ("SWITCHBOARD_WORKER_THREADS", "0"),
        ("SWITCHBOARD_GATEWAY_PORT", "70000"),
        ("SWITCHBOARD_BROKER_CONSUMER", "fast"),
        ("SWITCHBOARD_PROVIDER", "anthropic"),
        ("SWITCHBOARD_BROKER_HEARTBEAT_TIMEOUT_MS", "10"),
        ("SWITCHBOARD_MAX_OUTPUT_TOKENS", "lots"),
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(name: str, value: str) -> None:
    """A value that does not validate is a ConfigError naming its variable."""
    with pytest.raises(ConfigError, match=name):
        settings_from({name: value})


@pytest.mark.parametrize("value", ["0", "5000"])
def test_the_default_output_limit_is_in_the_providers_range(value: str) -> None:
    """A default max_output_tokens outside the provider's 1..4096 is a ConfigError naming it."""
    with pytest.raises(ConfigError, match="SWITCHBOARD_MAX_OUTPUT_TOKENS"):
        settings_from({"SWITCHBOARD_MAX_OUTPUT_TOKENS": value})


def test_a_config_error_is_bad_input() -> None:
    """A ConfigError is a BadInput with its own code."""
    assert issubclass(ConfigError, BadInput)
    assert ConfigError.code == "invalid_configuration"


def test_openai_without_a_key_is_refused() -> None:
    """The openai provider without an API key is a ConfigError."""
    with pytest.raises(ConfigError, match="PROVIDER_API_KEY"):
        settings_from({"SWITCHBOARD_PROVIDER": "openai"})


def test_openai_takes_its_key_and_urls() -> None:
    """Without a SWITCHBOARD_ key the openai provider takes OPENAI_API_KEY and OpenAI's URLs."""
    settings = settings_from({"SWITCHBOARD_PROVIDER": "openai", "OPENAI_API_KEY": "sk-test"})

    assert settings.provider_key == "sk-test"
    assert settings.provider_base_url == "https://api.openai.com/v1"
    assert settings.provider_ws_url == "wss://api.openai.com/v1"


def test_the_switchboard_key_wins_over_openai_api_key() -> None:
    """SWITCHBOARD_PROVIDER_API_KEY wins over OPENAI_API_KEY."""
    settings = settings_from(
        {
            "SWITCHBOARD_PROVIDER": "openai",
            "SWITCHBOARD_PROVIDER_API_KEY": "sk-mine",
            "OPENAI_API_KEY": "sk-other",
        }
    )

    assert settings.provider_key == "sk-mine"


# ── SessionSpec ──────────────────────────────────────────────────────────────────────────


def test_a_valid_session_spec() -> None:
    """A spec with instructions, a registered tool's name and limits validates."""
    spec = SessionSpec.model_validate(
        {
            "instructions": "You are Alex.",
            "tools": ["lookup_order"],
            "limits": {"max_output_tokens": 4096, "max_session_seconds": 600},
        }
    )

    assert spec.instructions == "You are Alex."
    assert spec.tools == ("lookup_order",)
    assert spec.limits.max_output_tokens == 4096


def test_a_spec_may_ask_for_unbounded_output() -> None:
    """A spec's max_output_tokens may be 'inf'."""
    assert SessionSpec.model_validate({"instructions": "Hi", "limits": {"max_output_tokens": "inf"}})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"instructions": ""}, "instructions"),
        ({}, "instructions"),
        ({"instructions": "x" * 32_001}, "instructions"),
        ({"instructions": "Hi", "limits": {"max_output_tokens": 5000}}, "max_output_tokens"),
        ({"instructions": "Hi", "limits": {"max_output_tokens": 0}}, "max_output_tokens"),
        ({"instructions": "Hi", "limits": {"max_session_seconds": 3_601}}, "max_session_seconds"),
        ({"instructions": "Hi", "temperature": 0.7}, "temperature"),
        ({"instructions": "Hi", "tools": ["look up!"]}, "tools"),
        ({"instructions": "Hi", "tools": [""]}, "tools"),
        ({"instructions": "Hi", "tools": ["echo", "echo"]}, "tools"),
    ],
    ids=[
        "empty_instructions",
        "no_instructions",
        "instructions_too_long",
        "output_tokens_5000",
        "output_tokens_0",
        "session_too_long",
        "unknown_field",
        "bad_tool_name",
        "empty_tool_name",
        "non_function_tool",
    ],
)
def test_an_invalid_session_spec_is_refused(body: dict[str, Any], field: str) -> None:
    """An invalid spec is a ValidationError that points at the offending field."""
    with pytest.raises(ValidationError) as raised:
        SessionSpec.model_validate(body)

    assert any(field in map(str, error["loc"]) for error in raised.value.errors())


def test_sentinels_name_the_redis_master_as_a_url_does() -> None:
    """SWITCHBOARD_REDIS_SENTINELS with _SENTINEL_MASTER make the redis+sentinel:// URL every
    Redis client is made from (a port left out is Sentinel's 26379)."""
    settings = settings_from(
        {
            "SWITCHBOARD_REDIS_SENTINELS": "s1:26380, s2 ,[::1]:26381",
            "SWITCHBOARD_REDIS_SENTINEL_MASTER": "sb",
        }
    )
    assert settings.redis_url == "redis+sentinel://s1:26380,s2:26379,[::1]:26381/sb"
    address = parse_redis_address("redis+sentinel://user:p%40ss@s1:26380,s2/sb/2")
    assert (address.sentinels, address.master, address.db) == ((("s1", 26380), ("s2", 26379)), "sb", 2)
    assert (address.username, address.password) == ("user", "p@ss")
    same = settings_from(
        {"SWITCHBOARD_REDIS_URL": settings.redis_url, **_sentinels("s1:26380,s2,[::1]:26381")}
    )
    assert same.redis_url == settings.redis_url


def _sentinels(hosts: str, master: str = "sb") -> dict[str, str]:
    return {"SWITCHBOARD_REDIS_SENTINELS": hosts, "SWITCHBOARD_REDIS_SENTINEL_MASTER": master}


@pytest.mark.parametrize(
    ("environment", "says"),
    [
        ({"SWITCHBOARD_REDIS_SENTINELS": "s1:26379"}, "go together"),
        (_sentinels("s1:port"), "is not HOST:PORT"),
        (_sentinels(" , "), "names no sentinel"),
        (_sentinels("s1", "two words"), "is not a Sentinel master's name"),
        ({**_sentinels("s1"), "SWITCHBOARD_REDIS_URL": "redis://elsewhere:6379"}, "not both"),
        ({"SWITCHBOARD_REDIS_URL": "redis+sentinel://s1:26379"}, "names the master"),
        ({"SWITCHBOARD_REDIS_URL": "redis+sentinel://s1/sb/zero"}, "must be a number"),
        ({"SWITCHBOARD_REDIS_URL": "http://s1"}, "must be a Redis URL"),
    ],
)
def test_a_wrong_redis_address_is_refused_saying_what_is_wrong(
    environment: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        settings_from(environment)
