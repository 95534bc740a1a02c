"""Settings: defaults, environment names and aliases, precedence, validation, secrecy."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from generic_framework.config import CODING_BASE_URL, DEFAULT_BASE_URL, Settings, load_dotenv
from generic_framework.errors import ConfigError

# Every variable of the public environment table with its documented default.
DEFAULTS: list[tuple[str, str, Any]] = [
    ("OPENAI_API_KEY", "api_key", None),
    ("OPENAI_BASE_URL", "base_url", "https://api.z.ai/api/paas/v4"),
    ("LLM_MODEL", "llm_model", "glm-4.7"),
    ("LLM_TEMPERATURE", "llm_temperature", None),
    ("LLM_THINKING", "llm_thinking", None),
    ("LLM_TIMEOUT", "llm_timeout", 240.0),
    ("LLM_CONNECT_TIMEOUT", "llm_connect_timeout", 60.0),
    ("LLM_POOL_TIMEOUT", "llm_pool_timeout", 60.0),
    ("LLM_MAX_RETRIES", "llm_max_retries", 3),
    ("MAX_TOOL_ROUNDS", "max_tool_rounds", 5),
    ("TOOL_TIMEOUT", "tool_timeout", 30.0),
    ("WEB_SEARCH_MODE", "web_search_mode", "auto"),
    ("WEB_SEARCH_ENGINE", "web_search_engine", "search_pro_jina"),
    ("WEB_SEARCH_COUNT", "web_search_count", 5),
    ("WEB_SEARCH_RECENCY", "web_search_recency", "noLimit"),
    ("PERSONAS_DIR", "personas_dir", Path("./personas")),
    ("DATA_DIR", "data_dir", Path("./data")),
    ("BOT_HOST", "bot_host", "127.0.0.1"),
    ("BOT_PORT", "bot_port", 8080),
    ("BOT_API_TOKEN", "bot_api_token", None),
    ("LOG_LEVEL", "log_level", "INFO"),
]

# A value for each variable that differs from its default, and what the field then holds.
OVERRIDES: list[tuple[str, str, str, Any]] = [
    (
        "OPENAI_BASE_URL",
        "base_url",
        "http://127.0.0.1:9/api/paas/v4/",
        "http://127.0.0.1:9/api/paas/v4",
    ),
    ("LLM_MODEL", "llm_model", "glm-4.5-air", "glm-4.5-air"),
    ("LLM_TEMPERATURE", "llm_temperature", "0.3", 0.3),
    ("LLM_THINKING", "llm_thinking", "disabled", "disabled"),
    ("LLM_TIMEOUT", "llm_timeout", "12.5", 12.5),
    ("LLM_CONNECT_TIMEOUT", "llm_connect_timeout", "4", 4.0),
    ("LLM_POOL_TIMEOUT", "llm_pool_timeout", "6", 6.0),
    ("LLM_MAX_RETRIES", "llm_max_retries", "0", 0),
    ("MAX_TOOL_ROUNDS", "max_tool_rounds", "2", 2),
    ("TOOL_TIMEOUT", "tool_timeout", "1.5", 1.5),
    ("WEB_SEARCH_MODE", "web_search_mode", "client", "client"),
    ("WEB_SEARCH_ENGINE", "web_search_engine", "search_std", "search_std"),
    ("WEB_SEARCH_COUNT", "web_search_count", "12", 12),
    ("WEB_SEARCH_RECENCY", "web_search_recency", "oneWeek", "oneWeek"),
    ("PERSONAS_DIR", "personas_dir", "/srv/personas", Path("/srv/personas")),
    ("DATA_DIR", "data_dir", "/srv/data", Path("/srv/data")),
    ("BOT_HOST", "bot_host", "0.0.0.0", "0.0.0.0"),
    ("BOT_PORT", "bot_port", "9090", 9090),
    ("LOG_LEVEL", "log_level", "debug", "DEBUG"),
]

# Settings() reads the environment: these tests start from one without any setting.
pytestmark = pytest.mark.usefixtures("clean_environment")


@pytest.mark.parametrize(("env", "field", "default"), DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_default(env: str, field: str, default: Any) -> None:
    assert getattr(Settings(), field) == default


def test_default_base_url_constants() -> None:
    assert Settings().base_url == DEFAULT_BASE_URL
    assert CODING_BASE_URL.endswith("/api/coding/paas/v4")


@pytest.mark.parametrize(
    ("env", "field", "raw", "expected"), OVERRIDES, ids=[o[0] for o in OVERRIDES]
)
def test_environment_variable_is_read(
    monkeypatch: pytest.MonkeyPatch, env: str, field: str, raw: str, expected: Any
) -> None:
    monkeypatch.setenv(env, raw)

    assert getattr(Settings(), field) == expected


def test_environment_names_are_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("llm_model", "glm-4.6")

    assert Settings().llm_model == "glm-4.6"


@pytest.mark.parametrize(
    ("env", "value"), [("OPENAI_API_KEY", "k-openai"), ("ZAI_API_KEY", "k-zai")]
)
def test_api_key_names(monkeypatch: pytest.MonkeyPatch, env: str, value: str) -> None:
    monkeypatch.setenv(env, value)
    settings = Settings()

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == value
    assert settings.has_api_key


def test_zai_base_url_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZAI_BASE_URL", CODING_BASE_URL)
    settings = Settings()

    assert settings.base_url == CODING_BASE_URL
    assert settings.is_coding_endpoint


def test_openai_names_win_over_zai_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k-openai")
    monkeypatch.setenv("ZAI_API_KEY", "k-zai")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://first.test")
    monkeypatch.setenv("ZAI_BASE_URL", "http://second.test")
    settings = Settings()

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "k-openai"
    assert settings.base_url == "http://first.test"


def test_generic_api_key_and_base_url_variables_are_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Many machines set these for unrelated services; they must never reach Z.AI.
    monkeypatch.setenv("API_KEY", "someone-elses-key")
    monkeypatch.setenv("BASE_URL", "http://unrelated.test")
    settings = Settings()

    assert settings.api_key is None
    assert settings.base_url == DEFAULT_BASE_URL


def test_constructor_arguments_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    monkeypatch.setenv("ZAI_BASE_URL", "http://env.test")
    monkeypatch.setenv("LLM_MODEL", "glm-4.6")
    monkeypatch.setenv("LLM_MAX_RETRIES", "7")

    settings = Settings(
        api_key="from-args", base_url="http://args.test", llm_model="glm-5", llm_max_retries=1
    )

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "from-args"
    assert settings.base_url == "http://args.test"
    assert (settings.llm_model, settings.llm_max_retries) == ("glm-5", 1)


@pytest.mark.parametrize("source", ["env", "argument"])
@pytest.mark.parametrize("value", ["2", "-0.1", "1.01"])
def test_temperature_out_of_range_names_the_variable_and_range(
    monkeypatch: pytest.MonkeyPatch, source: str, value: str
) -> None:
    if source == "env":
        monkeypatch.setenv("LLM_TEMPERATURE", value)
    kwargs = {"llm_temperature": float(value)} if source == "argument" else {}

    with pytest.raises(ConfigError, match="LLM_TEMPERATURE must be between 0 and 1"):
        Settings(**kwargs)


@pytest.mark.parametrize("value", ["0", "1", "0.7", ""])
def test_temperature_in_range_or_blank(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("LLM_TEMPERATURE", value)

    assert Settings().llm_temperature == (float(value) if value else None)


@pytest.mark.parametrize(
    ("env", "value", "expected"),
    [
        ("WEB_SEARCH_MODE", "sometimes", "WEB_SEARCH_MODE must be one of"),
        ("LLM_THINKING", "maybe", "LLM_THINKING must be one of"),
        ("LLM_TIMEOUT", "0", "LLM_TIMEOUT must be greater than 0"),
        ("LLM_MAX_RETRIES", "50", "LLM_MAX_RETRIES must be between 0 and 20"),
        ("WEB_SEARCH_COUNT", "0", "WEB_SEARCH_COUNT must be between 1 and 50"),
        ("BOT_PORT", "70000", "BOT_PORT must be between 0 and 65535"),
        ("OPENAI_BASE_URL", "api.z.ai/api/paas/v4", "OPENAI_BASE_URL must start with http"),
        ("ZAI_BASE_URL", "ftp://api.z.ai", "OPENAI_BASE_URL must start with http"),
        ("LLM_MODEL", " ", "LLM_MODEL must be 1-128 printable ASCII characters"),
    ],
)
def test_invalid_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(env, value)

    with pytest.raises(ConfigError) as caught:
        Settings()

    assert expected in str(caught.value)
    assert repr(value) in str(caught.value)


def test_blank_key_means_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "   ")

    assert Settings().api_key is None
    assert not Settings().has_api_key


def test_derived_paths_and_endpoint_kind() -> None:
    settings = Settings(data_dir=Path("/var/lib/gf"), base_url=CODING_BASE_URL + "/")

    assert settings.database_path == Path("/var/lib/gf/conversations.sqlite3")
    assert settings.base_url == CODING_BASE_URL
    assert settings.is_coding_endpoint
    assert not Settings().is_coding_endpoint


def test_key_and_token_never_print(
    fake_key: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("BOT_API_TOKEN", "bot-token-abcdef123456")
    settings = Settings(api_key=fake_key)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("test.settings").debug("settings: %s %r", settings, settings)

    texts = [
        str(settings),
        repr(settings),
        settings.model_dump_json(),
        str(settings.model_dump()),
        caplog.text,
    ]
    for text in texts:
        assert fake_key not in text
        assert "bot-token-abcdef123456" not in text


def test_validation_error_does_not_echo_the_key(fake_key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings(api_key=fake_key, llm_temperature=3)

    assert fake_key not in str(caught.value)
    assert fake_key not in repr(caught.value)
    assert caught.value.__cause__ is None


def test_dotenv_is_read_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("LLM_MODEL=glm-from-dotenv\n")
    monkeypatch.chdir(tmp_path)

    assert Settings().llm_model == "glm-4.7"  # importing or constructing never reads .env
    try:
        assert load_dotenv(tmp_path / ".env") is True
        assert Settings().llm_model == "glm-from-dotenv"
    finally:
        os.environ.pop("LLM_MODEL", None)


def test_dotenv_never_overrides_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("LLM_MODEL=glm-from-dotenv\n")
    monkeypatch.setenv("LLM_MODEL", "glm-from-env")

    load_dotenv(tmp_path / ".env")

    assert Settings().llm_model == "glm-from-env"


def test_missing_dotenv_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)

    assert load_dotenv(tmp_path / "absent.env") is False


def test_defaults_ignore_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-the-environment")
    monkeypatch.setenv("LLM_MODEL", "glm-env")
    monkeypatch.setenv("MAX_TOOL_ROUNDS", "9")
    defaults = Settings.defaults(max_tool_rounds=2)
    assert defaults.api_key is None and defaults.llm_model == "glm-4.7"
    assert defaults.max_tool_rounds == 2
    assert isinstance(defaults, Settings)
    assert Settings().llm_model == "glm-env"


def test_constructing_settings_registers_no_secret() -> None:
    from generic_framework import redaction

    Settings.defaults(api_key="sk-settings-only-0123456789")
    assert "sk-settings-only-0123456789" not in redaction._KNOWN_SECRETS


@pytest.mark.parametrize(
    ("env", "value", "line"),
    [
        ("LLM_TEMPERATURE", "abc", "LLM_TEMPERATURE must be a number (got 'abc')"),
        ("LLM_TEMPERATURE", "nan", "LLM_TEMPERATURE must be a finite number (got 'nan')"),
        ("LLM_TIMEOUT", "inf", "LLM_TIMEOUT must be a finite number (got 'inf')"),
        ("LLM_TIMEOUT", "nan", "LLM_TIMEOUT must be a finite number (got 'nan')"),
        ("LLM_RETRY_DEADLINE", "-inf", "LLM_RETRY_DEADLINE must be a finite number (got '-inf')"),
        ("TOOL_TIMEOUT", "1e9", "TOOL_TIMEOUT must be at most 86400 (got '1e9')"),
        ("LLM_MAX_RETRIES", "2.5", "LLM_MAX_RETRIES must be a whole number (got '2.5')"),
        ("LLM_MODEL", "glm 4.7", "LLM_MODEL must be 1-128 printable ASCII characters"),
        ("BOT_HOST", "[::1", "BOT_HOST is neither an IP address nor a host name"),
        (
            "OPENAI_BASE_URL",
            "http://127.0.0.1:99999/v4",
            "OPENAI_BASE_URL is not a valid URL (Port out of range 0-65535)",
        ),
    ],
)
def test_invalid_values_read_as_one_rule(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, line: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as caught:
        Settings()
    assert str(caught.value).startswith(line)
    assert "Input should" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:9/v4?key=0badc0de0badc0de", "'http://127.0.0.1:9/v4?***'"),
        ("http://127.0.0.1:9/v4?sk-0badc0de0badc0de", "'http://127.0.0.1:9/v4?***'"),
        ("http://127.0.0.1:9/v4#key=0badc0de0badc0de", "'http://127.0.0.1:9/v4#***'"),
        ("http://127.0.0.1:9/v4#0badc0de0badc0de", "'http://127.0.0.1:9/v4#***'"),
        ("https://user:hunter2-secret@api.z.ai/v4", "'https://user:***@api.z.ai/v4'"),
        ("https://0badc0de0badc0de@api.z.ai/v4?a=1", "'https://***@api.z.ai/v4?***'"),
    ],
)
def test_a_base_url_with_credentials_is_refused_and_redacted(
    monkeypatch: pytest.MonkeyPatch, url: str, shown: str
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    with pytest.raises(ConfigError) as caught:
        Settings()
    message = str(caught.value)
    assert message.endswith(f"put the key in OPENAI_API_KEY (got {shown})")
    assert "0badc0de0badc0de" not in message and "hunter2" not in message


@pytest.mark.parametrize(
    "env", ["PERSONAS_DIR", "DATA_DIR", "BOT_PORT", "LLM_TIMEOUT", "LLM_MODEL"]
)
def test_an_empty_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch, env: str) -> None:
    monkeypatch.setenv(env, "")
    assert Settings().model_dump() == Settings.defaults().model_dump()


def test_a_bracketed_ipv6_bot_host_is_an_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_HOST", "[::1]")
    assert Settings().bot_host == "::1"


@pytest.mark.parametrize(
    ("argument", "meant"),
    [("model", "llm_model"), ("temperature", "llm_temperature"), ("llm_modle", "llm_model")],
)
def test_an_unknown_keyword_is_an_error_naming_it_and_the_setting_meant(
    argument: str, meant: str
) -> None:
    for make in (Settings, Settings.defaults):
        with pytest.raises(ConfigError) as caught:
            make(**{argument: "glm-5.3"})
        assert str(caught.value) == (
            f"Settings() got an unknown setting {argument!r}; did you mean {meant!r}?"
        )


def test_unrelated_environment_variables_stay_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL", "glm-5.3")
    monkeypatch.setenv("SOME_OTHER_TOOL_SETTING", "x")
    assert Settings().llm_model == "glm-4.7"
    assert Settings(llm_model="glm-5.1", OPENAI_API_KEY="k").llm_model == "glm-5.1"
