"""The ``discord`` command: the personas as a Discord bot, over Discord's gateway.

One process, one :class:`~generic_framework.runtime.Runtime` under the bot of
:mod:`generic_framework.chats.discord` (discord.py is imported by this command only). Without
an API key, or with ``--mock``, it answers from the embedded mock's recordings and says so in
one line. Exit codes: 2 for a configuration error (``DISCORD_BOT_TOKEN`` missing or refused, a
bad ``DISCORD_*`` value, the message-content intent not switched on): starting again would fail
the same way; 1 when Discord cannot be reached; 0 when stopped by SIGTERM or Ctrl-C (the
messages under way finish first, ``BOT_SHUTDOWN_TIMEOUT``). With ``DISCORD_METRICS_PORT`` the
process serves its Prometheus metrics on ``BOT_HOST`` at that port.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Mapping

import aiohttp
import discord

from generic_framework.chats.discord.bot import DiscordBot, point_at, redact_library_logs
from generic_framework.chats.discord.settings import DiscordSettings
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

__all__ = ["run_discord"]

INTENT = (
    "error: Discord refused the message-content intent: switch on 'Message Content Intent' "
    "under Bot in the developer portal (a privileged intent), then start again"
)


def run_discord(mock: bool = False) -> int:
    """The ``discord`` command (``mock``: answer from the embedded mock even with a key)."""
    return run_bot(DiscordSettings, _serve, mock)


async def _serve(
    settings: Settings, chosen: DiscordSettings, specs: Mapping[str, PersonaSpec], offline: bool
) -> int:
    redact_library_logs()
    point_at(chosen.discord_api_url)
    async with open_runtime(settings, specs, offline=offline) as runtime:
        await runtime.store.open()
        bot = DiscordBot(runtime, chosen, offline=offline)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        with metrics_served(runtime, settings.bot_host, chosen.discord_metrics_port):
            running = asyncio.create_task(bot.start(chosen.token))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not running.done():
                await bot.stop(settings.bot_shutdown_timeout)
            try:
                await running
            except discord.LoginFailure:
                err("error: Discord refused DISCORD_BOT_TOKEN: check it in the developer portal")
                return EXIT_USAGE
            except discord.PrivilegedIntentsRequired:
                err(INTENT)
                return EXIT_USAGE
            except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
                err(redact(f"error: could not reach Discord ({exc}); check DISCORD_API_URL"))
                return EXIT_ERROR
            finally:
                if not bot.is_closed():
                    await bot.close()
    return EXIT_OK
