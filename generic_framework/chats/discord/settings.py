"""The Discord edge's settings (``DISCORD_*``), read by the rules of every platform's
(:mod:`generic_framework.chats.settings`).

- ``DISCORD_BOT_TOKEN``: the bot's token from the developer portal (a secret: never in a log
  line, an error or a trace; it is registered for redaction as soon as it is read).
- ``DISCORD_API_URL``: the REST base, ``https://discord.com/api/v10`` by default; the gateway's
  address comes from its ``GET /gateway/bot`` (so a fake Discord serves both).
- ``DISCORD_ALLOWED_USERS`` / ``DISCORD_ALLOWED_GUILDS`` / ``DISCORD_ALLOWED_CHANNELS``:
  comma-separated ids, or ``*``. Closed by default.
- ``DISCORD_EDIT_INTERVAL``: the least seconds between two edits of a live answer (1.5; Discord
  allows about five edits of a channel's messages in five seconds).
- ``DISCORD_METRICS_PORT``: where the process serves its Prometheus metrics (0: none).
"""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, field_validator

from generic_framework.chats.access import Access, parse_ids
from generic_framework.chats.settings import PlatformSettings
from generic_framework.errors import ConfigError
from generic_framework.limits import BaseURL

__all__ = ["DEFAULT_API_URL", "DiscordSettings"]

DEFAULT_API_URL = "https://discord.com/api/v10"
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{10,100}\.[A-Za-z0-9_-]{4,20}\.[A-Za-z0-9_-]{10,200}$")


class DiscordSettings(PlatformSettings):
    """The ``DISCORD_*`` variables (see the module's docstring)."""

    secret_fields = frozenset({"discord_bot_token"})

    discord_bot_token: SecretStr | None = None
    discord_api_url: BaseURL = DEFAULT_API_URL
    discord_allowed_users: str = ""
    discord_allowed_guilds: str = ""
    discord_allowed_channels: str = ""
    discord_edit_interval: float = Field(default=1.5, ge=0.1, le=60, allow_inf_nan=False)
    discord_metrics_port: int = Field(default=0, ge=0, le=65535)

    @field_validator("discord_bot_token")
    @classmethod
    def _check_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _TOKEN.fullmatch(value.get_secret_value()):
            raise ValueError("must be the bot token of the developer portal (three dotted parts)")
        return value

    @field_validator("discord_allowed_users", "discord_allowed_guilds", "discord_allowed_channels")
    @classmethod
    def _check_ids(cls, value: str) -> str:
        parse_ids(value)
        return value

    @property
    def token(self) -> str:
        """The bot token.

        Raises:
            ConfigError: ``DISCORD_BOT_TOKEN`` is not set.
        """
        if self.discord_bot_token is None:
            raise ConfigError(
                "DISCORD_BOT_TOKEN is not set: create an application with a bot in Discord's "
                "developer portal and set its token"
            )
        return self.discord_bot_token.get_secret_value()

    @property
    def access(self) -> Access:
        """The allowlists: users, channels, guilds."""
        return Access(
            parse_ids(self.discord_allowed_users),
            parse_ids(self.discord_allowed_channels),
            parse_ids(self.discord_allowed_guilds),
        )
