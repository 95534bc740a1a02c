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

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from telegram.error import InvalidToken, TelegramError

from generic_framework.chats.telegram.bot import TelegramBot
from generic_framework.chats.telegram.polling import STOPPED, poll
from generic_framework.chats.telegram.settings import TelegramSettings
from generic_framework.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    err,
    open_runtime,
    persona_specs,
    run_command,
)
from generic_framework.cli.offline import offline_notice, upstream
from generic_framework.config import Settings
from generic_framework.core.spec import PersonaSpec
from generic_framework.redaction import redact
from generic_framework.runtime import Runtime
from generic_framework.telemetry.logs import configure_logging

__all__ = ["run_telegram"]


def run_telegram(mock: bool = False) -> int:
    """The ``telegram`` command (``mock``: answer from the embedded mock even with a key)."""

    def action(settings: Settings) -> int:
        telegram = TelegramSettings()
        telegram.register_secrets()
        telegram.token  # noqa: B018  # a missing token is a configuration error, said now
        specs = persona_specs(settings, None)
        configure_logging(settings.log_level, settings.log_format)
        with upstream(settings, mock) as (active, offline):
            if offline:
                err(offline_notice(mock))
            return asyncio.run(_serve(active, telegram, specs, offline))

    return run_command(action)


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
            with _metrics_served(runtime, settings.bot_host, telegram.telegram_metrics_port):
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


@contextmanager
def _metrics_served(runtime: Runtime, host: str, port: int) -> Iterator[None]:
    """The runtime's metrics at ``http://host:port/metrics`` while the bot polls (port 0: none).

    prometheus-client's own threaded server: the polling process has no HTTP server to add a
    route to, and scrapes must not wait on the event loop of the turns.
    """
    if not port:
        yield
        return
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, host, registry=runtime.telemetry.metrics.registry)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
