"""Telegram in the platform registry (the ``telegram`` entry of
``generic_framework.chat_platforms``): its webhook for ``serve``, built only when
``TELEGRAM_WEBHOOK_URL`` and ``TELEGRAM_WEBHOOK_SECRET`` are set (python-telegram-bot is imported
then, not before)."""

from __future__ import annotations

from collections.abc import Mapping

from generic_framework.chats.platforms import Webhook, WebhookFactory
from generic_framework.chats.telegram.settings import TelegramSettings
from generic_framework.runtime import Runtime

__all__ = ["PLATFORM", "TelegramPlatform"]


class TelegramPlatform:
    """Telegram, as :class:`~generic_framework.chats.platforms.ChatPlatform`."""

    name = "telegram"

    def webhook(self, environ: Mapping[str, str]) -> WebhookFactory | None:
        """The webhook's factory when ``TELEGRAM_WEBHOOK_*`` are set."""
        settings = TelegramSettings.from_environment(environ)
        settings.register_secrets()
        if not settings.webhook:
            return None

        def build(runtime: Runtime, offline: bool) -> Webhook:
            from generic_framework.chats.telegram.webhook import TelegramWebhook

            return TelegramWebhook(runtime, settings, offline=offline)

        return build


PLATFORM = TelegramPlatform()
"""The registry's entry."""
