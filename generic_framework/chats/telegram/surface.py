"""A Telegram chat as a :class:`~generic_framework.chats.surface.ChatSurface`.

Every call goes through :class:`~generic_framework.chats.telegram.delivery.Delivery` (a live
edit or draft through its ``live``: dropped while a 429 is waited out). In a private chat a live
answer streams as a draft (``sendMessageDraft``, Bot API 9.5+) where the Bot API offers it;
:class:`Drafts` learns once per bot whether it does. The final answer is
:func:`~generic_framework.chats.telegram.formatting.render_answer`'s HTML chunks, link previews
off; a chunk whose formatting the server refuses is sent again as its visible text alone, in
the same place. The persona picker is an inline keyboard whose buttons carry
``persona:<name>`` (:data:`PERSONA_DATA`).
"""

from __future__ import annotations

import html
import logging
import re
import secrets
from collections.abc import Sequence
from functools import partial

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, EndPointNotFound, InvalidToken

from generic_framework.chats.message import ChatRef
from generic_framework.chats.telegram import formatting
from generic_framework.chats.telegram.delivery import Delivery
from generic_framework.core.reply import Citation

__all__ = ["PERSONA_DATA", "Drafts", "TelegramSurface", "send_chunks", "visible_text"]

logger = logging.getLogger("generic_framework.telegram")
_TAG = re.compile(r"<[^>]*>")
PERSONA_DATA = "persona:"
"""How a persona button's callback data starts (``persona:scout``)."""
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)


class Drafts:
    """Whether the Bot API server offers ``sendMessageDraft`` (learnt on first use: a server
    that does not know the method answers 404, which python-telegram-bot raises as
    ``InvalidToken`` or ``EndPointNotFound``, or 400 naming the method)."""

    def __init__(self) -> None:
        self.offered = True

    def refused(self, exc: Exception) -> bool:
        """Learn from a failed draft: True when the method is not offered (then never again)."""
        text = str(exc).lower()
        if (
            isinstance(exc, EndPointNotFound | InvalidToken)
            or "not found" in text
            or "method" in text
        ):
            if self.offered:
                logger.info("the Bot API server has no sendMessageDraft: answers are edited")
            self.offered = False
            return True
        return False


def visible_text(chunk: str) -> str:
    """What a chunk of :func:`~generic_framework.chats.telegram.formatting.render_answer` shows,
    without its tags. Its tags are our renderer's own and its text is escaped (no ``<`` in it),
    so removing every ``<...>`` and unescaping gives exactly the text Telegram would show."""
    return html.unescape(_TAG.sub("", chunk)) or "…"


async def send_chunks(
    bot: Bot, delivery: Delivery, chat: ChatRef, chunks: Sequence[str], *, first_into: int | None
) -> None:
    """Send HTML ``chunks``; with ``first_into`` the first one replaces that message's text.

    A chunk whose formatting the server refuses is sent again as its visible text alone, in
    the same place: the chunks before it are not sent twice and the ones after it still go.
    """
    for index, chunk in enumerate(chunks):
        into = first_into if index == 0 else None
        try:
            await _send_chunk(bot, delivery, chat, chunk, into=into, html=True)
        except BadRequest as exc:
            logger.warning("a formatted part was refused (%s); sending it as plain text", exc)
            await _send_chunk(bot, delivery, chat, visible_text(chunk), into=into, html=False)


async def _send_chunk(
    bot: Bot, delivery: Delivery, chat: ChatRef, text: str, *, into: int | None, html: bool
) -> None:
    mode = ParseMode.HTML if html else None
    if into is not None:
        edit = partial(
            bot.edit_message_text,
            text,
            chat_id=chat.chat_id,
            message_id=into,
            parse_mode=mode,
            link_preview_options=NO_PREVIEW,
        )
        await delivery.send("editMessageText", edit)
        return
    send = partial(
        bot.send_message,
        chat.chat_id,
        text,
        parse_mode=mode,
        link_preview_options=NO_PREVIEW,
        message_thread_id=chat.thread_id,
    )
    await delivery.send("sendMessage", send)


