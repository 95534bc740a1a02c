"""The SQLite store's chat states and claimed updates (:mod:`~generic_framework.store.chats`).

A mixin of :class:`~generic_framework.store.sqlite.SQLiteStore`: every operation runs in the
store's worker thread on its one connection (``_call``), each change in one short ``BEGIN
IMMEDIATE`` transaction. A claim is one ``INSERT ... ON CONFLICT DO NOTHING`` whose row count
says whether it was the first: processes sharing the file take the write lock one at a time,
so exactly one of them inserts the row. Claim times are seconds since 1970 from this machine's
clock (every process on one SQLite file shares it); claims older than
:data:`~.chats.UPDATE_KEEP_SECONDS` are purged by a claim at most every
:data:`~.keys.PURGE_EVERY` seconds, one indexed ``DELETE``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from generic_framework.store.chats import (
    UPDATE_KEEP_SECONDS,
    ChatState,
    ChatStateRow,
    check_chat_key,
    check_platform,
    check_update_id,
)
from generic_framework.store.keys import PURGE_EVERY
from generic_framework.store.sqlite_keys import write_one

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SQLiteChats", "purge_updates"]

_T = TypeVar("_T")


def purge_updates(db: sqlite3.Connection, keep: float = UPDATE_KEEP_SECONDS) -> int:
    """Forget the updates claimed more than ``keep`` seconds ago; how many."""
    return write_one(db, "DELETE FROM claimed_updates WHERE claimed_at < ?", (time.time() - keep,))


def _claim(db: sqlite3.Connection, platform: str, update_id: int) -> bool:
    sql = (
        "INSERT INTO claimed_updates (platform, update_id, claimed_at) VALUES (?, ?, ?)"
        " ON CONFLICT (platform, update_id) DO NOTHING"
    )
    return write_one(db, sql, (platform, update_id, time.time())) == 1


def _set(db: sqlite3.Connection, platform: str, chat: str, state: ChatState) -> None:
    sql = (
        "INSERT INTO chat_state (platform, chat, conversation_id, persona, updated_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (platform, chat) DO UPDATE SET"
        " conversation_id = excluded.conversation_id, persona = excluded.persona,"
        " updated_at = excluded.updated_at"
    )
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    write_one(db, sql, (platform, chat, state.conversation_id, state.persona, now))


def _get(db: sqlite3.Connection, platform: str, chat: str) -> ChatState | None:
    row = db.execute(
        "SELECT conversation_id, persona FROM chat_state WHERE platform = ? AND chat = ?",
        (platform, chat),
    ).fetchone()
    return ChatState(row[0], row[1]) if row else None


def _dump(db: sqlite3.Connection) -> tuple[ChatStateRow, ...]:
    rows = db.execute(
        "SELECT platform, chat, conversation_id, persona, updated_at FROM chat_state"
        " ORDER BY platform, chat"
    )
    return tuple(ChatStateRow(r[0], r[1], ChatState(r[2], r[3]), r[4]) for r in rows)


def _restore(db: sqlite3.Connection, rows: tuple[ChatStateRow, ...]) -> int:
    db.execute("BEGIN IMMEDIATE")
    try:
        added = sum(
            db.execute(
                "INSERT INTO chat_state (platform, chat, conversation_id, persona, updated_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (r.platform, r.chat, r.state.conversation_id, r.state.persona, r.updated_at),
            ).rowcount
            for r in rows
        )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return int(added)


class SQLiteChats:
    """Chat states and claimed updates in the store's SQLite file."""

    _next_update_purge = 0.0  # time.monotonic() of the next purge of old claims

    async def _call(self, operation: Callable[..., _T], *args: object) -> _T:
        raise NotImplementedError  # the store's: run in its worker thread

    async def chat_state(self, platform: str, chat: str) -> ChatState | None:
        """The chat's state (:class:`~.chats.ChatStore`), or ``None`` for a new chat."""
        return await self._call(_get, check_platform(platform), check_chat_key(chat))

    async def set_chat_state(self, platform: str, chat: str, state: ChatState) -> None:
        """Record the chat's state, replacing what it was."""
        await self._call(_set, check_platform(platform), check_chat_key(chat), state)

    async def claim_update(self, platform: str, update_id: int) -> bool:
        """True for the first claim of the update by any process on this file; old claims
        are purged first when a purge is due."""
        check_platform(platform)
        check_update_id(update_id)
        if time.monotonic() >= self._next_update_purge:
            self._next_update_purge = time.monotonic() + PURGE_EVERY
            await self._call(purge_updates)
        return await self._call(_claim, platform, update_id)

    async def dump_chat_states(self) -> tuple[ChatStateRow, ...]:
        """Every chat state (:class:`~.chats.ChatAdmin`)."""
        return await self._call(_dump)

    async def restore_chat_states(self, rows: tuple[ChatStateRow, ...]) -> int:
        """Add the chat states this file lacks; how many were added."""
        for row in rows:
            check_platform(row.platform)
            check_chat_key(row.chat)
        return await self._call(_restore, rows)
