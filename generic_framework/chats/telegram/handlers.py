"""One update, from its message to its answer: who, whether, what, and the turn.

:meth:`Handlers.handle` answers one update and says how it went (an outcome of the
``generic_framework_telegram_updates_total`` metric, ``None`` for an update that needed no
answer). In order: a callback query (a persona button) is answered; a message not meant for the
bot (a group message that does not address it) is left alone; a stranger gets their user id
and how to be let in (no model call); a message without text (a photo, a voice message, a
sticker, a document) gets a polite "text only"; a command is run; anything else is a turn.

A turn is asked of the runtime's turn service (:mod:`generic_framework.turns`) by the sender's
user (``telegram:<id>``: admitted against their limits, counted in their daily totals however
the turn ends), in the chat's current conversation with its persona. The conversation
of a private chat belongs to its one user; a group's (or forum topic's) belongs to the group's
own user ``telegram:<chat_id>`` (negative ids: never a person's), so every member continues
the same conversation and ``users remove telegram:<chat_id>`` deletes it.
"""

from __future__ import annotations

import contextlib
import logging
from contextvars import ContextVar
from dataclasses import dataclass

from telegram import Bot, CallbackQuery, Message, Update
from telegram.constants import ChatType

from generic_framework.chats.people import caller_for, platform_user, refusal_text
from generic_framework.chats.telegram.access import (
    Access,
    Addressed,
    addressed,
    chat_key,
    stranger_text,
    thread_of,
)
from generic_framework.chats.telegram.commands import (
    PERSONA_DATA,
    PLATFORM,
    CommandContext,
    chat_state,
    choose_persona,
    run_command,
)
from generic_framework.chats.telegram.delivery import Delivery
from generic_framework.chats.telegram.live import ChatRef, Drafts, LiveAnswer
from generic_framework.core.persona import Persona
from generic_framework.errors import ConfigError, GLMError
from generic_framework.runtime import Runtime
from generic_framework.store.users import conversation_key
from generic_framework.turns import Ask, TurnRefused
from generic_framework.wire import errors as e

__all__ = ["REQUEST_ID", "SORRY", "TEXT_ONLY", "Handlers", "Incoming", "friendly_error"]

logger = logging.getLogger("generic_framework.telegram")

TEXT_ONLY = "Sorry, I can only read text messages. Please write your question."
SORRY = "Sorry, something went wrong while answering. Please try again."
REQUEST_ID: ContextVar[str] = ContextVar("telegram_request_id", default="-")
"""The request id of the update being answered (set by the bot for each update's task)."""


def friendly_error(exc: GLMError, offline: bool) -> str:
    """A short message for the chat when the model could not answer."""
    if isinstance(exc, e.ContentFilterError):
        text = "The model declined to answer that. Please rephrase it."
    elif isinstance(exc, e.AuthenticationError | e.InsufficientBalanceError | e.QuotaExceededError):
        text = "I cannot reach my model right now; the bot's owner can see why in its log."
    elif isinstance(exc, e.RateLimitError | e.ServerError | e.APITimeoutError):
        text = "The model is busy right now. Please try again in a minute."
    elif isinstance(exc, e.APIConnectionError):
        text = "I cannot reach my model right now. Please try again in a minute."
    else:
        text = SORRY
    if offline:
        text += " (No API key is set: answers come from recorded examples only.)"
    return text


@dataclass(frozen=True, slots=True)
class Incoming:
    """A message meant for the bot, from someone let in."""

    message: Message
    said: Addressed
    chat: ChatRef
    key: str


