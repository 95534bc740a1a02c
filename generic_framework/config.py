"""Settings: constructor arguments first, then environment variables, then defaults.

``.env`` is read only by entry points (the CLI and the service call :func:`load_dotenv`), never on
import, so importing the library never changes behaviour behind a caller's back.

The environment is read here, by :func:`_environment` (names case-insensitive, the ``OPENAI_`` /
``ZAI_`` aliases, blank values passed on as blank): a plain pydantic model over ``os.environ``
instead of pydantic-settings, whose sources (AWS, Azure, GCP, dotenv, secrets...) load eagerly
and cost 35-65 ms and about a megabyte in every process (docs/design/0704).

An invalid value fails with the variable's name and what is allowed, for example
``LLM_TEMPERATURE must be between 0 and 1 (got 2)``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)

from generic_framework.limits import Recency, SearchCount, Temperature, ThinkingMode, ToolRounds
from generic_framework.wire.errors import ConfigError

__all__ = ["CODING_BASE_URL", "DEFAULT_BASE_URL", "Settings", "load_dotenv"]

DEFAULT_BASE_URL = "https://api.z.ai/api/paas/v4"
CODING_BASE_URL = "https://api.z.ai/api/coding/paas/v4"


def load_dotenv(path: str | Path | None = None) -> bool:
    """Load ``.env`` (or ``path``) into the process environment without overriding what is set.

    Called by the CLI and the service entry points only. Returns True when a file was read.
    """
    from dotenv import find_dotenv
    from dotenv import load_dotenv as _load

    target = str(path) if path is not None else find_dotenv(usecwd=True)
    return bool(target) and _load(target, override=False)


class Settings(BaseModel):
    """Every knob of generic_framework, read from arguments or the environment.

    Field names are the lower-case environment variable names (``llm_timeout`` reads
    ``LLM_TIMEOUT``). ``api_key`` and ``base_url`` also accept the Z.AI SDK's names
    ``ZAI_API_KEY`` and ``ZAI_BASE_URL``; as constructor arguments they are ``api_key`` and
    ``base_url``. The field names themselves are not environment names: a generic ``API_KEY`` or
    ``BASE_URL`` in the environment is never mistaken for the Z.AI key or endpoint.
    """

    model_config = ConfigDict(extra="ignore", validate_default=True)

    api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "ZAI_API_KEY")
    )
    base_url: str = Field(
        default=DEFAULT_BASE_URL,
        validation_alias=AliasChoices("OPENAI_BASE_URL", "ZAI_BASE_URL"),
    )
    llm_model: str = "glm-4.7"
    llm_temperature: Temperature | None = None
    llm_thinking: ThinkingMode | None = None
    llm_timeout: float = Field(default=240.0, gt=0)
    llm_connect_timeout: float = Field(default=60.0, gt=0)
    llm_pool_timeout: float = Field(default=60.0, gt=0)
    llm_max_retries: int = Field(default=3, ge=0, le=20)
    llm_retry_deadline: float = Field(default=600.0, gt=0)
    llm_max_connections: int = Field(default=100, ge=1, le=10_000)
    llm_max_concurrency: int = Field(default=100, ge=1, le=10_000)
    max_tool_rounds: ToolRounds = 5
    tool_timeout: float = Field(default=30.0, gt=0)
    web_search_mode: Literal["builtin", "client", "off"] = "builtin"
    web_search_engine: str = "search_pro_jina"
    web_search_count: SearchCount = 5
    web_search_recency: Recency = "noLimit"
    history_turns: int = Field(default=20, ge=0, le=1000)
    personas_dir: Path = Path("./personas")
    data_dir: Path = Path("./data")
    bot_host: str = "127.0.0.1"
    bot_port: int = Field(default=8080, ge=0, le=65535)
    bot_api_token: SecretStr | None = None
    bot_max_body: int = Field(default=65536, ge=1024)
    bot_max_message_chars: int = Field(default=16000, ge=1)
    bot_cors_origins: str = ""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"

    def __init__(self, **values: Any) -> None:
        self._validate(values, _environment(type(self), os.environ))

    def _validate(self, values: dict[str, Any], environment: dict[str, Any]) -> None:
        # Not populate_by_name: with it the field names api_key and base_url would be accepted
        # as data too. The two aliased fields take their field names as arguments here instead.
        for field, env_name in _ENV_NAMES.items():
            if field in values:
                values[env_name] = values.pop(field)
        try:
            super().__init__(**{**environment, **values})  # arguments win over the environment
        except ValidationError as exc:
            raise ConfigError(_explain(exc)) from None

    @classmethod
    def defaults(cls, **values: Any) -> Settings:
        """Settings from ``values`` and the documented defaults only: the environment is not read.

        What library objects use when no settings are given; ``Settings()`` reads the
        environment and is for entry points (the CLI, the service, ``Runtime.from_env()``).
        """
        settings = cls.__new__(cls)
        settings._validate(values, {})
        return settings

    @field_validator("api_key", "bot_api_token", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None
        return value.strip() if isinstance(value, str) else value

    @field_validator("llm_temperature", "llm_thinking", mode="before")
    @classmethod
    def _blank_optional(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @property
    def has_api_key(self) -> bool:
        """True when a non-empty API key is configured."""
        return self.api_key is not None

    @property
    def is_coding_endpoint(self) -> bool:
        """True for the Coding Plan endpoint (``.../api/coding/paas/v4``)."""
        return "/coding/" in self.base_url

    @property
    def database_path(self) -> Path:
        """The SQLite conversation store's file."""
        return self.data_dir / "conversations.sqlite3"


