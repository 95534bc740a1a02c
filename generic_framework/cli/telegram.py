"""The ``telegram`` command: the personas as a Telegram bot, by long polling.

One process, one :class:`~generic_framework.runtime.Runtime` (client, store, locks, MCP
sessions) under the bot of :mod:`generic_framework.chats.telegram`. Without an API key
(``OPENAI_API_KEY``), or with ``--mock``, it answers from the embedded mock's recordings, as
``chat`` and ``serve`` do, and says so in one line. Exit codes: 2 for a configuration error
(``TELEGRAM_BOT_TOKEN`` missing or refused, a bad ``TELEGRAM_*`` value) and when another
process receives the bot's updates (Telegram's 409 Conflict, or a webhook set): starting again
would fail the same way (and a restarted poller would cut the other one off each time), so the
compose service waits to be stopped on exit 2 instead of restarting; 1 when Telegram cannot be
reached at start; 0 when stopped by SIGTERM or Ctrl-C. With ``TELEGRAM_METRICS_PORT`` the
process serves its Prometheus metrics (the runtime's registry) on ``BOT_HOST`` at that port.
"""

from __future__ import annotations

from collections.abc import Mapping

from telegram.error import InvalidToken, TelegramError

from generic_framework.chats.telegram.bot import TelegramBot
from generic_framework.chats.telegram.polling import STOPPED, poll
from generic_framework.chats.telegram.settings import TelegramSettings
from generic_framework.cli.chat_bots import metrics_served, run_bot
from generic_framework.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    err,
    open_runtime,
)
from generic_framework.config import Settings
from generic_framework.core.spec import PersonaSpec
from generic_framework.redaction import redact

__all__ = ["run_telegram"]


def run_telegram(mock: bool = False) -> int:
    """The ``telegram`` command (``mock``: answer from the embedded mock even with a key)."""
    return run_bot(TelegramSettings, _serve, mock)


async def _serve(
    settings: Settings,
    telegram: TelegramSettings,
    specs: Mapping[str, PersonaSpec],
    offline: bool,
) -> int:
    async with open_runtime(settings, specs, offline=offline) as runtime:
        await runtime.store.open()
        bot = TelegramBot(runtime, telegram, polling=True, offline=offline)
        try:
            with metrics_served(runtime, settings.bot_host, telegram.telegram_metrics_port):
                outcome = await poll(bot)
        except InvalidToken:
            err("error: Telegram refused TELEGRAM_BOT_TOKEN: check it with @BotFather")
            return EXIT_USAGE
        except TelegramError as exc:
            err(
                redact(
                    f"error: could not reach the Telegram Bot API ({exc}); check TELEGRAM_API_URL"
                )
            )
            return EXIT_ERROR
    if outcome != STOPPED:
        err(f"error: {outcome}")
        return EXIT_USAGE
    return EXIT_OK
