"""Chat platforms' state in the store: which conversation each chat is in, and updates claimed.

A chat platform (Telegram first) reaches the personas through chats, not conversation ids:

- **One conversation per chat.** A private chat, a group and a forum topic each carry on one
  conversation; :class:`ChatState` records which one (and the persona the chat chose), keyed by
  the platform and the platform's chat key (Telegram: ``"<chat_id>"`` or
  ``"<chat_id>:<topic_id>"``). ``/new`` starts a fresh conversation by setting a new id: the
  old one stays stored, the chat simply stops adding to it.
- **Each update answered once.** A platform redelivers an update it thinks was not received
  (Telegram: a webhook not acknowledged in time, perhaps to another replica behind a load
  balancer). :meth:`ChatStore.claim_update` records the update's id atomically in the shared
  store; only the first claim is True, so exactly one process answers it. Claims are kept
  :data:`UPDATE_KEEP_SECONDS` (Telegram keeps an update for at most a day) and then purged.

The state lives in the conversation store, so every replica sharing a database sees it and
``db backup``/``restore``/``copy`` carry it (the claims, short-lived, stay behind).
:class:`ChatStore` is what both backends implement (docs/design/0323).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from generic_framework.limits import check_persona_name
from generic_framework.store.users import check_conversation_key

__all__ = [
    "CHAT_KEY_PATTERN",
    "PLATFORM_PATTERN",
    "UPDATE_ID_MAX",
    "UPDATE_KEEP_SECONDS",
    "ChatAdmin",
    "ChatState",
    "ChatStateRow",
    "ChatStore",
    "check_chat_key",
    "check_platform",
    "check_update_id",
]

UPDATE_KEEP_SECONDS = 2 * 86_400.0
"""How long a claimed update is remembered: two days, twice the day Telegram keeps one."""
PLATFORM_PATTERN = r"^[a-z][a-z0-9]{0,31}$"
"""A platform's name: a short lowercase word (``telegram``, ``discord``, ``matrix``)."""
CHAT_KEY_PATTERN = r"^[-0-9:A-Za-z]{1,128}$"
"""A chat key: letters, digits, ``-`` and ``:`` (Telegram's ``-1001234567890:42``)."""
UPDATE_ID_MAX = 2**63 - 1
"""The largest update id (what both backends' columns hold)."""
_PLATFORM = re.compile(PLATFORM_PATTERN)
_CHAT_KEY = re.compile(CHAT_KEY_PATTERN)


def check_platform(platform: str) -> str:
    """``platform`` if it is a platform's name (:data:`PLATFORM_PATTERN`).

    Raises:
        ValueError: anything else.
    """
    if not isinstance(platform, str) or not _PLATFORM.fullmatch(platform):
        raise ValueError(
            "a chat platform is 1-32 lowercase letters or digits, starting with a letter"
        )
    return platform


def check_chat_key(chat: str) -> str:
    """``chat`` if it is a chat key (:data:`CHAT_KEY_PATTERN`).

    Raises:
        ValueError: anything else.
    """
    if not isinstance(chat, str) or not _CHAT_KEY.fullmatch(chat):
        raise ValueError("a chat key is 1-128 letters, digits, '-' or ':'")
    return chat


def check_update_id(update_id: int) -> int:
    """``update_id`` if it is an update id: an integer from 0 to :data:`UPDATE_ID_MAX`.

    Raises:
        ValueError: anything else (a bool too).
    """
    if isinstance(update_id, bool) or not isinstance(update_id, int):
        raise ValueError("an update id is an integer")
    if not 0 <= update_id <= UPDATE_ID_MAX:
        raise ValueError(f"an update id is from 0 to {UPDATE_ID_MAX}")
    return update_id


@dataclass(frozen=True, slots=True)
class ChatState:
    """Where a chat stands.

    Attributes:
        conversation_id: the chat's current conversation (a conversation id, or a user's
            conversation key); ``/new`` replaces it with a fresh one.
        persona: the persona chosen with ``/persona``; ``None`` for the default.

    Raises:
        ValueError: the id or the persona name is not valid.
    """

    conversation_id: str
    persona: str | None = None

    def __post_init__(self) -> None:
        check_conversation_key(self.conversation_id)
        if self.persona is not None:
            check_persona_name(self.persona)


@dataclass(frozen=True, slots=True)
class ChatStateRow:
    """A stored chat state with its keys and time, as ``db copy`` moves it."""

    platform: str
    chat: str
    state: ChatState
    updated_at: str
    """ISO 8601 with a UTC offset."""


class ChatStore(Protocol):
    """The chats of the chat platforms (both backends)."""

    async def chat_state(self, platform: str, chat: str) -> ChatState | None:
        """The chat's state, or ``None`` for a chat never seen (it starts a conversation)."""
        ...

    async def set_chat_state(self, platform: str, chat: str, state: ChatState) -> None:
        """Record the chat's state (replacing what it was)."""
        ...

    async def claim_update(self, platform: str, update_id: int) -> bool:
        """True the first time (platform, update_id) is claimed by any process sharing the
        store, False after; rows older than UPDATE_KEEP_SECONDS (2 days) are purged."""
        ...


class ChatAdmin(Protocol):
    """Every chat state at once, for ``db copy``, ``db backup`` and ``db restore``."""

    async def dump_chat_states(self) -> tuple[ChatStateRow, ...]:
        """Every chat state, by platform and chat."""
        ...

    async def restore_chat_states(self, rows: tuple[ChatStateRow, ...]) -> int:
        """Add the chat states this store lacks (by platform and chat; one it has stays as
        it is); how many were added."""
        ...
