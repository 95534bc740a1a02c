"""The PostgreSQL store's chat states and claimed updates (:mod:`~generic_framework.store.chats`).

A mixin of :class:`~generic_framework.store.postgres.PostgresStore`, on its pooled connections
(``_connection``; the pool commits each one's transaction when it comes back). A claim is one
``INSERT ... ON CONFLICT DO NOTHING`` in its own short transaction: the primary key makes
concurrent inserts of one update id from any number of replicas wait on each other, and
exactly one of them inserts a row (row count 1); no advisory lock is needed. Claim times use
the server's clock, which every replica shares; claims older than
:data:`~.chats.UPDATE_KEEP_SECONDS` are purged by a claim at most every
:data:`~.keys.PURGE_EVERY` seconds per process, one indexed ``DELETE``.
"""

from __future__ import annotations

import time
from contextlib import AbstractAsyncContextManager
from typing import Any

from generic_framework.store.chats import (
    UPDATE_KEEP_SECONDS,
    ChatState,
    ChatStateRow,
    check_chat_key,
    check_platform,
    check_update_id,
)
from generic_framework.store.keys import PURGE_EVERY
from generic_framework.store.postgres_rows import as_time, iso

__all__ = ["PostgresChats", "purge_updates"]


async def purge_updates(conn: Any, keep: float = UPDATE_KEEP_SECONDS) -> int:
    """Forget the updates claimed more than ``keep`` seconds ago; how many."""
    cursor = await conn.execute(
        "DELETE FROM claimed_updates WHERE claimed_at < now() - make_interval(secs => %s)",
        (keep,),
    )
    return int(cursor.rowcount)


class PostgresChats:
    """Chat states and claimed updates in the store's database."""

    _next_update_purge = 0.0  # time.monotonic() of the next purge of old claims

    def _connection(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError  # the store's: a pooled connection

    async def chat_state(self, platform: str, chat: str) -> ChatState | None:
        """The chat's state (:class:`~.chats.ChatStore`), or ``None`` for a new chat."""
        check_platform(platform)
        check_chat_key(chat)
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT conversation_id, persona FROM chat_state WHERE platform = %s AND chat = %s",
                (platform, chat),
            )
            row = await cursor.fetchone()
        return ChatState(row[0], row[1]) if row else None

    async def set_chat_state(self, platform: str, chat: str, state: ChatState) -> None:
        """Record the chat's state, replacing what it was."""
        check_platform(platform)
        check_chat_key(chat)
        async with self._connection() as conn:
            await conn.execute(
                "INSERT INTO chat_state (platform, chat, conversation_id, persona)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (platform, chat) DO UPDATE SET"
                " conversation_id = excluded.conversation_id, persona = excluded.persona,"
                " updated_at = now()",
                (platform, chat, state.conversation_id, state.persona),
            )

    async def claim_update(self, platform: str, update_id: int) -> bool:
        """True for the first claim of the update by any replica; old claims are purged
        first when a purge is due."""
        check_platform(platform)
        check_update_id(update_id)
        if time.monotonic() >= self._next_update_purge:
            self._next_update_purge = time.monotonic() + PURGE_EVERY
            async with self._connection() as conn:
                await purge_updates(conn)
        async with self._connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO claimed_updates (platform, update_id) VALUES (%s, %s)"
                " ON CONFLICT (platform, update_id) DO NOTHING",
                (platform, update_id),
            )
            return bool(cursor.rowcount == 1)

    async def dump_chat_states(self) -> tuple[ChatStateRow, ...]:
        """Every chat state (:class:`~.chats.ChatAdmin`)."""
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT platform, chat, conversation_id, persona, updated_at FROM chat_state"
                ' ORDER BY platform COLLATE "C", chat COLLATE "C"'
            )
            rows = await cursor.fetchall()
        return tuple(ChatStateRow(r[0], r[1], ChatState(r[2], r[3]), iso(r[4])) for r in rows)

    async def restore_chat_states(self, rows: tuple[ChatStateRow, ...]) -> int:
        """Add the chat states this database lacks, in one transaction; how many were added."""
        added = 0
        async with self._connection() as conn, conn.transaction():
            for r in rows:
                check_platform(r.platform)
                check_chat_key(r.chat)
                cursor = await conn.execute(
                    "INSERT INTO chat_state (platform, chat, conversation_id, persona,"
                    " updated_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (r.platform, r.chat, r.state.conversation_id, r.state.persona,
                     as_time(r.updated_at)),
                )  # fmt: skip
                added += int(cursor.rowcount)
        return added
