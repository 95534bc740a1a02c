"""Who may use a bot: allowlists of users, chats and groups, closed by default.

Anyone can find a bot and spend its owner's credit, so a message is let in only when its
sender is in the platform's allowed users, or its chat (a Telegram chat, a Discord channel) in
the allowed chats, or its group (a Discord guild) in the allowed groups; ``*`` lets anyone in.
A stranger gets :func:`stranger_text` (their own user id and how to be let in) and no model
call. The lists are comma-separated numeric ids in the platform's settings
(``TELEGRAM_ALLOWED_USERS``, ``DISCORD_ALLOWED_GUILDS``...), parsed by :func:`parse_ids`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ANYONE", "Access", "Names", "parse_ids", "stranger_text"]

ANYONE = "*"
"""An allowlist of ``*``: every user (or chat, or group) is let in."""


def parse_ids(text: str) -> frozenset[int] | None:
    """A comma-separated list of numeric ids as a set; ``None`` for ``*`` (anyone).

    Raises:
        ValueError: an entry is not a whole number, or ``*`` is mixed with ids.
    """
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if parts == [ANYONE]:
        return None
    ids = set()
    for part in parts:
        if not re.fullmatch(r"-?[0-9]{1,20}", part):
            raise ValueError("must be comma-separated numeric ids, or * for anyone")
        ids.add(int(part))
    return frozenset(ids)


@dataclass(frozen=True, slots=True)
class Access:
    """The allowlists (``None``: anyone; an empty set: nobody by that rule)."""

    users: frozenset[int] | None
    chats: frozenset[int] | None
    groups: frozenset[int] | None = frozenset()

    def allows(self, user_id: int | None, chat_id: int, group_id: int | None = None) -> bool:
        """True when the user, the chat they write in, or the chat's group is let in."""
        user_ok = self.users is None or (user_id is not None and user_id in self.users)
        group_ok = self.groups is None or (group_id is not None and group_id in self.groups)
        return user_ok or group_ok or self.chats is None or chat_id in self.chats

    @property
    def closed(self) -> bool:
        """True when nobody at all is let in (every list empty)."""
        return not (self.users is None or self.chats is None or self.groups is None) and not (
            self.users or self.chats or self.groups
        )


@dataclass(frozen=True, slots=True)
class Names:
    """How a platform names its people, chats and settings in a stranger's reply."""

    platform: str  # "Telegram"
    users: str  # "TELEGRAM_ALLOWED_USERS"
    chats: str  # "TELEGRAM_ALLOWED_CHATS"
    chat: str = "chat"  # what a chat is called there ("channel")


def stranger_text(names: Names, user_id: int | None, chat_id: int, private: bool) -> str:
    """The only answer a stranger gets."""
    lines = [
        "Sorry, this bot only answers the people its owner let in.",
        f"Your {names.platform} user id is {user_id}.",
        f"To be let in, ask the owner to add it to {names.users}",
    ]
    if not private:
        lines[-1] += f" (or this {names.chat}, {chat_id}, to {names.chats})"
    lines[-1] += "."
    return "\n".join(lines)
