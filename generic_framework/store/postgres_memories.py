"""The PostgreSQL store's kept facts (:mod:`~generic_framework.store.memories`).

A mixin of :class:`~generic_framework.store.postgres.PostgresStore`, on its pooled
connections (``_connection``). :meth:`PostgresMemories.remember` runs in one transaction that
first takes the transaction-scoped advisory lock of the user and persona, then counts and
inserts: replicas remembering for the same user and persona at the same moment queue on the
lock, so ``max_items`` is never overshot (a plain count-then-insert under READ COMMITTED
would let two of them both see room for the last fact).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from generic_framework.limits import check_persona_name
from generic_framework.store.memories import (
    Memory,
    check_fact,
    check_max_items,
    check_memory,
    check_memory_id,
    memory_full,
    new_memory_id,
)
from generic_framework.store.postgres_rows import as_time
from generic_framework.store.postgres_schema import advisory_key

__all__ = ["PostgresMemories"]


def _memory(row: Any) -> Memory:
    return Memory(row[0], row[1], row[2], row[3], _iso(row[4]))


def _iso(value: datetime) -> str:
    """A fact's time, to the microsecond (the order of facts kept within one millisecond)."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


class PostgresMemories:
    """Kept facts in the store's database."""

    def _connection(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError  # the store's: a pooled connection

    async def remember(self, user_id: str, persona: str, text: str, *, max_items: int) -> Memory:
        """Keep a fact (:class:`~.memories.MemoryStore`), within ``max_items`` atomically
        across replicas."""
        fact = check_fact(text)
        check_persona_name(persona)
        check_max_items(max_items)
        async with self._connection() as conn, conn.transaction():
            lock = advisory_key("memory", f"{user_id}\x1f{persona}")
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
            cursor = await conn.execute(
                "SELECT id, user_id, persona, text, created_at FROM memories"
                " WHERE user_id = %s AND persona = %s"
                " AND text = %s",
                (user_id, persona, fact),
            )
            row = await cursor.fetchone()
            if row is not None:
                return _memory(row)
            cursor = await conn.execute(
                "SELECT count(*) FROM memories WHERE user_id = %s AND persona = %s",
                (user_id, persona),
            )
            (count,) = await cursor.fetchone()
            if count >= max_items:
                raise memory_full(max_items)
            cursor = await conn.execute(
                "INSERT INTO memories (id, user_id, persona, text) VALUES (%s, %s, %s, %s)"
                " RETURNING id, user_id, persona, text, created_at",
                (new_memory_id(), user_id, persona, fact),
            )
            return _memory(await cursor.fetchone())

    async def memories(self, user_id: str, persona: str | None = None) -> list[Memory]:
        """The user's facts (for one persona, or all), newest first."""
        async with self._connection() as conn:
            if persona is None:
                cursor = await conn.execute(
                    "SELECT id, user_id, persona, text, created_at FROM memories"
                    ' WHERE user_id = %s ORDER BY created_at DESC, id COLLATE "C" DESC',
                    (user_id,),
                )
            else:
                cursor = await conn.execute(
                    "SELECT id, user_id, persona, text, created_at FROM memories"
                    " WHERE user_id = %s AND persona = %s"
                    ' ORDER BY created_at DESC, id COLLATE "C" DESC',
                    (user_id, persona),
                )
            return [_memory(row) for row in await cursor.fetchall()]

    async def forget(
        self, user_id: str | None, memory_id: str, *, persona: str | None = None
    ) -> Memory | None:
        """Erase one fact of the user (``None``: anyone's) and ``persona`` (when given); the
        fact erased, or ``None``."""
        check_memory_id(memory_id)
        async with self._connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM memories WHERE id = %s"
                " AND (%s::text IS NULL OR user_id = %s)"
                " AND (%s::text IS NULL OR persona = %s)"
                " RETURNING id, user_id, persona, text, created_at",
                (memory_id, user_id, user_id, persona, persona),
            )
            row = await cursor.fetchone()
        return _memory(row) if row is not None else None

    async def forget_all(self, user_id: str, persona: str) -> int:
        """Erase every fact the user keeps for the persona; how many."""
        async with self._connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM memories WHERE user_id = %s AND persona = %s", (user_id, persona)
            )
            return int(cursor.rowcount)

    async def dump_memories(self) -> tuple[Memory, ...]:
        """Every fact, oldest first (:class:`~.memories.MemoryAdmin`)."""
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT id, user_id, persona, text, created_at FROM memories"
                ' ORDER BY created_at, id COLLATE "C"'
            )
            return tuple(_memory(row) for row in await cursor.fetchall())

    async def restore_memories(self, memories: tuple[Memory, ...]) -> int:
        """Add the facts this database lacks (of the users it has), in one transaction; how
        many were added."""
        for memory in memories:
            check_memory(memory)
        added = 0
        async with self._connection() as conn, conn.transaction():
            for m in memories:
                cursor = await conn.execute(
                    "INSERT INTO memories (id, user_id, persona, text, created_at)"
                    " SELECT %s, %s, %s, %s, %s"
                    " WHERE EXISTS (SELECT 1 FROM users WHERE id = %s) ON CONFLICT DO NOTHING",
                    (m.id, m.user_id, m.persona, m.text, as_time(m.created_at), m.user_id),
                )
                added += int(cursor.rowcount)
        return added
