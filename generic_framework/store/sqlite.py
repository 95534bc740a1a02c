"""The SQLite conversation store: whole turns in one file (``DATA_DIR/conversations.sqlite3``).

- **Whole turns only.** :meth:`SQLiteStore.append_turn` writes a turn's messages (user
  message, assistant tool calls, tool answers, final answer) in one ``BEGIN IMMEDIATE``
  transaction, after the turn completed; a failed turn writes nothing, so a stored history never
  ends in an unanswered tool call.
- **Across processes** sharing the file, ``BEGIN IMMEDIATE`` (plus WAL and a busy timeout) makes
  each turn's write atomic and numbers turns without gaps or duplicates. Turns on one
  conversation are serialised within a process by the Runtime's locks; two processes answering
  the same conversation at the same moment would each see the history without the other's turn.
- **Schema changes** are an ordered list of small functions, :data:`MIGRATIONS`; ``PRAGMA
  user_version`` records how many have run.
- **Off the event loop.** Every operation runs in a worker thread
  (:class:`~generic_framework.offload.Offload`, which lets the loop wait up to a millisecond for
  the usual quick statement instead of paying for a full trip through the event loop): a commit
  waits for the disk, which can take milliseconds. One connection per store, guarded by a thread
  lock, serves all threads.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter

from generic_framework.offload import Offload
from generic_framework.store.base import StoredMessage, check_conversation_id
from generic_framework.wire.errors import ConfigError
from generic_framework.wire.messages import Message

__all__ = ["MIGRATIONS", "SQLiteStore"]

_T = TypeVar("_T")
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_BUSY_TIMEOUT_MS = 10_000


def _m001_tables(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE conversations ("
        " id TEXT PRIMARY KEY, turns INTEGER NOT NULL DEFAULT 0,"
        " created_at TEXT NOT NULL, updated_at TEXT NOT NULL)"
    )
    db.execute(
        "CREATE TABLE turns ("
        " conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
        " turn INTEGER NOT NULL, persona TEXT NOT NULL, created_at TEXT NOT NULL,"
        " PRIMARY KEY (conversation_id, turn)) WITHOUT ROWID"
    )
    db.execute(
        "CREATE TABLE messages ("
        " conversation_id TEXT NOT NULL, turn INTEGER NOT NULL, seq INTEGER NOT NULL,"
        " role TEXT NOT NULL, body TEXT NOT NULL,"
        " PRIMARY KEY (conversation_id, turn, seq),"
        " FOREIGN KEY (conversation_id, turn) REFERENCES turns(conversation_id, turn)"
        " ON DELETE CASCADE) WITHOUT ROWID"
    )


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_m001_tables,)
"""Schema changes in order; never edit one that shipped, append a new one."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class SQLiteStore:
    """Conversation histories in one SQLite file (WAL mode); a :class:`ConversationStore`.

    Args:
        path: the database file; its directory is created when missing.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._guard = threading.Lock()
        self._offload = Offload()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # ------------------------------------------------------------------ public API

    async def load(self, conversation_id: str, turns: int) -> list[Message]:
        """The messages of the last ``turns`` turns, oldest first (empty for a new id)."""
        if turns <= 0:
            return []
        return await self._offload.run(self._run, self._load, conversation_id, turns)

    async def append_turn(
        self, conversation_id: str, persona: str, messages: Sequence[Message]
    ) -> int:
        """Store one whole turn in one transaction; return its number (1 for the first)."""
        check_conversation_id(conversation_id)
        if not messages:
            raise ValueError("a turn has at least one message")
        bodies = [(m.role, m.model_dump_json(exclude_none=True)) for m in messages]
        return await self._offload.run(self._run, self._append, conversation_id, persona, bodies)

    async def get(self, conversation_id: str) -> list[StoredMessage] | None:
        """Every stored message of a conversation, or ``None`` when it does not exist."""
        return await self._offload.run(self._run, self._get, conversation_id)

    async def delete(self, conversation_id: str) -> bool:
        """Delete a conversation; True when it existed."""
        return await self._offload.run(self._run, self._delete, conversation_id)

    def close(self) -> None:
        """Close the connection; a later call opens a new one."""
        with self._guard:
            if self._db is not None:
                self._db.close()
                self._db = None

    async def aclose(self) -> None:
        """Async spelling of :meth:`close`."""
        await self._offload.run(self.close)

    # ------------------------------------------------------------------ worker-thread side

    def _run(self, operation: Callable[..., _T], *args: object) -> _T:
        with self._guard:
            if self._db is None:
                self._db = self._connect()
            return operation(self._db, *args)

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=10.0
            )
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(
                f"cannot open the conversation store {str(self.path)!r} ({exc}); check DATA_DIR"
            ) from exc
        db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA foreign_keys = ON")
        _migrate(db)
        return db

    @staticmethod
    def _load(db: sqlite3.Connection, conversation_id: str, turns: int) -> list[Message]:
        rows = db.execute(
            "SELECT body FROM messages WHERE conversation_id = ?1 AND turn > "
            "(SELECT turns FROM conversations WHERE id = ?1) - ?2 ORDER BY turn, seq",
            (conversation_id, turns),
        ).fetchall()
        return [_MESSAGE.validate_json(body) for (body,) in rows]

    @staticmethod
    def _append(
        db: sqlite3.Connection, conversation_id: str, persona: str, bodies: list[tuple[str, str]]
    ) -> int:
        now = _now()
        db.execute("BEGIN IMMEDIATE")
        try:
            (turn,) = db.execute(
                "INSERT INTO conversations (id, turns, created_at, updated_at)"
                " VALUES (?1, 1, ?2, ?2)"
                " ON CONFLICT (id) DO UPDATE SET turns = turns + 1, updated_at = ?2"
                " RETURNING turns",
                (conversation_id, now),
            ).fetchone()
            db.execute(
                "INSERT INTO turns (conversation_id, turn, persona, created_at)"
                " VALUES (?, ?, ?, ?)",
                (conversation_id, turn, persona, now),
            )
            db.executemany(
                "INSERT INTO messages (conversation_id, turn, seq, role, body)"
                " VALUES (?, ?, ?, ?, ?)",
                [
                    (conversation_id, turn, seq, role, body)
                    for seq, (role, body) in enumerate(bodies)
                ],
            )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return int(turn)

    @staticmethod
    def _get(db: sqlite3.Connection, conversation_id: str) -> list[StoredMessage] | None:
        if db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone():
            rows = db.execute(
                "SELECT m.turn, t.persona, t.created_at, m.body FROM messages m JOIN turns t"
                " ON t.conversation_id = m.conversation_id AND t.turn = m.turn"
                " WHERE m.conversation_id = ? ORDER BY m.turn, m.seq",
                (conversation_id,),
            ).fetchall()
            return [
                StoredMessage(turn, persona, created, _MESSAGE.validate_json(body))
                for turn, persona, created, body in rows
            ]
        return None

    @staticmethod
    def _delete(db: sqlite3.Connection, conversation_id: str) -> bool:
        db.execute("BEGIN IMMEDIATE")
        try:
            deleted = db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return deleted.rowcount > 0


def _migrate(db: sqlite3.Connection) -> None:
    """Run the migrations this file has not seen, each in its own immediate transaction."""
    while True:
        db.execute("BEGIN IMMEDIATE")
        try:
            (version,) = db.execute("PRAGMA user_version").fetchone()
            if version >= len(MIGRATIONS):
                db.execute("COMMIT")
                return
            MIGRATIONS[version](db)
            db.execute(f"PRAGMA user_version = {version + 1}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
