"""Long polling: ``generic-framework telegram`` runs the bot until it is stopped.

One process polls ``getUpdates``; a second one polling the same bot gets Telegram's 409
Conflict ("terminated by other getUpdates request"): :func:`poll` then says so in one line
and returns :data:`CONFLICT`, and the command exits non-zero, instead of python-telegram-bot's
default of retrying for ever. python-telegram-bot deletes a bot's webhook before it polls;
a bot whose webhook is set (replicas of ``serve`` receive its updates) is not polled at all
(:data:`WEBHOOK_SET`), so a stray polling process cannot take the updates away from them.
SIGTERM and SIGINT stop it: polling stops, the updates under way finish
(``BOT_SHUTDOWN_TIMEOUT``), the Application shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from telegram.error import Conflict, InvalidToken, TelegramError

from generic_framework.chats.telegram.bot import ALLOWED_UPDATES, TelegramBot
from generic_framework.redaction import redact

__all__ = ["CONFLICT", "STOPPED", "WEBHOOK_SET", "poll"]

logger = logging.getLogger("generic_framework.telegram")

STOPPED = "stopped"
"""Stopped by a signal."""
CONFLICT = (
    "another process receives this bot's updates (Telegram answered 409 Conflict: a second "
    "'generic-framework telegram'); stopping"
)
WEBHOOK_SET = (
    "this bot has a webhook (serve receives its updates with TELEGRAM_WEBHOOK_URL); polling "
    "would take it away from serve, so not polling: unset the webhook first (deleteWebhook)"
)


class _ConflictSaidOnce(logging.Filter):
    """Drops python-telegram-bot's own records of a 409 (a traceback when polling stops):
    :func:`poll` says it in one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a record whose exception is a ``Conflict``."""
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, Conflict)


def _quiet_conflicts() -> None:
    log = logging.getLogger("telegram.ext.Updater")
    if not any(isinstance(f, _ConflictSaidOnce) for f in log.filters):
        log.addFilter(_ConflictSaidOnce())


async def poll(bot: TelegramBot, stop: asyncio.Event | None = None) -> str:
    """Poll until ``stop`` is set, a signal arrives, or Telegram reports a conflict.

    Returns:
        :data:`STOPPED`, :data:`CONFLICT` or :data:`WEBHOOK_SET`.

    Raises:
        TelegramError: the token was refused, or the Bot API could not be reached at start.
    """
    stop = stop or asyncio.Event()
    conflict = asyncio.Event()

    def on_error(exc: TelegramError) -> None:
        if isinstance(exc, Conflict):
            conflict.set()
            stop.set()
        elif not isinstance(exc, InvalidToken):
            logger.warning(
                "polling failed (%s: %s); retrying", type(exc).__name__, redact(str(exc))
            )

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    _quiet_conflicts()
    await bot.start()
    info = await bot.application.bot.get_webhook_info()
    if info.url:
        await bot.stop(0)
        return WEBHOOK_SET
    updater = bot.application.updater
    assert updater is not None
    try:
        await updater.start_polling(allowed_updates=ALLOWED_UPDATES, error_callback=on_error)
        await stop.wait()
    finally:
        if updater.running:
            await updater.stop()
        await bot.stop(bot.runtime.settings.bot_shutdown_timeout)
    return CONFLICT if conflict.is_set() else STOPPED
