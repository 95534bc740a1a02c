"""Settings: constructor arguments first, then environment variables, then defaults.

``.env`` is read only by entry points (the CLI and the service call :func:`load_dotenv`), never on
import, so importing the library never changes behaviour behind a caller's back.

An invalid value fails with the variable's name and what is allowed, for example
``LLM_TEMPERATURE must be between 0 and 1 (got 2)``; the rules are those of
:mod:`generic_framework.limits`, which every other edge uses too. An empty variable counts as
unset (``PERSONAS_DIR=`` means ``./personas``), as compose files and ``.env.example`` write them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast, get_args
from urllib.parse import unquote, urlsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_core import ErrorDetails

from generic_framework.environment import environment_values
from generic_framework.errors import ConfigError
from generic_framework.limits import (
    BODY_BYTES_DEFAULT,
    BaseURL,
    BindHost,
    BodyBytes,
    HeaderName,
    HostList,
    IPNetwork,
    ModelId,
    Port,
    ReasoningEffort,
    Recency,
    SearchCount,
    SearchPrompt,
    Seconds,
    Temperature,
    ThinkingMode,
    ToolRounds,
    TrustedProxies,
    check_persona_name,
    trusted_proxies,
    wording,
)
from generic_framework.pictures.parts import MAX_IMAGE_BYTES_DEFAULT, MAX_IMAGES_DEFAULT
from generic_framework.redaction import redact_url, register_secret

__all__ = [
    "CODING_BASE_URL",
    "DEFAULT_BASE_URL",
    "DEFAULT_READER_MCP_URL",
    "DEFAULT_SEARCH_MCP_URL",
    "READER_MCP_PATH",
    "SEARCH_MCP_PATH",
    "SearchMode",
    "Settings",
    "environment_values",
    "load_dotenv",
]

DEFAULT_BASE_URL = "https://api.z.ai/api/paas/v4"
CODING_BASE_URL = "https://api.z.ai/api/coding/paas/v4"
SEARCH_MCP_PATH = "/api/mcp/web_search_prime/mcp"
"""Where Z.AI serves its Web Search MCP server, on the origin of the chat endpoints."""
DEFAULT_SEARCH_MCP_URL = "https://api.z.ai" + SEARCH_MCP_PATH
READER_MCP_PATH = "/api/mcp/web_reader/mcp"
"""Where Z.AI serves its Web Reader MCP server (``read_url`` in ``mcp`` mode)."""
DEFAULT_READER_MCP_URL = "https://api.z.ai" + READER_MCP_PATH

SearchMode = Literal["builtin", "client", "mcp", "off"]
"""A web-search mode as it runs; ``auto`` (the setting's default) resolves to one of these."""


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

    # Built on first use: the first Settings made, not the import (docs/design/0704).
    model_config = ConfigDict(extra="ignore", validate_default=True, defer_build=True)

    api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "ZAI_API_KEY")
    )
    base_url: BaseURL = Field(
        default=DEFAULT_BASE_URL,
        validation_alias=AliasChoices("OPENAI_BASE_URL", "ZAI_BASE_URL"),
    )
    llm_model: ModelId = "glm-4.7"
    llm_temperature: Temperature | None = None
    llm_thinking: ThinkingMode | None = None
    llm_reasoning_effort: ReasoningEffort | None = None
    llm_vision_model: ModelId = "glm-4.6v"
    llm_timeout: Seconds = 240.0
    llm_connect_timeout: Seconds = 60.0
    llm_pool_timeout: Seconds = 60.0
    llm_max_retries: int = Field(default=3, ge=0, le=20)
    llm_retry_deadline: Seconds = 600.0
    llm_max_connections: int = Field(default=100, ge=1, le=10_000)
    llm_max_concurrency: int = Field(default=100, ge=1, le=10_000)
    llm_queue_timeout: float = Field(default=120.0, gt=0)
    max_tool_rounds: ToolRounds = 5
    tool_timeout: Seconds = 30.0
    web_search_mode: Literal["auto", "builtin", "client", "mcp", "off"] = "auto"
    web_search_mcp_url: str | None = None
    web_reader_mcp_url: str | None = None
    web_search_engine: str = "search_pro_jina"
    web_search_count: SearchCount = 5
    web_search_recency: Recency = "noLimit"
    web_search_prompt: SearchPrompt | None = None
    history_turns: int = Field(default=20, ge=0, le=1000)
    personas_dir: Path = Path("./personas")
    data_dir: Path = Path("./data")
    database_url: SecretStr | None = None
    database_pool_size: int = Field(default=10, ge=1, le=1000)
    database_pool_timeout: Seconds = 5.0
    bot_host: BindHost = "127.0.0.1"
    bot_port: Port = 8080
    bot_api_token: SecretStr | None = None
    bot_max_body: BodyBytes = BODY_BYTES_DEFAULT
    bot_max_message_chars: int = Field(default=16000, ge=1)
    bot_max_image_bytes: int = Field(default=MAX_IMAGE_BYTES_DEFAULT, ge=1)
    bot_max_images: int = Field(default=MAX_IMAGES_DEFAULT, ge=0, le=50)
    bot_cors_origins: str = ""
    bot_allowed_hosts: HostList = ""
    bot_trusted_proxies: TrustedProxies = ""
    bot_default_persona: str | None = None
    bot_metrics_public: bool = False
    bot_stream_grace: float = Field(default=1.0, ge=0, le=10, allow_inf_nan=False)
    bot_stream_keepalive: float = Field(default=15.0, gt=0, le=300, allow_inf_nan=False)
    bot_sources_footer: bool = True
    bot_drain_delay: float = Field(default=0.0, ge=0, le=600, allow_inf_nan=False)
    bot_shutdown_timeout: float = Field(default=8.0, ge=0, le=3600, allow_inf_nan=False)
    bot_trusted_user_header: HeaderName | None = None
    bot_auto_create_users: bool = False
    bot_default_rpm: int = Field(default=0, ge=0)
    bot_default_daily_tokens: int = Field(default=0, ge=0)
    bot_default_daily_searches: int = Field(default=0, ge=0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    otel_instrumentation_genai_capture_message_content: bool = False

    def __init__(self, **values: Any) -> None:
        self._validate(values, environment_values(type(self), os.environ))

    def _validate(self, values: dict[str, Any], environment: dict[str, Any]) -> None:
        unknown = [name for name in values if name not in _argument_names()]
        if unknown:
            raise ConfigError(_unknown_argument(unknown[0]))
        # Not populate_by_name: with it the field names api_key and base_url would be accepted
        # as data too. The two aliased fields take their field names as arguments here instead.
        for field, env_name in _ENV_NAMES.items():
            if field in values:
                values[env_name] = values.pop(field)
        merged = {**environment, **values}  # arguments win over the environment
        try:
            super().__init__(**merged)
        except ValidationError as exc:
            raise ConfigError(_hide(_explain(exc), _secret_values(merged))) from None

    def register_secrets(self) -> None:
        """Have :func:`~generic_framework.redaction.redact` remove the key, the service token
        and the database password from any text, whatever its shape (``?sk-...`` in a URL).

        Entry points call it (the CLI, ``serve``) once the settings are read; a library object
        built from settings registers nothing behind its caller's back.
        """
        for secret in (self.api_key, self.bot_api_token):
            if secret is not None:
                register_secret(secret.get_secret_value())
        if self.database_url is not None:
            password = urlsplit(self.database_url.get_secret_value()).password
            if password:
                register_secret(password)
                register_secret(unquote(password))

    @classmethod
    def defaults(cls, **values: Any) -> Settings:
        """Settings from ``values`` and the documented defaults only: the environment is not read.

        What library objects use when no settings are given; ``Settings()`` reads the
        environment and is for entry points (the CLI, the service, ``Runtime.from_env()``).
        """
        settings = cls.__new__(cls)
        settings._validate(values, {})
        return settings

    @field_validator("api_key", "bot_api_token", "database_url", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None
        return value.strip() if isinstance(value, str) else value

    @field_validator(
        "llm_temperature",
        "llm_thinking",
        "llm_reasoning_effort",
        "web_search_mcp_url",
        "web_reader_mcp_url",
        "web_search_prompt",
        "bot_default_persona",
        "bot_trusted_user_header",
        mode="before",
    )
    @classmethod
    def _blank_optional(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower_format(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("web_search_mcp_url", "web_reader_mcp_url")
    @classmethod
    def _check_mcp_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @property
    def allowed_hosts(self) -> frozenset[str]:
        """``BOT_ALLOWED_HOSTS`` as a set of lower-case names (``{"*"}`` allows any)."""
        return frozenset(name for name in self.bot_allowed_hosts.split(",") if name)

    @property
    def trusted_proxies(self) -> tuple[IPNetwork, ...]:
        """``BOT_TRUSTED_PROXIES`` as networks (:func:`~generic_framework.limits.
        trusted_proxies`); empty: no proxy is trusted."""
        return trusted_proxies(self.bot_trusted_proxies)

    @property
    def cors_origins(self) -> tuple[str, ...]:
        """``BOT_CORS_ORIGINS`` as a tuple of origins (``("*",)`` allows any)."""
        return tuple(o.strip().rstrip("/") for o in self.bot_cors_origins.split(",") if o.strip())

    @property
    def default_limits(self) -> tuple[int, int, int]:
        """``BOT_DEFAULT_RPM``, ``BOT_DEFAULT_DAILY_TOKENS``, ``BOT_DEFAULT_DAILY_SEARCHES``."""
        return (
            self.bot_default_rpm,
            self.bot_default_daily_tokens,
            self.bot_default_daily_searches,
        )

    @property
    def has_api_key(self) -> bool:
        """True when a non-empty API key is configured."""
        return self.api_key is not None

    @property
    def is_coding_endpoint(self) -> bool:
        """True for a Coding Plan endpoint: ``/api/coding/`` in the base URL's path.

        ``https://api.z.ai/api/coding/paas/v4``, ``https://open.bigmodel.cn/api/coding/paas/v4``
        and the mock's ``http://127.0.0.1:PORT/api/coding/paas/v4`` all are.
        """
        return "/api/coding/" in urlsplit(self.base_url).path + "/"

    @property
    def search_mode(self) -> SearchMode:
        """``WEB_SEARCH_MODE`` as it runs (see :meth:`run_mode`)."""
        return self.run_mode(self.web_search_mode)

    def run_mode(self, mode: str | None) -> SearchMode:
        """The mode that runs for ``mode`` (``None``: ``WEB_SEARCH_MODE``).

        ``auto`` is ``mcp`` on a Coding Plan endpoint, which has been reported to ignore the
        built-in tool and whose keys get 1113 from the REST search (docs/protocol.md §0.4,
        §6b), and ``builtin`` everywhere else.
        """
        chosen = self.web_search_mode if mode is None else mode
        if chosen == "auto":
            return "mcp" if self.is_coding_endpoint else "builtin"
        if chosen not in ("builtin", "client", "mcp", "off"):
            raise ConfigError(f"unknown web search mode {chosen!r}")
        return cast(SearchMode, chosen)

    @property
    def search_mcp_url(self) -> str:
        """The Web Search MCP server: ``WEB_SEARCH_MCP_URL``, else the chat endpoint's origin
        with Z.AI's path when the base URL has Z.AI's layout (``{origin}/api/...``: Z.AI,
        BigModel, the mock), else Z.AI's own server."""
        if self.web_search_mcp_url:
            return self.web_search_mcp_url
        parts = urlsplit(self.base_url)
        if parts.path.startswith("/api/"):
            return f"{parts.scheme}://{parts.netloc}{SEARCH_MCP_PATH}"
        return DEFAULT_SEARCH_MCP_URL

    @property
    def reader_mcp_url(self) -> str:
        """The Web Reader MCP server (``read_url`` in ``mcp`` mode): ``WEB_READER_MCP_URL``,
        else found the way :attr:`search_mcp_url` is, with the reader's path."""
        if self.web_reader_mcp_url:
            return self.web_reader_mcp_url
        parts = urlsplit(self.base_url)
        if parts.path.startswith("/api/"):
            return f"{parts.scheme}://{parts.netloc}{READER_MCP_PATH}"
        return DEFAULT_READER_MCP_URL

    def describe_search(self) -> str:
        """One line saying how ``//`` messages search, for the start-up log and ``personas``."""
        mode = self.search_mode
        api, mcp = redact_url(self.base_url), redact_url(self.search_mcp_url)
        where = {
            "builtin": "Z.AI's built-in web_search tool, run server-side",
            "client": f"search_web through the Web Search API ({api}/web_search)",
            "mcp": f"search_web through the Web Search MCP server ({mcp})",
            "off": "no web search (only the personas' own tools)",
        }[mode]
        if self.web_search_mode == "auto":
            coding = self.is_coding_endpoint
            endpoint = "a Coding Plan endpoint" if coding else "the general endpoint"
            return f"web search: WEB_SEARCH_MODE=auto -> {mode} ({endpoint}): {where}"
        return f"web search: WEB_SEARCH_MODE={mode}: {where}"

    @field_validator("bot_default_persona")
    @classmethod
    def _check_persona(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_persona_name(value.strip())
        except ValueError as exc:
            raise ValueError(f"must name a persona: {exc}") from None

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        scheme = value.get_secret_value().partition("://")[0].lower()
        if scheme not in _DATABASE_SCHEMES:
            # The value itself is never repeated: it may carry a password.
            raise ValueError(
                "must start with postgresql:// (or postgres://), or be left empty for SQLite "
                "in DATA_DIR"
            )
        return value

    @property
    def database_path(self) -> Path:
        """The SQLite conversation store's file (used when ``DATABASE_URL`` is not set)."""
        return self.data_dir / "conversations.sqlite3"

    @property
    def uses_postgres(self) -> bool:
        """True when ``DATABASE_URL`` selects PostgreSQL."""
        return self.database_url is not None


def _argument_names() -> frozenset[str]:
    """The keyword arguments Settings takes: its fields, and the aliased variables' names."""
    names = set(Settings.model_fields)
    for info in Settings.model_fields.values():
        if isinstance(info.validation_alias, AliasChoices):
            names.update(str(choice) for choice in info.validation_alias.choices)
    return frozenset(names)


def _unknown_argument(name: str) -> str:
    """A keyword that names no setting (extra="ignore" is there for the environment's unrelated
    variables, which never reach the arguments), with the setting it most likely meant."""
    import difflib

    # The model's own settings first: Settings(timeout=...) most likely means llm_timeout.
    fields = sorted(Settings.model_fields, key=lambda field: (not field.startswith("llm_"), field))
    close = [f for f in fields if f.endswith(f"_{name.lower()}")] or difflib.get_close_matches(
        name.lower(), fields, n=1, cutoff=0.6
    )
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"Settings() got an unknown setting {name!r}{hint}"


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
        got = err.get("input")
        if field in _URL_FIELDS and isinstance(got, str):
            got = redact_url(got)  # a key put in its query, fragment or user information
        shown = "" if field in _SECRET_FIELDS else f" (got {got!r})"
        lines.append(f"{name} {_detail(field, err)}{shown}")
    return "; ".join(lines)


def _secret_values(values: Mapping[str, Any]) -> list[str]:
    """The secrets among the values being validated (the key, the token, the database URL)."""
    names = {"openai_api_key", "zai_api_key", "api_key", "bot_api_token", "database_url"}
    found = []
    for name, value in values.items():
        if name.lower() in names and isinstance(value, str | SecretStr):
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            found.append(text.strip())
    return found


def _hide(text: str, secrets: list[str]) -> str:
    """``text`` without any of ``secrets`` (the configured key quoted in another setting)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def _detail(field: str, err: ErrorDetails) -> str:
    """What is wrong with ``field``: its range when it has one, else the rule's words."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    bounds = _range(field)
    if kind in {"greater_than_equal", "less_than_equal"} and bounds is not None:
        low, high = bounds
        return f"must be between {_number(low)} and {_number(high)}"
    bound_words = {
        "greater_than": ("must be greater than", "gt"),
        "greater_than_equal": ("must be at least", "ge"),
        "less_than_equal": ("must be at most", "le"),
    }
    if kind in bound_words:
        words, key = bound_words[kind]
        return f"{words} {_number(ctx.get(key))}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    return wording(err)


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


_DATABASE_SCHEMES = frozenset({"postgresql", "postgres"})
# Never echoed in an error message: they hold keys, tokens or passwords.
_SECRET_FIELDS = frozenset({"api_key", "bot_api_token", "database_url"})
# Shown through redact_url: their query, fragment and user information may hold a key.
_URL_FIELDS = frozenset({"base_url", "web_search_mcp_url"})
# Errors name the variable a user sets, never the internal field name.
_ENV_NAMES = {"api_key": "OPENAI_API_KEY", "base_url": "OPENAI_BASE_URL"}
_FIELD_OF_ALIAS = {
    "openai_api_key": "api_key",
    "zai_api_key": "api_key",
    "openai_base_url": "base_url",
    "zai_base_url": "base_url",
}
