"""A live answer: the reply shown while the persona writes it, then the formatted answer.

In a private chat the text streams as a draft (``sendMessageDraft``, Bot API 9.5+) where the
Bot API offers it; elsewhere, or when the server does not know the method, one message is
sent and edited at most every ``TELEGRAM_EDIT_INTERVAL`` seconds (drafts are for private
chats only). While the web search or a tool runs, the chat action ``typing`` is renewed every
:data:`TYPING_EVERY` seconds and the draft (or message) shows a short status: "Searching the
web…" for the web search, the tool's name for the others.

The final answer is :func:`~generic_framework.chats.telegram.formatting.render_answer`'s HTML
chunks, link previews off: in edit mode the live message becomes the first chunk, in draft
mode every chunk is a new message (the draft disappears when the answer is sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial

from telegram import Bot, LinkPreviewOptions
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, EndPointNotFound, InvalidToken

from generic_framework.chats.telegram.delivery import Delivery
from generic_framework.chats.telegram.formatting import (
    escape,
    render_answer,
    render_draft,
)
from generic_framework.core.events import Done, PersonaEvent, RoundStarted, TextDelta
from generic_framework.core.reply import Reply

__all__ = [
    "DRAFT_RENEW",
    "SEARCHING",
    "TYPING_EVERY",
    "ChatRef",
    "Drafts",
    "LiveAnswer",
    "send_chunks",
    "visible_text",
]

logger = logging.getLogger("generic_framework.telegram")
_TAG = re.compile(r"<[^>]*>")

TYPING_EVERY = 4.0
"""Telegram shows a chat action for 5 s: it is renewed a little sooner."""
DRAFT_RENEW = 20.0
"""Telegram shows a draft for 30 s: one still standing is sent again after this long."""
SEARCHING = "Searching the web…"
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where an answer goes: the chat, its forum topic, and whether it is a private chat."""

    chat_id: int
    thread_id: int | None = None
    private: bool = False


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


