"""The SQLite store's kept facts (:mod:`~generic_framework.store.memories`).

A mixin of :class:`~generic_framework.store.sqlite.SQLiteStore`: every operation runs in the
store's worker thread on its one connection (``_call``). :meth:`SQLiteMemories.remember`
counts and inserts in one ``BEGIN IMMEDIATE`` transaction: processes sharing the file take the
write lock one at a time, so no two of them both see room for the last fact.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

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
from generic_framework.store.sqlite_keys import write_one

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SQLiteMemories"]

_T = TypeVar("_T")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _remember(
    db: sqlite3.Connection, user_id: str, persona: str, text: str, max_items: int
) -> Memory:
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute(
            "SELECT id, user_id, persona, text, created_at FROM memories"
            " WHERE user_id = ? AND persona = ? AND text = ?",
            (user_id, persona, text),
        ).fetchone()
        if row is not None:
            db.execute("COMMIT")
            return Memory(*row)
        (count,) = db.execute(
            "SELECT count(*) FROM memories WHERE user_id = ? AND persona = ?", (user_id, persona)
        ).fetchone()
        if count >= max_items:
            raise memory_full(max_items)
        memory = Memory(new_memory_id(), user_id, persona, text, _now())
        db.execute(
            "INSERT INTO memories (id, user_id, persona, text, created_at) VALUES (?, ?, ?, ?, ?)",
            (memory.id, user_id, persona, text, memory.created_at),
        )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return memory


def _list(db: sqlite3.Connection, user_id: str, persona: str | None) -> list[Memory]:
    if persona is None:
        rows = db.execute(
            "SELECT id, user_id, persona, text, created_at FROM memories"
            " WHERE user_id = ? ORDER BY created_at DESC, id DESC",
            (user_id,),
        )
    else:
        rows = db.execute(
            "SELECT id, user_id, persona, text, created_at FROM memories"
            " WHERE user_id = ? AND persona = ? ORDER BY created_at DESC, id DESC",
            (user_id, persona),
        )
    return [Memory(*row) for row in rows]


def _forget(
    db: sqlite3.Connection, user_id: str | None, memory_id: str, persona: str | None
) -> Memory | None:
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute(
            "SELECT id, user_id, persona, text, created_at FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        if row is None or user_id not in (None, row[1]) or persona not in (None, row[2]):
            db.execute("COMMIT")
            return None
        db.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return Memory(*row)


def _dump(db: sqlite3.Connection) -> tuple[Memory, ...]:
    rows = db.execute(
        "SELECT id, user_id, persona, text, created_at FROM memories ORDER BY created_at, id"
    )
    return tuple(Memory(*row) for row in rows)


def _restore(db: sqlite3.Connection, memories: tuple[Memory, ...]) -> int:
    db.execute("BEGIN IMMEDIATE")
    try:
        added = sum(
            db.execute(
                "INSERT INTO memories (id, user_id, persona, text, created_at) SELECT ?, ?, ?, ?, ?"
                " WHERE EXISTS (SELECT 1 FROM users WHERE id = ?) ON CONFLICT DO NOTHING",
                (m.id, m.user_id, m.persona, m.text, m.created_at, m.user_id),
            ).rowcount
            for m in memories
        )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return int(added)


class SQLiteMemories:
    """Kept facts in the store's SQLite file."""

    async def _call(self, operation: Callable[..., _T], *args: object) -> _T:
        raise NotImplementedError  # the store's: run in its worker thread

    async def remember(self, user_id: str, persona: str, text: str, *, max_items: int) -> Memory:
        """Keep a fact (:class:`~.memories.MemoryStore`), within ``max_items`` atomically."""
        fact = check_fact(text)
        check_persona_name(persona)
        check_max_items(max_items)
        return await self._call(_remember, user_id, persona, fact, max_items)

    async def memories(self, user_id: str, persona: str | None = None) -> list[Memory]:
        """The user's facts (for one persona, or all), newest first."""
        return await self._call(_list, user_id, persona)

    async def forget(
        self, user_id: str | None, memory_id: str, *, persona: str | None = None
    ) -> Memory | None:
        """Erase one fact of the user (``None``: anyone's) and ``persona`` (when given); the
        fact erased, or ``None``."""
        return await self._call(_forget, user_id, check_memory_id(memory_id), persona)

    async def forget_all(self, user_id: str, persona: str) -> int:
        """Erase every fact the user keeps for the persona; how many."""
        sql = "DELETE FROM memories WHERE user_id = ? AND persona = ?"
        return await self._call(write_one, sql, (user_id, persona))

    async def dump_memories(self) -> tuple[Memory, ...]:
        """Every fact, oldest first (:class:`~.memories.MemoryAdmin`)."""
        return await self._call(_dump)

    async def restore_memories(self, memories: tuple[Memory, ...]) -> int:
        """Add the facts this file lacks (of the users it has); how many were added."""
        for memory in memories:
            check_memory(memory)
        return await self._call(_restore, memories)
