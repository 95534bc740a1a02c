"""Which Telegram messages are meant for the bot, and which conversation they go to.

**Access** is the neutral layer's (:mod:`generic_framework.chats.access`): a message is let in
when its sender is in ``TELEGRAM_ALLOWED_USERS`` or its chat in ``TELEGRAM_ALLOWED_CHATS``
(``*``: anyone, any chat); :data:`NAMES` words a stranger's reply.

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

from generic_framework.chats.access import Names
from generic_framework.core.persona import WEB_PREFIX

__all__ = ["NAMES", "Addressed", "addressed", "chat_key", "thread_of"]

_COMMAND = re.compile(r"[A-Za-z0-9_]{1,32}")


NAMES = Names("Telegram", "TELEGRAM_ALLOWED_USERS", "TELEGRAM_ALLOWED_CHATS")
"""How a stranger's reply names Telegram's settings."""


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