async def send_chunks(
    bot: Bot, delivery: Delivery, chat: ChatRef, chunks: list[str], *, first_into: int | None
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


def visible_text(chunk: str) -> str:
    """What a chunk of :func:`~generic_framework.chats.telegram.formatting.render_answer` shows,
    without its tags. Its tags are our renderer's own and its text is escaped (no ``<`` in it),
    so removing every ``<...>`` and unescaping gives exactly the text Telegram would show."""
    return html.unescape(_TAG.sub("", chunk)) or "…"


class LiveAnswer:
    """Shows one turn's events in a chat (see the module's docstring).

    Args:
        bot: the Bot API client.
        chat: where the answer goes.
        interval: the least seconds between two live updates (``TELEGRAM_EDIT_INTERVAL``).
        drafts: the bot's knowledge of ``sendMessageDraft`` (shared by its answers).
        web: the turn is a ``//`` web search (its status shows from the start).
    """

    def __init__(
        self, bot: Bot, chat: ChatRef, *, interval: float, drafts: Drafts, web: bool
    ) -> None:
        self.bot, self.chat, self.interval, self.drafts = bot, chat, interval, drafts
        self.delivery = Delivery()
        self.text = ""
        self.status = SEARCHING if web else ""
        self.busy = True  # the status shows: typing is renewed
        self.message_id: int | None = None  # edit mode: the live message
        self.draft_id = secrets.randbelow(2**31 - 2) + 1
        self._shown = ""
        self._last = 0.0

    @property
    def use_drafts(self) -> bool:
        """Drafts for this answer: a private chat, on a server that offers them."""
        return self.chat.private and self.drafts.offered

    async def run(self, events: AsyncIterator[PersonaEvent]) -> Reply:
        """Show ``events`` live, then send the final answer; the turn's reply.

        Raises:
            GLMError: the turn failed (what was shown stays; the caller says sorry).
            RuntimeError: the events ended without ``Done``.
        """
        typing = asyncio.create_task(self._keep_typing())
        try:
            if self.status:
                await self._update(force=True)
            reply = await self._follow(events)
        finally:
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing
        await self.finish(reply)
        return reply

    async def _follow(self, events: AsyncIterator[PersonaEvent]) -> Reply:
        async for event in events:
            if isinstance(event, TextDelta):
                self.text += event.text
                self.busy = False
                await self._update()
            elif isinstance(event, RoundStarted):
                self.text, self.busy = "", True  # a round's preamble is not the answer
                self.status = SEARCHING if "web_search" in event.tools else _tools(event.tools)
                await self._update(force=True)
            elif isinstance(event, Done):
                return event.reply
        raise RuntimeError("the turn's events ended without an answer")

    async def finish(self, reply: Reply) -> None:
        """Send ``reply`` formatted; the live message (edit mode) becomes its first part."""
        chunks = render_answer(reply.content, reply.citations) or ["…"]
        first_into = None if self.use_drafts else self.message_id
        await send_chunks(self.bot, self.delivery, self.chat, chunks, first_into=first_into)

    async def fail(self, text: str) -> None:
        """Say ``text`` (a short apology) instead of the answer: in the live message when
        there is one, else in a new message."""
        if self.message_id is not None and not self.use_drafts:
            message_id = self.message_id
            await self.delivery.send(
                "editMessageText",
                lambda: self.bot.edit_message_text(
                    text, chat_id=self.chat.chat_id, message_id=message_id
                ),
            )
            return
        await self.delivery.send(
            "sendMessage",
            lambda: self.bot.send_message(
                self.chat.chat_id, text, message_thread_id=self.chat.thread_id
            ),
        )

    def _shown_text(self) -> str:
        """What the live draft or message shows now (HTML: escaped text, no tags)."""
        return escape(self.status) if self.busy and self.status else render_draft(self.text)

    async def _update(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        shown = self._shown_text()
        if not shown.strip() or shown == self._shown:
            return
        self._last, self._shown = now, shown
        if self.use_drafts and await self._draft(shown):
            return
        await self._edit(shown)

    async def _draft(self, shown: str) -> bool:
        try:
            await self.delivery.live(
                "sendMessageDraft",
                lambda: self.bot.send_message_draft(
                    self.chat.chat_id,
                    self.draft_id,
                    shown,
                    message_thread_id=self.chat.thread_id,
                    parse_mode=ParseMode.HTML,
                ),
            )
        except (BadRequest, EndPointNotFound, InvalidToken) as exc:
            if not self.drafts.refused(exc):
                raise
            return False
        return True

    async def _edit(self, shown: str) -> None:
        if self.message_id is None:
            sent = await self.delivery.send(
                "sendMessage",
                lambda: self.bot.send_message(
                    self.chat.chat_id,
                    shown,
                    parse_mode=ParseMode.HTML,
                    message_thread_id=self.chat.thread_id,
                ),
            )
            self.message_id = sent.message_id if sent is not None else None
            return
        message_id = self.message_id
        await self.delivery.live(
            "editMessageText",
            lambda: self.bot.edit_message_text(
                shown, chat_id=self.chat.chat_id, message_id=message_id, parse_mode=ParseMode.HTML
            ),
        )

    async def _keep_typing(self) -> None:
        while True:
            if self.busy:
                await self.delivery.live(
                    "sendChatAction",
                    lambda: self.bot.send_chat_action(
                        self.chat.chat_id, ChatAction.TYPING, message_thread_id=self.chat.thread_id
                    ),
                )
                await self._renew_draft()
            await asyncio.sleep(TYPING_EVERY)

    async def _renew_draft(self) -> None:
        """Send the shown draft again before Telegram drops it (a draft lives 30 s, a search
        or a tool may run longer)."""
        if self.use_drafts and self._shown and time.monotonic() - self._last >= DRAFT_RENEW:
            self._last = time.monotonic()
            await self._draft(self._shown)


def _tools(names: list[str]) -> str:
    shown = ", ".join(dict.fromkeys(names)) or "a tool"
    return f"Running {shown}…"
