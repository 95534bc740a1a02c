"""The store interface: :class:`ConversationStore` and what it hands out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from generic_framework.limits import check_conversation_id
from generic_framework.wire.messages import Message

__all__ = ["ConversationStore", "StoredMessage", "check_conversation_id"]


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored: its turn, the persona that answered, and when."""

    turn: int
    persona: str
    created_at: str
    message: Message


class ConversationStore(Protocol):
    """What the persona layer and the service need from a conversation store."""

    async def load(self, conversation_id: str, turns: int) -> list[Message]:
        """The messages of the last ``turns`` turns, oldest first (empty for a new id)."""
        ...

    async def append_turn(
        self, conversation_id: str, persona: str, messages: Sequence[Message]
    ) -> int:
        """Store one whole turn atomically; return its number (1 for the first)."""
        ...

    async def get(self, conversation_id: str) -> list[StoredMessage] | None:
        """Every stored message of a conversation, or ``None`` when it does not exist."""
        ...

    async def delete(self, conversation_id: str) -> bool:
        """Delete a conversation; True when it existed."""
        ...

    async def aclose(self) -> None:
        """Release the store's connections."""
        ...
