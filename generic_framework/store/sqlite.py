"""The SQLite conversation store: whole turns in one file (``DATA_DIR/conversations.sqlite3``).

- **Whole turns only.** :meth:`SQLiteStore.append_turn` writes a turn's messages (user
  message, assistant tool calls, tool answers, final answer) in one ``BEGIN IMMEDIATE``
  transaction, after the turn completed; a failed turn writes nothing, so a stored history never
  ends in an unanswered tool call.
- **Across processes** sharing the file, ``BEGIN IMMEDIATE`` (plus WAL and a busy timeout) makes
  each turn's write atomic and numbers turns without gaps or duplicates. Turns on one
  conversation are serialised within a process by the Runtime's locks; two processes answering
  the same conversation at the same moment would each see the history without the other's turn
  (:meth:`SQLiteStore.lock` holds nothing across processes; PostgreSQL does).
- **Schema changes** are an ordered list of small functions, :data:`MIGRATIONS`; ``PRAGMA
  user_version`` records how many have run. Each runs in its own ``BEGIN IMMEDIATE``
  transaction that re-reads the version, so processes opening one file migrate it once
  (:mod:`~.sqlite_schema`).
- **Off the event loop.** Every operation runs in a worker thread
  (:class:`~generic_framework.offload.Offload`, which lets the loop wait up to a millisecond for
  the usual quick statement instead of paying for a full trip through the event loop): a commit
  waits for the disk, which can take milliseconds. One connection per store, guarded by a thread
  lock, serves all threads.
- **A damaged or unusable file is a** :class:`~generic_framework.errors.ConfigError` naming
  the file and what to do, not a bare ``sqlite3`` traceback; the connection is dropped, so the
  next operation opens the file again once it was repaired or replaced.

This module is the store itself: its connection, worker thread and the protocol's methods. The
SQL they run on the conversation tables is :mod:`~.sqlite_conversations`'s.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from generic_framework.errors import ConfigError
from generic_framework.offload import Offload
from generic_framework.store import sqlite_conversations, sqlite_keys
from generic_framework.store.base import (
    ConversationDump,
    ConversationSummary,
    HeldConversation,
    StoredMessage,
    StoredTurn,
    TurnRecord,
    check_limit,
    check_title,
    split_cursor,
)
from generic_framework.store.keys import PURGE_EVERY, Claim, ClaimRef
from generic_framework.store.pictures import StoredPicture
from generic_framework.store.sqlite_chats import SQLiteChats
from generic_framework.store.sqlite_memories import SQLiteMemories
from generic_framework.store.sqlite_schema import (
    MIGRATIONS,
    migrate,
    record_values,
)
from generic_framework.store.sqlite_users import SQLiteUsers
from generic_framework.store.users import check_conversation_key
from generic_framework.wire.messages import Message

__all__ = ["MIGRATIONS", "SQLiteStore"]

_T = TypeVar("_T")
_BUSY_TIMEOUT_MS = 10_000


def _use_wal(db: sqlite3.Connection) -> None:
    """Switch the file to WAL, waiting out another connection that is creating it.

    SQLite answers the switch with "database is locked" at once, without its busy handler,
    while another connection holds the new file's write lock (two processes opening one new
    file); a file already in WAL needs no switch at all.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            (mode,) = db.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


# Primary result codes (sqlite3.Error.sqlite_errorname, extended codes cut to these) that say the
# file itself is the problem: damaged, not a database, or unreadable/unwritable for this process.
_DAMAGED = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})
_UNUSABLE = frozenset(
    {"SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_FULL"}
)


class _Held:
    """A conversation held by :meth:`SQLiteStore.lock` (nothing held across processes)."""

    def __init__(self, store: SQLiteStore, conversation_id: str) -> None:
        self._store = store
        self._id = conversation_id

    async def load(self, turns: int) -> list[Message]:
        return await self._store.load(self._id, turns)

    async def append_turn(
        self,
        persona: str,
        messages: Sequence[Message],
        record: TurnRecord | None = None,
        pictures: Sequence[StoredPicture] = (),
        *,
        settles: ClaimRef | None = None,
    ) -> int:
        return await self._store.append_turn(
            self._id, persona, messages, record, pictures, settles=settles
        )


