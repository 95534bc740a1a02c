"""The bot: a discord.py ``Client`` over one Runtime, its messages answered by the neutral
layer's :class:`~generic_framework.chats.answering.Answerer`.

At start (``setup_hook``, after the token was checked with ``GET /users/@me``) the gateway's
address is asked of ``GET /gateway/bot`` under ``DISCORD_API_URL`` and the registry's commands
become slash commands (``/persona`` with the personas as choices), registered with
``PUT /applications/{id}/commands``. discord.py then holds the gateway: identify, heartbeats,
and a reconnect (Discord's op 7, a dropped connection) resumed where it left off.

A message is meant for the bot in a DM, and in a guild channel when it mentions the bot,
replies to one of its messages, or starts with ``//`` (a web search); a ``/command`` typed as
text is run in a DM or after the mention. One conversation per DM, channel and thread (a
thread is a channel of its own): the key is the channel's id. The message-content intent is
asked for (Discord makes it privileged: it must be switched on in the developer portal, else
the gateway closes with 4014 and the command says so).
"""

from __future__ import annotations

import logging
import re

import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket

from generic_framework.chats.access import Names
from generic_framework.chats.answering import SORRY, Answerer
from generic_framework.chats.commands import Command
from generic_framework.chats.discord.settings import DiscordSettings
from generic_framework.chats.discord.surface import DiscordSurface
from generic_framework.chats.message import Attachment, ChatRef, Incoming
from generic_framework.core.persona import WEB_PREFIX
from generic_framework.runtime import Runtime
from generic_framework.telemetry.logs import RedactingFilter

__all__ = ["NAMES", "PLATFORM", "DiscordBot", "redact_library_logs"]

logger = logging.getLogger("generic_framework.discord")
PLATFORM = "discord"
NAMES = Names("Discord", "DISCORD_ALLOWED_USERS", "DISCORD_ALLOWED_CHANNELS", "channel")
_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,32})(?:\s+(.*))?$", re.DOTALL)
_CHOICES = 25  # Discord's limit on an option's choices


def redact_library_logs() -> None:
    """A :class:`~generic_framework.telemetry.logs.RedactingFilter` on discord.py's loggers."""
    for name in ("discord", "aiohttp"):
        log = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in log.filters):
            log.addFilter(RedactingFilter())


def point_at(api_url: str) -> None:
    """Send discord.py's REST calls to ``api_url`` (``DISCORD_API_URL``)."""
    discord.http.Route.BASE = api_url.rstrip("/")


class DiscordBot(discord.Client):
    """The bot of one runtime (see the module's docstring).

    Args:
        runtime: the personas, the store (chat states, users), the locks.
        settings: the ``DISCORD_*`` settings.
        offline: answers come from the embedded mock.
    """

    def __init__(self, runtime: Runtime, settings: DiscordSettings, *, offline: bool) -> None:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: switched on in the developer portal
        super().__init__(intents=intents, allowed_mentions=discord.AllowedMentions.none())
        self.runtime, self.settings = runtime, settings
        self.answerer = Answerer(
            runtime,
            PLATFORM,
            settings.access,
            NAMES,
            interval=settings.discord_edit_interval,
            offline=offline,
            request_prefix="dc",
        )
        self.tree = app_commands.CommandTree(self)

    async def setup_hook(self) -> None:
        """The gateway's address, then the slash commands (see the module's docstring)."""
        _, url, _ = await self.http.get_bot_gateway()
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
        for command in self.answerer.commands:
            self.tree.add_command(self._slash(command))
        await self.tree.sync()

    async def on_ready(self) -> None:
        """Say who the bot is, and warn when nobody is let in."""
        logger.info("Discord bot %s ready", self.user)
        if self.answerer.access.closed:
            logger.warning(
                "DISCORD_ALLOWED_USERS, DISCORD_ALLOWED_GUILDS and DISCORD_ALLOWED_CHANNELS are "
                "empty: the bot lets nobody in. A stranger's reply shows their user id"
            )

    async def stop(self, grace: float) -> None:
        """Finish the messages under way (at most ``grace`` seconds), then close."""
        if not await self.answerer.lanes.join(grace):
            logger.warning("stopped with Discord messages still under way (after %g s)", grace)
        await self.close()

    async def on_message(self, message: discord.Message) -> None:
        """A message: answered when it is meant for the bot."""
        if message.author.bot or self.user is None:
            return
        incoming = self.incoming(message, self.user.id)
        if incoming is None:
            return
        self._submit(
            incoming, DiscordSurface(message.channel, incoming.chat), f"message {message.id}"
        )

    def _submit(self, incoming: Incoming, surface: DiscordSurface, what: str) -> None:
        self.answerer.submit(
            incoming.key,
            what,
            lambda: self.answerer.answer(incoming, surface),
            lambda: surface.say(SORRY),
        )

    def incoming(self, message: discord.Message, me: int) -> Incoming | None:
        """``message`` as the neutral layer's, or ``None`` when it is not meant for the bot."""
        if not _addressed(message, me):
            return None
        text = re.sub(rf"<@!?{me}>[,:]?", " ", message.content).strip()
        command = _COMMAND.match(text)
        reference = message.reference
        return Incoming(
            PLATFORM,
            message.author.id,
            ChatRef(message.channel.id, None, message.guild is None),
            str(message.channel.id),
            text,
            command.group(1).lower() if command else None,
            (command.group(2) or "").strip() if command else "",
            group=message.guild.id if message.guild else None,
            mentions=tuple(user.id for user in message.mentions),
            reply_to=reference.message_id if reference else None,
            attachments=tuple(
                Attachment(str(a.id), a.content_type, a.size, a.filename, a.read)
                for a in message.attachments
            ),
            message_id=message.id,
        )

    def _slash(self, command: Command) -> app_commands.Command[app_commands.Group, ..., None]:
        """``command`` as a slash command (its argument an optional string option)."""
        name = command.name

        async def bare(interaction: discord.Interaction) -> None:
            self._interaction(interaction, name, "")

        async def with_argument(interaction: discord.Interaction, argument: str = "") -> None:
            self._interaction(interaction, name, argument)

        if command.argument is None:
            return app_commands.Command(name=name, description=command.description, callback=bare)
        callback = app_commands.rename(argument=command.argument)(with_argument)
        if command.choices is not None:
            names = command.choices(self.runtime)[:_CHOICES]
            choices = [app_commands.Choice(name=n, value=n) for n in names]
            callback = app_commands.choices(argument=choices)(callback)
        return app_commands.Command(name=name, description=command.description, callback=callback)

    def _interaction(self, interaction: discord.Interaction, name: str, argument: str) -> None:
        channel = interaction.channel
        if channel is None or not isinstance(channel, discord.abc.Messageable):
            return
        chat = ChatRef(channel.id, None, interaction.guild_id is None)
        incoming = Incoming(
            PLATFORM,
            interaction.user.id,
            chat,
            str(channel.id),
            f"/{name} {argument}".strip(),
            name,
            argument,
            group=interaction.guild_id,
        )
        surface = DiscordSurface(channel, chat, interaction)
        self._submit(incoming, surface, f"interaction {interaction.id}")


def _addressed(message: discord.Message, me: int) -> bool:
    """A DM; in a guild a mention of the bot, a reply to it, or a ``//`` web search."""
    if message.guild is None or any(user.id == me for user in message.mentions):
        return True
    resolved = message.reference.resolved if message.reference else None
    if isinstance(resolved, discord.Message) and resolved.author.id == me:
        return True
    return message.content.lstrip().startswith(WEB_PREFIX)
