"""Discord in the platform registry (the ``discord`` entry of
``generic_framework.chat_platforms``). Discord delivers a bot's messages over its gateway,
which ``generic-framework discord`` holds open, so ``serve`` mounts no webhook for it; its
token is registered for redaction wherever its settings are read."""

from __future__ import annotations

from collections.abc import Mapping

from generic_framework.chats.discord.settings import DiscordSettings
from generic_framework.chats.platforms import WebhookFactory

__all__ = ["PLATFORM", "DiscordPlatform"]


class DiscordPlatform:
    """Discord, as :class:`~generic_framework.chats.platforms.ChatPlatform`."""

    name = "discord"

    def webhook(self, environ: Mapping[str, str]) -> WebhookFactory | None:
        """None: the gateway, not a webhook (the settings are checked all the same)."""
        DiscordSettings.from_environment(environ).register_secrets()
        return None


PLATFORM = DiscordPlatform()
"""The registry's entry."""