def _environment(model: type[BaseModel], environ: Mapping[str, str]) -> dict[str, Any]:
    """The fields' values found in ``environ``, keyed as the model validates them.

    What pydantic-settings did for these fields: names match case-insensitively; a field with
    aliases (``OPENAI_API_KEY``, ``ZAI_API_KEY``) takes the first alias that is set, and never
    its field name (a generic ``API_KEY`` is not ours); blank values are passed on as they are
    (the validators decide what blank means); a field of a structured type (list, dict, a
    model...) is read as JSON.
    """
    found = {name.lower(): value for name, value in environ.items()}
    values: dict[str, Any] = {}
    for field, info in model.model_fields.items():
        alias = info.validation_alias
        names = alias.choices if isinstance(alias, AliasChoices) else [alias or field]
        for name in names:
            value = found.get(str(name).lower())
            if value is not None:
                values[str(name)] = _decoded(value, info.annotation)
                break
    return values


def _decoded(value: str, annotation: Any) -> Any:
    """``value`` as JSON when the field is structured (pydantic-settings' rule), else as is."""
    kinds = [annotation, *get_args(annotation)]
    structured = any(
        get_origin(kind) in {list, dict, set, tuple, frozenset}
        or (isinstance(kind, type) and issubclass(kind, BaseModel | list | dict | set | tuple))
        for kind in kinds
    )
    if not structured:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # the model's validation names the field and the value


def _range(field: str) -> tuple[object, object] | None:
    """The field's ``ge``/``le`` bounds when it has both (from :mod:`generic_framework.limits`)."""
    info = Settings.model_fields.get(field)
    if info is None:
        return None
    bounds: dict[str, object] = {}
    pending: list[Any] = [info, info.annotation]
    while pending:
        item = pending.pop()
        for constraint in getattr(item, "metadata", ()):
            for name in ("ge", "le"):
                if getattr(constraint, name, None) is not None:
                    bounds[name] = getattr(constraint, name)
        pending.extend(get_args(item))
    return (bounds["ge"], bounds["le"]) if len(bounds) == 2 else None


def _explain(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        field = str(err["loc"][0]).lower() if err["loc"] else "settings"
        field = _FIELD_OF_ALIAS.get(field, field)
        name = _ENV_NAMES.get(field, field.upper())
        ctx = err.get("ctx") or {}
        kind = err["type"]
        bounds = _range(field)
        if kind in {"greater_than_equal", "less_than_equal"} and bounds is not None:
            low, high = bounds
            detail = f"must be between {_number(low)} and {_number(high)}"
        elif kind == "greater_than":
            detail = f"must be greater than {ctx.get('gt')}"
        elif kind == "greater_than_equal":
            detail = f"must be at least {ctx.get('ge')}"
        elif kind == "less_than_equal":
            detail = f"must be at most {ctx.get('le')}"
        elif kind == "literal_error":
            detail = f"must be one of {ctx.get('expected')}"
        else:
            detail = str(err["msg"]).removeprefix("Value error, ")
        got = err.get("input")
        shown = "" if field in {"api_key", "bot_api_token"} else f" (got {got!r})"
        lines.append(f"{name} {detail}{shown}")
    return "; ".join(lines)


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# Errors name the variable a user sets, never the internal field name.
_ENV_NAMES = {"api_key": "OPENAI_API_KEY", "base_url": "OPENAI_BASE_URL"}
_FIELD_OF_ALIAS = {
    "openai_api_key": "api_key",
    "zai_api_key": "api_key",
    "openai_base_url": "base_url",
    "zai_base_url": "base_url",
}
