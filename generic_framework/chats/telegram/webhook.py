"""Telegram's webhook in ``serve``: replicas receive the updates instead of a polling process.

With ``TELEGRAM_WEBHOOK_URL`` and ``TELEGRAM_WEBHOOK_SECRET`` set, ``serve`` adds
``POST /telegram/webhook`` (or the URL's own path) and, at start, registers the webhook
(``setWebhook`` with the secret and the update types the bot handles; every replica sends the
same registration, which Telegram takes as one). A request is accepted only with the secret in
``X-Telegram-Bot-Api-Secret-Token`` (compared in constant time: 401 without it, 403 with
another, and nothing is processed); the route is not behind the API's bearer auth (the secret
is its auth) nor the Host allowlist (Telegram names the public host).

The answer is 200 at once and the update is processed in the background: Telegram waits for
no turn, and redelivers an update it got no answer for in time. A redelivered update may
reach another replica: each ``update_id`` is claimed in the store first
(:meth:`~generic_framework.store.chats.ChatStore.claim_update`), so it is answered once. At
shutdown the updates under way finish (``BOT_SHUTDOWN_TIMEOUT``), as turns do.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from telegram import Update

from generic_framework.chats.telegram.bot import ALLOWED_UPDATES, TelegramBot
from generic_framework.chats.telegram.settings import TelegramSettings
from generic_framework.errors import ConfigError
from generic_framework.redaction import redact_url
from generic_framework.runtime import Runtime

__all__ = ["SECRET_HEADER", "TelegramWebhook"]

logger = logging.getLogger("generic_framework.telegram")

SECRET_HEADER = "x-telegram-bot-api-secret-token"  # noqa: S105  # a header name


def _refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


class TelegramWebhook:
    """The webhook receiver of one ``serve`` replica (see the module's docstring).

    Args:
        runtime: the service's runtime (personas, store, locks).
        settings: the ``TELEGRAM_*`` settings, with the webhook's URL and secret.
        offline: answers come from the embedded mock.
    """

    def __init__(self, runtime: Runtime, settings: TelegramSettings, *, offline: bool) -> None:
        if not settings.webhook:
            raise ConfigError("TELEGRAM_WEBHOOK_URL and TELEGRAM_WEBHOOK_SECRET are both needed")
        self.settings = settings
        self.path = settings.webhook_path
        self._secret = settings.webhook_secret.encode()
        self.bot = TelegramBot(runtime, settings, polling=False, offline=offline)

    async def start(self) -> None:
        """Start the bot and register the webhook (``setWebhook``)."""
        await self.bot.start()
        api = self.bot.application.bot
        url = self.settings.telegram_webhook_url or ""
        assert self.bot.handlers is not None
        await self.bot.handlers.delivery.send(
            "setWebhook",
            lambda: api.set_webhook(
                url,
                secret_token=self.settings.webhook_secret,
                allowed_updates=ALLOWED_UPDATES,
            ),
        )
        logger.info("Telegram webhook registered: %s", redact_url(url))

    async def stop(self, grace: float) -> None:
        """Finish the updates under way (at most ``grace`` seconds), then stop the bot."""
        await self.bot.stop(grace)

    async def endpoint(self, request: Request) -> Response:
        """``POST`` of one update by Telegram."""
        presented = request.headers.get(SECRET_HEADER)
        if presented is None:
            return _refuse(401, "the webhook secret is missing")
        if not hmac.compare_digest(presented.encode(), self._secret):
            return _refuse(403, "the webhook secret is wrong")
        try:
            data: Any = json.loads(await request.body())
            update = Update.de_json(data, self.bot.application.bot) if data else None
        except (ValueError, TypeError, KeyError, AttributeError):
            update = None
        if not isinstance(update, Update):
            return _refuse(400, "the body is not a Telegram update")
        await self.bot.feed(update)
        return Response(status_code=200)
