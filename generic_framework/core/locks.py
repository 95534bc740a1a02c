"""One turn at a time per conversation: FIFO locks keyed by conversation id.

The :class:`~generic_framework.runtime.Runtime` owns one :class:`ConversationLocks`; every persona
bound to it takes the conversation's lock for the whole turn (load history, run the loop, store),
and the service takes the same lock before deleting a conversation. Turns on one conversation
therefore queue in arrival order (``asyncio.Lock`` is FIFO), across every persona, each seeing
the turn before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

__all__ = ["ConversationLocks"]

_NO_LOCK: AbstractAsyncContextManager[None] = nullcontext()
"""What a turn without a conversation holds: nothing (no generator made per turn)."""


class ConversationLocks:
    """One FIFO lock per conversation id, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._locks)

    def hold(self, conversation_id: str | None) -> AbstractAsyncContextManager[None]:
        """Hold the conversation's lock for the block; no lock when the id is None."""
        if conversation_id is None:
            return _NO_LOCK
        return self._hold(conversation_id)

    @asynccontextmanager
    async def _hold(self, conversation_id: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(conversation_id, asyncio.Lock())
        self._users[conversation_id] = self._users.get(conversation_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[conversation_id] -= 1
            if not self._users[conversation_id]:
                del self._users[conversation_id], self._locks[conversation_id]