def keyboard(names: Sequence[str]) -> InlineKeyboardMarkup:
    """The persona buttons, two a row (names too long for callback data left out)."""
    buttons = [
        InlineKeyboardButton(name, callback_data=f"{PERSONA_DATA}{name}")
        for name in names
        if len(f"{PERSONA_DATA}{name}".encode()) <= 64  # Telegram's limit for callback data
    ]
    return InlineKeyboardMarkup([buttons[i : i + 2] for i in range(0, len(buttons), 2)])


class TelegramSurface:
    """One Telegram chat (see the module's docstring).

    Args:
        bot: the Bot API client.
        chat: the chat (and forum topic).
        drafts: the bot's knowledge of ``sendMessageDraft`` (shared by its answers).
        delivery: the retries; a new one (its own 429 pause) when omitted.
    """

    def __init__(
        self, bot: Bot, chat: ChatRef, *, drafts: Drafts, delivery: Delivery | None = None
    ) -> None:
        self.bot, self._chat, self.drafts = bot, chat, drafts
        self.delivery = delivery or Delivery()
        self.draft_id = secrets.randbelow(2**31 - 2) + 1

    @property
    def chat(self) -> ChatRef:
        """The chat."""
        return self._chat

    @property
    def can_draft(self) -> bool:
        """A private chat, on a server that offers drafts."""
        return self._chat.private and self.drafts.offered

    async def say(self, text: str) -> None:
        """A plain message."""
        await self._send(text)

    async def choose(self, text: str, options: Sequence[str]) -> None:
        """``text`` with a button per option."""
        await self._send(text, keyboard(options))

    async def _send(self, text: str, markup: InlineKeyboardMarkup | None = None) -> None:
        chat = self._chat
        await self.delivery.send(
            "sendMessage",
            lambda: self.bot.send_message(
                chat.chat_id, text, reply_markup=markup, message_thread_id=chat.thread_id
            ),
        )

    async def post(self, shown: str) -> int | None:
        """The live answer's message (HTML)."""
        chat = self._chat
        sent = await self.delivery.send(
            "sendMessage",
            lambda: self.bot.send_message(
                chat.chat_id, shown, parse_mode=ParseMode.HTML, message_thread_id=chat.thread_id
            ),
        )
        return sent.message_id if sent is not None else None

    async def update(self, message_id: int, shown: str) -> None:
        """A live edit (HTML)."""
        await self.delivery.live(
            "editMessageText",
            lambda: self.bot.edit_message_text(
                shown, chat_id=self._chat.chat_id, message_id=message_id, parse_mode=ParseMode.HTML
            ),
        )

    async def replace(self, message_id: int, text: str) -> None:
        """A plain edit, retried."""
        await self.delivery.send(
            "editMessageText",
            lambda: self.bot.edit_message_text(
                text, chat_id=self._chat.chat_id, message_id=message_id
            ),
        )

    async def draft(self, shown: str) -> bool:
        """``sendMessageDraft``; False once the server turns out not to offer it."""
        chat = self._chat
        try:
            await self.delivery.live(
                "sendMessageDraft",
                lambda: self.bot.send_message_draft(
                    chat.chat_id,
                    self.draft_id,
                    shown,
                    message_thread_id=chat.thread_id,
                    parse_mode=ParseMode.HTML,
                ),
            )
        except (BadRequest, EndPointNotFound, InvalidToken) as exc:
            if not self.drafts.refused(exc):
                raise
            return False
        return True

    async def typing(self) -> None:
        """The chat action ``typing``."""
        chat = self._chat
        await self.delivery.live(
            "sendChatAction",
            lambda: self.bot.send_chat_action(
                chat.chat_id, ChatAction.TYPING, message_thread_id=chat.thread_id
            ),
        )

    async def deliver(self, chunks: Sequence[str], *, first_into: int | None) -> None:
        """The answer's HTML chunks (see :func:`send_chunks`)."""
        await send_chunks(self.bot, self.delivery, self._chat, chunks, first_into=first_into)

    def render_answer(self, content: str, citations: Sequence[Citation]) -> list[str]:
        """The answer as HTML chunks."""
        return formatting.render_answer(content, citations)

    def render_draft(self, text: str) -> str:
        """A partial answer as escaped text."""
        return formatting.render_draft(text)

    def escape(self, text: str) -> str:
        """Escaped for Telegram's HTML."""
        return formatting.escape(text)