class SQLiteStore(SQLiteUsers, SQLiteChats, SQLiteMemories):
    """Conversation histories in one SQLite file (WAL mode); a :class:`ConversationStore`,
    its users, keys and limit counters (:class:`~.sqlite_users.SQLiteUsers`), its chat
    states and claimed updates (:class:`~.sqlite_chats.SQLiteChats`) and the facts personas
    keep (:class:`~.sqlite_memories.SQLiteMemories`).

    Args:
        path: the database file; its directory is created when missing.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._guard = threading.Lock()
        self._offload = Offload()
        self._next_purge = 0.0  # time.monotonic() of the next purge of expired keys

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # ------------------------------------------------------------------ public API

    async def open(self) -> None:
        """Open the file and apply pending migrations now (otherwise done on first use)."""
        await self._offload.run(self._run, lambda db: None)

    @asynccontextmanager
    async def lock(
        self, conversation_id: str, *, history: int = 0
    ) -> AsyncIterator[HeldConversation]:
        """The conversation for one turn. Nothing is locked here: within a process the
        Runtime's locks serialise turns; across processes SQLite cannot (see the module).
        ``history`` changes nothing: the history is read when the turn loads it."""
        yield _Held(self, check_conversation_key(conversation_id))

    async def load(self, conversation_id: str, turns: int) -> list[Message]:
        """The messages of the last ``turns`` turns, oldest first (empty for a new id)."""
        if turns <= 0:
            return []
        return await self._offload.run(self._run, sqlite_conversations.load, conversation_id, turns)

    async def append_turn(
        self,
        conversation_id: str,
        persona: str,
        messages: Sequence[Message],
        record: TurnRecord | None = None,
        pictures: Sequence[StoredPicture] = (),
        *,
        settles: ClaimRef | None = None,
    ) -> int:
        """Store one whole turn (with its pictures) in one transaction (settling the claim
        ``settles``, if given, in it: :mod:`~generic_framework.store.keys`); return its number
        (1 for the first)."""
        check_conversation_key(conversation_id)
        if not messages:
            raise ValueError("a turn has at least one message")
        bodies = [(m.role, m.model_dump_json(exclude_none=True)) for m in messages]
        values = record_values(record)
        return await self._offload.run(
            self._run,
            sqlite_conversations.append,
            conversation_id,
            persona,
            bodies,
            values,
            pictures,
            settles,
        )

    async def turns(self, conversation_id: str) -> list[StoredTurn] | None:
        """Every stored turn with its record, or ``None`` when the conversation does not exist."""
        dump = await self.dump(conversation_id)
        return None if dump is None else list(dump.turns)

    async def conversation_ids(self) -> list[str]:
        """Every conversation id, sorted."""
        return await self._offload.run(self._run, sqlite_conversations.ids)

    async def list_conversations(
        self, *, limit: int = 20, before: str | None = None, owner: str | None = None
    ) -> list[ConversationSummary]:
        """Conversations (``owner``'s, or all), most recently updated first; ``before`` a
        returned cursor."""
        check_limit(limit)
        after = None
        if before is not None:
            stamp, cid = split_cursor(before)
            # As stored: milliseconds (a cursor with finer time still sorts correctly as text).
            exact = "milliseconds" if stamp.microsecond % 1000 == 0 else "microseconds"
            after = (stamp.isoformat(timespec=exact), cid)
        return await self._offload.run(
            self._run, sqlite_conversations.list_page, limit, after, owner
        )

    async def picture(self, conversation_id: str, sha256: str) -> StoredPicture | None:
        """A picture of the conversation by its hash, or ``None``."""
        return await self._call(sqlite_conversations.picture, conversation_id, sha256)

    async def dump(self, conversation_id: str) -> ConversationDump | None:
        """Everything stored for a conversation, or ``None``."""
        return await self._offload.run(self._run, sqlite_conversations.dump, conversation_id)

    async def restore(self, dump: ConversationDump) -> None:
        """Write a dumped conversation as it was, in one transaction.

        Raises:
            ValueError: the conversation already exists here.
        """
        check_conversation_key(dump.id)
        await self._offload.run(self._run, sqlite_conversations.restore, dump)

    async def schema_version(self) -> int:
        """How many of :data:`MIGRATIONS` this file has applied."""
        return await self._offload.run(
            self._run, lambda db: int(db.execute("PRAGMA user_version").fetchone()[0])
        )

    async def get(self, conversation_id: str) -> list[StoredMessage] | None:
        """Every stored message of a conversation, or ``None`` when it does not exist."""
        return await self._offload.run(self._run, sqlite_conversations.get, conversation_id)

    async def delete(self, conversation_id: str) -> bool:
        """Delete a conversation; True when it existed."""
        return await self._offload.run(self._run, sqlite_conversations.delete, conversation_id)

    async def rename(self, conversation_id: str, title: str) -> bool:
        """Give a conversation a title of its own; True when it exists."""
        text = check_title(title)
        return await self._offload.run(
            self._run, sqlite_conversations.rename, conversation_id, text
        )

    async def delete_last_turn(self, conversation_id: str) -> bool:
        """Remove the newest turn whole (the conversation with its only turn); True if any."""
        return await self._offload.run(
            self._run, sqlite_conversations.delete_last_turn, conversation_id
        )

    # ------------------------------------------------------------------ claims

    async def claim_key(
        self, owner: str, key: str, tag: str, *, lease: float, keep: float
    ) -> Claim:
        """Claim ``key`` (:class:`~generic_framework.store.keys.ClaimStore`); expired
        keys are purged first when a purge is due."""
        if time.monotonic() >= self._next_purge:
            self._next_purge = time.monotonic() + PURGE_EVERY
            await self._offload.run(self._run, sqlite_keys.purge)
        return await self._offload.run(self._run, sqlite_keys.claim, owner, key, tag, lease, keep)

    async def renew_key(self, owner: str, key: str, token: str, *, lease: float) -> bool:
        """Extend a running claim's lease; False when it is no longer this claim's."""
        return await self._offload.run(self._run, sqlite_keys.renew, owner, key, token, lease)

    async def finish_key(self, owner: str, key: str, token: str, value: bytes) -> bool:
        """Keep a claim's value; False when the claim is no longer this one's."""
        return await self._offload.run(self._run, sqlite_keys.finish, owner, key, token, value)

    async def release_key(self, owner: str, key: str, token: str) -> None:
        """Forget a claim: a retry claims it again."""
        await self._offload.run(self._run, sqlite_keys.release, owner, key, token)

    def close(self) -> None:
        """Close the connection; a later call opens a new one."""
        with self._guard:
            if self._db is not None:
                self._db.close()
                self._db = None

    async def aclose(self) -> None:
        """Async spelling of :meth:`close`."""
        await self._offload.run(self.close)

    async def _call(self, operation: Callable[..., _T], *args: object) -> _T:
        """Run ``operation(db, *args)`` in the worker thread."""
        return await self._offload.run(self._run, operation, *args)

    # ------------------------------------------------------------------ worker-thread side

    def _run(self, operation: Callable[..., _T], *args: object) -> _T:
        with self._guard:
            try:
                if self._db is None:
                    self._db = self._connect()
                return operation(self._db, *args)
            except sqlite3.DatabaseError as exc:
                problem = self._problem(exc)
                if problem is None:
                    raise
                if self._db is not None:
                    # Dropped, so a repaired or replaced file is opened afresh next time.
                    self._db.close()
                    self._db = None
                raise problem from exc

    def _problem(self, exc: sqlite3.DatabaseError) -> ConfigError | None:
        """The one-line error for a damaged or unusable file; None for anything else."""
        name = "_".join((getattr(exc, "sqlite_errorname", "") or "").split("_")[:2])
        if name in _DAMAGED:
            return ConfigError(
                f"the conversation store {str(self.path)!r} is damaged ({exc}): restore it from "
                "a backup, or move it aside to start an empty one (see DATA_DIR)"
            )
        if name in _UNUSABLE:
            return ConfigError(
                f"cannot use the conversation store {str(self.path)!r} ({exc}); check DATA_DIR, "
                "its permissions and free space"
            )
        return None

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
        try:
            db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            _use_wal(db)
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            migrate(db)
        except BaseException:
            # A file that is not a database fails here, after connect() succeeded.
            db.close()
            raise
        return db
