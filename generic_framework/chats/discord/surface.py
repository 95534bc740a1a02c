"""A Discord channel (or a slash command's interaction) as a
:class:`~generic_framework.chats.surface.ChatSurface`.

Messages go out through discord.py, which waits out a 429 for its ``retry_after`` and sends
again; every message allows no mentions (the client's default, ``allowed_mentions`` none) and
suppresses link embeds. A live answer is one message edited (Discord has no drafts); the typing
indicator is triggered once per call (it shows for ten seconds). A slash command's answer is the
interaction's response, then follow-ups. Plain text (a command's answer, a refusal) is escaped:
it shows as written, whatever a persona's name or a user's argument holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import discord

from generic_framework.chats.discord import formatting
from generic_framework.chats.message import ChatRef
from generic_framework.core.reply import Citation

__all__ = ["DiscordSurface"]


class DiscordSurface:
    """One Discord channel (see the module's docstring).

    Args:
        channel: where messages go.
        chat: the channel as the neutral layer names it.
        interaction: the slash command being answered, if any.
    """

    def __init__(
        self,
        channel: discord.abc.Messageable,
        chat: ChatRef,
        interaction: discord.Interaction | None = None,
    ) -> None:
        self.channel, self._chat, self.interaction = channel, chat, interaction

    @property
    def chat(self) -> ChatRef:
        """The channel."""
        return self._chat

    @property
    def can_draft(self) -> bool:
        """Never: Discord has no drafts."""
        return False

    async def _send(self, content: str) -> discord.Message | None:
        interaction = self.interaction
        if interaction is None:
            return await self.channel.send(content, suppress_embeds=True)
        if not interaction.response.is_done():
            await interaction.response.send_message(content, suppress_embeds=True)
            return None
        return await interaction.followup.send(content, suppress_embeds=True, wait=True)

    async def say(self, text: str) -> None:
        """A plain message, escaped."""
        await self._send(formatting.escape(text))

    async def choose(self, text: str, options: Sequence[str]) -> None:
        """``text``, the options, and how to pick one (the slash command offers them too)."""
        listed = "\n".join(f"• {option}" for option in options)
        await self.say(f"{text}\n{listed}\nPick one with /persona.")

    async def post(self, shown: str) -> int | None:
        """The live answer's message."""
        sent = await self._send(shown)
        return sent.id if sent is not None else None

    async def update(self, message_id: int, shown: str) -> None:
        """A live edit."""
        await self._edit(message_id, shown)

    async def replace(self, message_id: int, text: str) -> None:
        """A plain edit."""
        await self._edit(message_id, formatting.escape(text))

    async def _edit(self, message_id: int, content: str) -> None:
        partial = discord.PartialMessage(channel=self.channel, id=message_id)  # type: ignore[arg-type]
        await partial.edit(content=content)  # the message keeps its suppressed embeds

    async def draft(self, shown: str) -> bool:
        """No drafts on Discord."""
        return False

    async def typing(self) -> None:
        """Trigger the typing indicator once (a failure is dropped)."""
        try:
            await self.channel.typing()
        except discord.HTTPException:
            return

    async def deliver(self, chunks: Sequence[str], *, first_into: int | None) -> None:
        """The answer's messages; the first into the live message when there is one."""
        for index, chunk in enumerate(chunks):
            if index == 0 and first_into is not None:
                await self._edit(first_into, chunk)
            else:
                await self._send(chunk)

    def render_answer(self, content: str, citations: Sequence[Citation]) -> list[str]:
        """The answer as Discord markdown messages."""
        return formatting.render_answer(content, citations)

    def render_draft(self, text: str) -> str:
        """A partial answer, escaped."""
        return formatting.render_draft(text)

    def escape(self, text: str) -> str:
        """Escaped for Discord's markdown."""
        return formatting.escape(text)
