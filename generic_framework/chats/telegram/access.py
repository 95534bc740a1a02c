"""Who may use the bot, which messages are meant for it, and which conversation they go to.

**Access** is closed by default: anyone can find a bot and spend its owner's credit. A
message is let in when its sender is in ``TELEGRAM_ALLOWED_USERS`` or its chat in
``TELEGRAM_ALLOWED_CHATS`` (``*``: anyone, any chat). A stranger gets :func:`stranger_text`,
their own user id and how to be let in, and no model call.

**Groups**: the bot answers only a message meant for it: one that mentions it (``@bot`` or a
text mention), replies to one of its messages, starts with a command (``/cmd`` or
``/cmd@thisbot``, not another bot's), or starts with ``//`` (a web search). The mention is
taken out of the text before the turn. In a private chat every message is meant for it.

**Conversations**: one per private chat, per group, and per forum topic: the chat key is
``"<chat_id>"``, or ``"<chat_id>:<topic_id>"`` in a forum topic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from telegram import Message, MessageEntity
from telegram.constants import ChatType

from generic_framework.core.persona import WEB_PREFIX

__all__ = ["Access", "Addressed", "addressed", "chat_key", "stranger_text", "thread_of"]

_COMMAND = re.compile(r"[A-Za-z0-9_]{1,32}")


@dataclass(frozen=True, slots=True)
class Access:
    """The allowlists (``None``: anyone)."""

    users: frozenset[int] | None
    chats: frozenset[int] | None

    def allows(self, user_id: int | None, chat_id: int) -> bool:
        """True when the user, or the chat they write in, is let in."""
        user_ok = self.users is None or (user_id is not None and user_id in self.users)
        return user_ok or self.chats is None or chat_id in self.chats


def stranger_text(user_id: int | None, chat_id: int, private: bool) -> str:
    """The only answer a stranger gets."""
    lines = [
        "Sorry, this bot only answers the people its owner let in.",
        f"Your Telegram user id is {user_id}.",
        "To be let in, ask the owner to add it to TELEGRAM_ALLOWED_USERS",
    ]
    if not private:
        lines[-1] += f" (or this chat, {chat_id}, to TELEGRAM_ALLOWED_CHATS)"
    lines[-1] += "."
    return "\n".join(lines)


def chat_key(message: Message) -> str:
    """The conversation key of ``message``'s chat (and forum topic)."""
    if message.is_topic_message and message.message_thread_id is not None:
        return f"{message.chat.id}:{message.message_thread_id}"
    return str(message.chat.id)


def thread_of(message: Message) -> int | None:
    """The forum topic to answer in, if any."""
    return message.message_thread_id if message.is_topic_message else None


@dataclass(frozen=True, slots=True)
class Addressed:
    """A message meant for the bot: its text without the mention, and its command if any.

    Attributes:
        text: the text (or caption) with the bot's mention taken out.
        command: the command's name without ``/`` and ``@bot`` (``persona``), or ``None``.
        argument: what follows the command.
    """

    text: str
    command: str | None = None
    argument: str = ""


def addressed(message: Message, bot_id: int, username: str) -> Addressed | None:
    """What ``message`` says to the bot, or ``None`` when it is not meant for it (a group
    message that neither mentions it, replies to it, names a command of it nor starts with
    ``//``)."""
    text = message.text or message.caption or ""
    entities = message.entities or message.caption_entities or ()
    command, argument, for_us = _command(text, entities, username)
    if command is not None:
        # Another bot's command (/help@other_bot) is not for this one.
        return Addressed(text, command, argument) if for_us else None
    meant = (
        message.chat.type == ChatType.PRIVATE
        or _mentions(text, entities, bot_id, username)
        or _replies_to(message, bot_id)
        or text.lstrip().startswith(WEB_PREFIX)
    )
    return Addressed(_without_mention(text, username)) if meant else None


def _command(
    text: str, entities: tuple[MessageEntity, ...] | list[MessageEntity], username: str
) -> tuple[str | None, str, bool]:
    """(name, argument, for this bot) of a command at the start of ``text``."""
    first = next((e for e in entities if e.type == MessageEntity.BOT_COMMAND), None)
    if first is None or first.offset != 0:
        return None, "", True
    word = text[first.offset : first.offset + first.length]
    name, _, target = word[1:].partition("@")
    if not _COMMAND.fullmatch(name):  # "//" starts a web search, never a command
        return None, "", True
    argument = text[first.offset + first.length :].strip()
    return name.lower(), argument, not target or target.lower() == username.lower()


def _mentions(
    text: str, entities: tuple[MessageEntity, ...] | list[MessageEntity], bot_id: int, name: str
) -> bool:
    for entity in entities:
        if entity.type == MessageEntity.MENTION:
            shown = text[entity.offset : entity.offset + entity.length]
            if shown.lower() == f"@{name.lower()}":
                return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
            return True
    return False


def _replies_to(message: Message, bot_id: int) -> bool:
    replied = message.reply_to_message
    if replied is None or replied.from_user is None:
        return False
    # In a forum every message of a topic "replies" to the topic's first message.
    if message.is_topic_message and replied.message_id == message.message_thread_id:
        return False
    return replied.from_user.id == bot_id


def _without_mention(text: str, username: str) -> str:
    return re.sub(rf"(?i)[ \t]*@{re.escape(username)}\b[,:]?[ \t]*", " ", text).strip()