class Handlers:
    """Answers updates for one bot over one runtime (see the module's docstring).

    Args:
        runtime: the personas, the store, the locks.
        bot: the Bot API client (initialised: its id and username are known).
        access: the allowlists.
        interval: ``TELEGRAM_EDIT_INTERVAL``.
        offline: answers come from the embedded mock (said when a turn fails).
    """

    def __init__(
        self, runtime: Runtime, bot: Bot, access: Access, *, interval: float, offline: bool
    ) -> None:
        self.runtime, self.bot, self.access = runtime, bot, access
        self.interval, self.offline = interval, offline
        self.delivery = Delivery()
        self.drafts = Drafts()

    async def handle(self, update: Update) -> str | None:
        """Answer ``update``; its outcome (``answered``, ``refused``), ``None`` if ignored."""
        if update.callback_query is not None:
            return await self._callback(update.callback_query)
        message = update.message
        if message is None or message.from_user is None:
            return None  # an edited message, a channel post: never asked for
        said = addressed(message, self.bot.id, self.bot.username)
        if said is None:
            return None
        private = message.chat.type == ChatType.PRIVATE
        chat = ChatRef(message.chat.id, thread_of(message), private)
        if not self.access.allows(message.from_user.id, message.chat.id):
            await self._say(chat, stranger_text(message.from_user.id, message.chat.id, private))
            return "refused"
        if not (message.text or "").strip():
            await self._say(chat, TEXT_ONLY)
            return "refused"
        incoming = Incoming(message, said, chat, chat_key(message))
        if said.command is not None:
            await run_command(await self._context(incoming), said.command, said.argument)
            return "answered"
        return await self.turn(incoming)

    async def apologise(self, update: Update) -> None:
        """Tell the chat an update could not be answered (after a fault of the bot's own)."""
        message = update.effective_message
        if message is not None and update.callback_query is None:
            chat = ChatRef(message.chat.id, thread_of(message))
            await self._say(chat, SORRY)

    async def _say(self, chat: ChatRef, text: str) -> None:
        await self.delivery.send(
            "sendMessage",
            lambda: self.bot.send_message(chat.chat_id, text, message_thread_id=chat.thread_id),
        )

    async def _context(self, incoming: Incoming) -> CommandContext:
        sender = incoming.message.from_user
        assert sender is not None
        user = await platform_user(self.runtime.users, PLATFORM, sender.id)
        return CommandContext(
            self.runtime, self.bot, self.delivery, incoming.chat, incoming.key, user
        )

    async def _callback(self, query: CallbackQuery) -> str | None:
        message = query.message
        if message is None or not (query.data or "").startswith(PERSONA_DATA):
            await self.delivery.send("answerCallbackQuery", query.answer)
            return None
        if not self.access.allows(query.from_user.id, message.chat.id):
            await self.delivery.send(
                "answerCallbackQuery", lambda: query.answer("You are not let in.")
            )
            return "refused"
        chat = ChatRef(message.chat.id, None, message.chat.type == ChatType.PRIVATE)
        key = str(message.chat.id)
        if isinstance(message, Message):
            chat = ChatRef(message.chat.id, thread_of(message), chat.private)
            key = chat_key(message)
        user = await platform_user(self.runtime.users, PLATFORM, query.from_user.id)
        ctx = CommandContext(self.runtime, self.bot, self.delivery, chat, key, user)
        await choose_persona(ctx, query.id, query.data or "", message.message_id)
        return "answered"

    def _persona(self, name: str | None) -> Persona:
        with contextlib.suppress(ConfigError):  # a persona file removed since it was chosen
            return self.runtime.persona(name)
        return self.runtime.persona(None)

    async def turn(self, incoming: Incoming) -> str:
        """Run one turn of the chat's persona and show it live (see the module's docstring)."""
        sender = incoming.message.from_user
        assert sender is not None
        store = self.runtime.users
        user = await platform_user(store, PLATFORM, sender.id)
        owner = user
        if not incoming.chat.private:
            owner = await platform_user(store, PLATFORM, incoming.message.chat.id)
        state = await chat_state(self.runtime, incoming.key)
        persona = self._persona(state.persona)
        conversation = conversation_key(owner.id, state.conversation_id)
        ask = Ask(persona, incoming.said.text, caller_for(user), conversation)
        try:
            events = await self.runtime.turns.stream(ask)
        except TurnRefused as refused:
            await self._say(incoming.chat, refusal_text(refused.refusal))
            return "refused"
        live = LiveAnswer(
            self.bot, incoming.chat, interval=self.interval, drafts=self.drafts, web=ask.web
        )
        try:
            async with contextlib.aclosing(events) as stream:
                await live.run(stream)
        except GLMError as exc:
            logger.warning(
                "request %s: the turn failed upstream (%s; upstream request id %s)",
                REQUEST_ID.get(),
                type(exc).__name__,
                exc.request_id or "-",
                extra={"request_id": REQUEST_ID.get(), "upstream_request_id": exc.request_id},
            )
            await live.fail(friendly_error(exc, self.offline))
            return "failed"
        return "answered"
