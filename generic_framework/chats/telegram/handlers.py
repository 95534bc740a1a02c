"""One Telegram update, from its message to the neutral layer's answer.

:meth:`Handlers.handle` answers one update and says how it went (an outcome of the
``generic_framework_telegram_updates_total`` metric, ``None`` for an update that needed no
answer). A callback query (a persona button) is answered here; a message not meant for the
bot (a group message that does not address it) is left alone; any other message becomes an
:class:`~generic_framework.chats.message.Incoming` (its files as attachments, downloaded
through the Bot API's ``getFile``) for the :class:`~generic_framework.chats.answering.Answerer`:
a stranger's reply, "text only" for a message with a file or without text, a command, a turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from telegram import Bot, CallbackQuery, Message, Update
from telegram.constants import ChatType

from generic_framework.chats.access import Access
from generic_framework.chats.answering import SORRY, Answerer, Outcome
from generic_framework.chats.commands import CommandRegistry, set_persona
from generic_framework.chats.message import Attachment, ChatRef, Incoming
from generic_framework.chats.telegram.access import NAMES, addressed, chat_key, thread_of
from generic_framework.chats.telegram.delivery import Delivery
from generic_framework.chats.telegram.surface import PERSONA_DATA, Drafts, TelegramSurface
from generic_framework.runtime import Runtime

__all__ = ["PLATFORM", "Handlers", "attachments_of"]

PLATFORM = "telegram"
"""The platform's name in the store (chat states, claimed updates, user names)."""


def attachments_of(
    bot: Bot, message: Message, max_bytes: int | None = None
) -> tuple[Attachment, ...]:
    """The files of ``message`` (a photo's largest size, within ``max_bytes`` when given: the
    largest Telegram offers that the bot may send; a document, a voice message...)."""

    def fetcher(file_id: str) -> Callable[[], Awaitable[bytes]]:
        async def fetch() -> bytes:
            file = await bot.get_file(file_id)
            return bytes(await file.download_as_bytearray())

        return fetch

    found: list[Attachment] = []
    if message.photo:
        sizes = sorted(message.photo, key=lambda s: s.file_size or s.width * s.height)
        fits = [s for s in sizes if max_bytes is None or (s.file_size or 0) <= max_bytes]
        size = (fits or sizes)[-1]
        found.append(
            Attachment(size.file_id, "image/jpeg", size.file_size, None, fetcher(size.file_id))
        )
    for item in (message.document, message.audio, message.voice, message.video, message.sticker):
        if item is not None:
            mime = getattr(item, "mime_type", None)
            name = getattr(item, "file_name", None)
            found.append(
                Attachment(item.file_id, mime, item.file_size, name, fetcher(item.file_id))
            )
    return tuple(found)


class Handlers:
    """Answers updates for one bot over one runtime (see the module's docstring).

    Args:
        runtime: the personas, the store, the locks.
        bot: the Bot API client (initialised: its id and username are known).
        access: the allowlists.
        interval: ``TELEGRAM_EDIT_INTERVAL``.
        offline: answers come from the embedded mock (said when a turn fails).
        commands: the commands (the built-in ones when omitted).
    """

    def __init__(
        self,
        runtime: Runtime,
        bot: Bot,
        access: Access,
        *,
        interval: float,
        offline: bool,
        commands: CommandRegistry | None = None,
    ) -> None:
        self.runtime, self.bot = runtime, bot
        self.answerer = Answerer(
            runtime,
            PLATFORM,
            access,
            NAMES,
            interval=interval,
            offline=offline,
            commands=commands,
            request_prefix="tg",
        )
        self.delivery = Delivery()
        self.drafts = Drafts()

    def surface(self, chat: ChatRef) -> TelegramSurface:
        """The chat as a surface (its own 429 pause)."""
        return TelegramSurface(self.bot, chat, drafts=self.drafts)

    async def handle(self, update: Update) -> Outcome:
        """Answer ``update``; its outcome (``answered``, ``refused``), ``None`` if ignored."""
        if update.callback_query is not None:
            return await self.callback(update.callback_query)
        message = update.message
        if message is None or message.from_user is None:
            return None  # an edited message, a channel post: never asked for
        said = addressed(message, self.bot.id, self.bot.username)
        if said is None:
            return None
        private = message.chat.type == ChatType.PRIVATE
        chat = ChatRef(message.chat.id, thread_of(message), private)
        files = attachments_of(self.bot, message, self.runtime.settings.bot_max_image_bytes)
        replied = message.reply_to_message
        incoming = Incoming(
            PLATFORM,
            message.from_user.id,
            chat,
            chat_key(message),
            said.text,
            said.command,
            said.argument,
            reply_to=replied.message_id if replied is not None else None,
            attachments=files,
            message_id=message.message_id,
        )
        return await self.answerer.answer(incoming, self.surface(chat))

    async def apologise(self, update: Update) -> None:
        """Tell the chat an update could not be answered (after a fault of the bot's own)."""
        message = update.effective_message
        if message is not None and update.callback_query is None:
            await self.surface(ChatRef(message.chat.id, thread_of(message))).say(SORRY)

    async def callback(self, query: CallbackQuery) -> Outcome:
        """A button was pressed: a persona button sets the chat's persona."""
        message = query.message
        if message is None or not (query.data or "").startswith(PERSONA_DATA):
            await self.delivery.send("answerCallbackQuery", query.answer)
            return None
        if not self.answerer.access.allows(query.from_user.id, message.chat.id):
            await self.delivery.send(
                "answerCallbackQuery", lambda: query.answer("You are not let in.")
            )
            return "refused"
        chat = ChatRef(message.chat.id, None, message.chat.type == ChatType.PRIVATE)
        key = str(message.chat.id)
        if isinstance(message, Message):
            chat = ChatRef(message.chat.id, thread_of(message), chat.private)
            key = chat_key(message)
        name = (query.data or "").removeprefix(PERSONA_DATA)
        known = await set_persona(self.runtime, PLATFORM, key, name)
        note = f"{name} answers from now on." if known else f"There is no persona named {name!r}."
        await self.delivery.send("answerCallbackQuery", lambda: query.answer(text=note))
        await self.delivery.send(
            "editMessageText",
            lambda: self.bot.edit_message_text(
                note, chat_id=chat.chat_id, message_id=message.message_id
            ),
        )
        return "answered"
