"""The Telegram edge's settings, read from the environment by the rules of ``Settings``.

A model of its own beside :class:`~generic_framework.config.Settings` (which every program
reads, and which stays about the library): ``generic-framework telegram`` and ``serve`` (for
its webhook) read it where they read their settings, after ``.env``
(docs/design/0307). The environment is read the same way: names match case-insensitively, an
empty variable counts as unset, an invalid value is a :class:`ConfigError` naming the variable.

- ``TELEGRAM_BOT_TOKEN``: the token BotFather gave (a secret: it is never shown; every Bot API
  URL carries it, so :meth:`TelegramSettings.register_secrets` has it redacted from any text).
- ``TELEGRAM_API_URL``: the Bot API's base, ``https://api.telegram.org`` by default; requests
  go to ``{TELEGRAM_API_URL}/bot{token}/{method}`` (a self-hosted Bot API server, or a fake).
- ``TELEGRAM_ALLOWED_USERS`` / ``TELEGRAM_ALLOWED_CHATS``: comma-separated numeric ids, or
  ``*``. Closed by default: anyone can find a bot and spend its owner's credit.
- ``TELEGRAM_WEBHOOK_URL`` and ``TELEGRAM_WEBHOOK_SECRET``: both set, ``serve`` receives the
  updates (for replicas) instead of a polling process.
- ``TELEGRAM_EDIT_INTERVAL``: the least seconds between two edits of a live answer (1.5).
- ``TELEGRAM_METRICS_PORT``: where the polling process serves its Prometheus metrics
  (``GET /metrics`` on ``BOT_HOST``); 0, the default, serves none. A polling process has no HTTP
  server of its own, and in webhook mode ``serve``'s ``/metrics`` has the same counters.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from generic_framework.chats.access import ANYONE, parse_ids
from generic_framework.chats.settings import PlatformSettings
from generic_framework.errors import ConfigError
from generic_framework.limits import BaseURL

__all__ = ["ANYONE", "DEFAULT_API_URL", "WEBHOOK_PATH", "TelegramSettings", "parse_ids"]

DEFAULT_API_URL = "https://api.telegram.org"
WEBHOOK_PATH = "/telegram/webhook"
"""Where ``serve`` receives updates when ``TELEGRAM_WEBHOOK_URL`` has no path of its own."""

_TOKEN = re.compile(r"^[0-9]{1,20}:[A-Za-z0-9_-]{10,200}$")
_SECRET = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # what setWebhook's secret_token allows


class TelegramSettings(PlatformSettings):
    """The ``TELEGRAM_*`` variables (see the module's docstring)."""

    secret_fields = frozenset({"telegram_bot_token", "telegram_webhook_secret"})

    telegram_bot_token: SecretStr | None = None
    telegram_api_url: BaseURL = DEFAULT_API_URL
    telegram_allowed_users: str = ""
    telegram_allowed_chats: str = ""
    telegram_webhook_url: str | None = None
    telegram_webhook_secret: SecretStr | None = None
    telegram_edit_interval: float = Field(default=1.5, ge=0.1, le=60, allow_inf_nan=False)
    telegram_metrics_port: int = Field(default=0, ge=0, le=65535)

    @field_validator("telegram_bot_token")
    @classmethod
    def _check_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _TOKEN.fullmatch(value.get_secret_value()):
            raise ValueError("must be the token BotFather gave (digits, ':', then the secret)")
        return value

    @field_validator("telegram_webhook_secret")
    @classmethod
    def _check_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _SECRET.fullmatch(value.get_secret_value()):
            raise ValueError("must be 1-256 letters, digits, '_' or '-' (what Telegram allows)")
        return value

    @field_validator("telegram_allowed_users", "telegram_allowed_chats")
    @classmethod
    def _check_ids(cls, value: str) -> str:
        parse_ids(value)
        return value

    @field_validator("telegram_webhook_url", mode="before")
    @classmethod
    def _check_webhook_url(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip() or None
        if isinstance(value, str):
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("must be an https:// address Telegram can reach")
        return value

    @property
    def token(self) -> str:
        """The bot token.

        Raises:
            ConfigError: ``TELEGRAM_BOT_TOKEN`` is not set.
        """
        if self.telegram_bot_token is None:
            raise ConfigError(
                "TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather in Telegram and "
                "set its token"
            )
        return self.telegram_bot_token.get_secret_value()

    @property
    def allowed_users(self) -> frozenset[int] | None:
        """``TELEGRAM_ALLOWED_USERS`` (``None``: anyone)."""
        return parse_ids(self.telegram_allowed_users)

    @property
    def allowed_chats(self) -> frozenset[int] | None:
        """``TELEGRAM_ALLOWED_CHATS`` (``None``: any chat)."""
        return parse_ids(self.telegram_allowed_chats)

    @property
    def webhook(self) -> bool:
        """True when ``TELEGRAM_WEBHOOK_URL`` and ``TELEGRAM_WEBHOOK_SECRET`` are both set.

        Raises:
            ConfigError: only one of them is set, or the token is missing.
        """
        url, secret = self.telegram_webhook_url, self.telegram_webhook_secret
        if (url is None) != (secret is None):
            raise ConfigError(
                "TELEGRAM_WEBHOOK_URL and TELEGRAM_WEBHOOK_SECRET go together: set both (serve "
                "then receives the bot's updates) or neither"
            )
        if url is not None:
            self.token  # noqa: B018  # a webhook without a token is a configuration error
        return url is not None

    @property
    def webhook_secret(self) -> str:
        """``TELEGRAM_WEBHOOK_SECRET`` (``""`` when unset)."""
        secret = self.telegram_webhook_secret
        return secret.get_secret_value() if secret is not None else ""

    @property
    def webhook_path(self) -> str:
        """The path ``serve`` receives updates at: the webhook URL's own, else
        :data:`WEBHOOK_PATH`."""
        path = urlsplit(self.telegram_webhook_url or "").path
        return path if path not in ("", "/") else WEBHOOK_PATH

    @property
    def base_url(self) -> str:
        """What the Bot API calls are made under, without the token: ``{api}/bot``."""
        return self.telegram_api_url.rstrip("/") + "/bot"
