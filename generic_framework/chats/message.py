"""What a chat platform hands the neutral layer: one incoming message, and where it was said.

A platform turns its own update (a Telegram ``Message``, a Discord ``MESSAGE_CREATE``) into an
:class:`Incoming` once it has decided the message is meant for the bot; everything after that
(access, commands, the turn, the live answer) reads only these types. Ids are the platform's
own numbers (Telegram's and Discord's are both integers).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["Attachment", "ChatRef", "Incoming"]


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where an answer goes: the chat (a Telegram chat, a Discord channel), its thread (a
    forum topic) if the platform needs it named, and whether it is a private chat."""

    chat_id: int
    thread_id: int | None = None
    private: bool = False


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with a message (a photo, a document).

    Attributes:
        id: the platform's id of the file.
        mime: its media type when the platform says (``image/jpeg``), else ``None``.
        size: its size in bytes when known.
        name: its file name when known.
        fetch: downloads its bytes through the platform's file API.
    """

    id: str
    mime: str | None
    size: int | None
    name: str | None
    fetch: Callable[[], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class Incoming:
    """A message meant for the bot.

    Attributes:
        platform: the platform's name (``telegram``), as in user names and chat states.
        sender: the sender's user id.
        chat: where it was said (and the answer goes).
        key: its conversation key: one conversation per private chat, group chat and thread.
        text: its text (or caption) with the bot's mention taken out.
        command: a command's name without ``/`` (``persona``), or ``None``.
        argument: what follows the command.
        group: the group the chat belongs to (a Discord guild), or ``None``.
        mentions: the user ids it mentions.
        reply_to: the id of the message it replies to, if any.
        attachments: the files sent with it.
        message_id: its own id.
    """

    platform: str
    sender: int
    chat: ChatRef
    key: str
    text: str
    command: str | None = None
    argument: str = ""
    group: int | None = None
    mentions: tuple[int, ...] = ()
    reply_to: int | None = None
    attachments: tuple[Attachment, ...] = ()
    message_id: int | None = None
