"""The PostgreSQL conversation store: whole turns, shared by every replica (``DATABASE_URL``).

- **Turns hold no transaction while the model works.** :meth:`PostgresStore.lock` takes a
  session-level advisory lock on the store's one dedicated connection (:mod:`~.postgres_locks`,
  docs/design/0314); the turn reads its history there (sent with the lock's try) and writes
  itself there (one statement, committed on its own, which also releases the conversation once
  committed: :mod:`~.postgres_turns`). A second replica
  answering the same conversation retries its lock and then sees the first one's turn. A
  crashed replica's session ends and the server releases its locks: no timer of ours.
- **A bounded pool** for everything else (lists, reads, ``delete``, ``db copy``): psycopg 3's
  ``AsyncConnectionPool`` with at most ``DATABASE_POOL_SIZE`` connections, each checked when
  handed out, so connections broken by a server restart are replaced instead of failing a
  request. Running turns take no pooled connection.
- **Turn numbers** come from the conversation's counter, raised by the statement that writes
  the turn (``INSERT ... ON CONFLICT DO UPDATE ... RETURNING``): contiguous, never duplicated.
- **Migrations** at first use, once across replicas (:mod:`~.postgres_schema`).
- **Errors.** A server that cannot be reached or drops the connection becomes
  :class:`~generic_framework.errors.StoreUnavailableError` (retryable, with a
  ``retry_after``); messages name the database without its password.

psycopg is an optional dependency: ``pip install 'generic-framework[postgres]'``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from generic_framework.errors import ConfigError
from generic_framework.store import postgres_keys, postgres_turns
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
from generic_framework.store.postgres_bounds import bounded, connection_options
from generic_framework.store.postgres_chats import PostgresChats
from generic_framework.store.postgres_errors import (
    redact_url,
    register_password,
    require_driver,
    translated,
)
from generic_framework.store.postgres_locks import Hold, PostgresLocks
from generic_framework.store.postgres_memories import PostgresMemories
from generic_framework.store.postgres_reads import read_dump, read_page, read_picture
from generic_framework.store.postgres_rows import as_time
from generic_framework.store.postgres_schema import MIGRATIONS, migrate
from generic_framework.store.postgres_users import PostgresUsers
from generic_framework.store.users import check_conversation_key
from generic_framework.wire.messages import Message

__all__ = ["POOL_TIMEOUT", "PostgresStore"]

logger = logging.getLogger("generic_framework.store")

POOL_TIMEOUT = 5.0
"""Seconds a request waits for a pooled connection, the default of ``DATABASE_POOL_TIMEOUT``:
with PostgreSQL down, how long a request waits before its 503."""


class _Held:
    """A conversation held by :meth:`PostgresStore.lock`: its statements run on the session
    that holds the lock (:mod:`~.postgres_locks`)."""

    def __init__(
        self, locks: PostgresLocks, hold: Hold, conversation_id: str, history: int
    ) -> None:
        self._locks = locks
        self._hold = hold
        self._id = conversation_id
        self._history = history  # the turns read with the lock (Hold.rows)

    async def load(self, turns: int) -> list[Message]:
        self._check()
        if turns <= 0:
            return []
        rows, self._hold.rows = self._hold.rows, None
        if rows is not None and turns == self._history:
            return postgres_turns.messages(rows)
        return await self._locks.run(
            self._hold, lambda conn: postgres_turns.load(conn, self._id, turns)
        )

    async def append_turn(
        self,
        persona: str,
        messages: Sequence[Message],
        record: TurnRecord | None = None,
        pictures: Sequence[StoredPicture] = (),
        *,
        settles: ClaimRef | None = None,
    ) -> int:
        self._check()
        return await self._locks.run(
            self._hold,
            lambda conn: postgres_turns.append_and_release(
                conn, self._hold, self._id, persona, messages, record, pictures, settles
            ),
        )

    def _check(self) -> None:
        if self._hold.released:
            raise RuntimeError("the turn was already stored; take the lock again")


class PostgresStore(PostgresUsers, PostgresChats, PostgresMemories):
    """Conversation histories in PostgreSQL; a :class:`ConversationStore` shared by replicas,
    its users, keys and limit counters (:class:`~.postgres_users.PostgresUsers`), its chat
    states and claimed updates (:class:`~.postgres_chats.PostgresChats`) and the facts
    personas keep (:class:`~.postgres_memories.PostgresMemories`).

    Args:
        url: ``postgresql://user:password@host:port/database`` (libpq's URI; ``postgres://``
            works too). Never logged or shown with its password.
        pool_size: the most connections this process opens (``DATABASE_POOL_SIZE``).
        pool_timeout: seconds a request waits for a free connection
            (``DATABASE_POOL_TIMEOUT``), and the longest a statement runs; with the server
            hung a call fails within ``2 * pool_timeout + 1`` s (:mod:`~.postgres_bounds`).
        create: give a database that was never initialised its schema; when false, such a
            database is refused with :class:`StoreUnavailableError` (docs/design/0325).
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        pool_timeout: float = POOL_TIMEOUT,
        create: bool = True,
    ):
        register_password(url)
        self.create = create
        self._url = url
        self.where = redact_url(url)
        self.pool_size = pool_size
        self.pool_timeout = pool_timeout
        self._pool: Any = None
        self._opening = asyncio.Lock()
        self._closed = False
        self._next_purge = 0.0  # time.monotonic() of the next purge of expired keys
        self._locks = PostgresLocks(
            url,
            where=self.where,
            ready=self.open,
            wait=pool_timeout,
            prepare=postgres_turns.PREPARE,
        )

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r}, pool_size={self.pool_size})"

    async def open(self) -> None:
        """Open the pool and apply pending migrations (once; later calls return at once).

        Raises:
            ConfigError: psycopg is not installed, or the schema is newer than this release.
            StoreUnavailableError: the server cannot be reached.
        """
        if self._pool is not None:
            return
        async with self._opening:
            if self._closed:
                raise ConfigError(f"{self!r} is closed")
            if self._pool is None:
                self._pool = await self._new_pool()

    async def _new_pool(self) -> Any:
        require_driver()
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        with translated(self.where):
            # One direct connection first: a server that is not there fails at once, with
            # its reason, instead of after the pool's wait; it also runs the migrations.
            options = connection_options(self.pool_timeout)
            connect = psycopg.AsyncConnection.connect(self._url, autocommit=True, **options)
            async with await connect as conn:
                await migrate(conn, create=self.create)
        pool = AsyncConnectionPool(
            self._url,
            min_size=1,
            max_size=self.pool_size,
            kwargs=connection_options(self.pool_timeout),
            open=False,
            timeout=self.pool_timeout,
            check=AsyncConnectionPool.check_connection,
            name="generic_framework",
        )
        try:
            with translated(self.where):
                await pool.open(wait=True, timeout=self.pool_timeout)
        except BaseException:
            await pool.close()
            raise
        return pool

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        await self.open()
        async with bounded(self.pool_timeout, self.where):
            with translated(self.where):
                async with self._pool.connection() as conn:
                    yield conn

    # ------------------------------------------------------------------ the interface

    @asynccontextmanager
    async def lock(
        self, conversation_id: str, *, history: int = 0
    ) -> AsyncIterator[HeldConversation]:
        """Hold the conversation across every replica until the turn is stored or fails,
        with no transaction open and no pooled connection taken meanwhile; the last
        ``history`` turns are read in the same round trip as the lock."""
        check_conversation_key(conversation_id)
        read = (postgres_turns.HISTORY, (conversation_id, history)) if history > 0 else None
        async with self._locks.hold(conversation_id, read) as hold:
            yield _Held(self._locks, hold, conversation_id, history)

    async def load(self, conversation_id: str, turns: int) -> list[Message]:
        """The messages of the last ``turns`` turns, oldest first (empty for a new id)."""
        if turns <= 0:
            return []
        async with self._connection() as conn:
            return await postgres_turns.load(conn, conversation_id, turns)

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
        """Store one whole turn (with its pictures) in one transaction (under the
        conversation's lock; the claim ``settles``, if given, settled in it:
        :mod:`~generic_framework.store.keys`)."""
        check_conversation_key(conversation_id)
        async with self._connection() as conn:
            await postgres_turns.lock_conversation(conn, conversation_id)
            return await postgres_turns.append(
                conn, conversation_id, persona, messages, record, pictures, settles
            )

    async def get(self, conversation_id: str) -> list[StoredMessage] | None:
        """Every stored message of a conversation, or ``None`` when it does not exist."""
        dump = await self.dump(conversation_id)
        if dump is None:
            return None
        return [
            StoredMessage(t.turn, t.persona, t.created_at, m)
            for t in dump.turns
            for m in t.messages
        ]

    async def turns(self, conversation_id: str) -> list[StoredTurn] | None:
        """Every stored turn with its record, or ``None`` when the conversation does not exist."""
        dump = await self.dump(conversation_id)
        return None if dump is None else list(dump.turns)

    async def delete(self, conversation_id: str) -> bool:
        """Delete a conversation once no replica is running a turn of it; True if it existed."""
        async with self._connection() as conn:
            await postgres_turns.lock_conversation(conn, conversation_id)
            cursor = await conn.execute(
                "DELETE FROM conversations WHERE id = %s", (conversation_id,)
            )
            return bool(cursor.rowcount)

    async def rename(self, conversation_id: str, title: str) -> bool:
        """Give a conversation a title of its own; True when it exists."""
        text = check_title(title)
        async with self._connection() as conn:
            cursor = await conn.execute(
                "UPDATE conversations SET title = %s WHERE id = %s", (text, conversation_id)
            )
            return bool(cursor.rowcount)

    async def delete_last_turn(self, conversation_id: str) -> bool:
        """Remove the newest turn whole once no replica is running a turn of the conversation
        (the conversation with its only turn); True if there was one."""
        async with self._connection() as conn:
            await postgres_turns.lock_conversation(conn, conversation_id)
            cursor = await conn.execute(
                "SELECT turns FROM conversations WHERE id = %s", (conversation_id,)
            )
            row = await cursor.fetchone()
            if row is None:
                return False
            if row[0] <= 1:
                await conn.execute("DELETE FROM conversations WHERE id = %s", (conversation_id,))
                return True
            await conn.execute(
                "DELETE FROM turns WHERE conversation_id = %s AND turn = %s",
                (conversation_id, row[0]),
            )
            await conn.execute(
                "UPDATE conversations SET turns = turns - 1 WHERE id = %s", (conversation_id,)
            )
            return True

    async def conversation_ids(self) -> list[str]:
        """Every conversation id, sorted."""
        async with self._connection() as conn:
            cursor = await conn.execute("SELECT id FROM conversations ORDER BY id")
            return [row[0] for row in await cursor.fetchall()]

    async def list_conversations(
        self, *, limit: int = 20, before: str | None = None, owner: str | None = None
    ) -> list[ConversationSummary]:
        """Conversations (``owner``'s, or all), most recently updated first; ``before`` a
        returned cursor."""
        check_limit(limit)
        after = split_cursor(before) if before is not None else None
        async with self._connection() as conn:
            return await read_page(conn, limit, after, owner)

    async def picture(self, conversation_id: str, sha256: str) -> StoredPicture | None:
        """A picture of the conversation by its hash, or ``None``."""
        async with self._connection() as conn:
            return await read_picture(conn, conversation_id, sha256)

    async def dump(self, conversation_id: str) -> ConversationDump | None:
        """Everything stored for a conversation (one consistent snapshot), or ``None``."""
        async with self._connection() as conn:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return await read_dump(conn, conversation_id)

    async def restore(self, dump: ConversationDump) -> None:
        """Write a dumped conversation as it was, in one transaction.

        Raises:
            ValueError: the conversation already exists here.
        """
        check_conversation_key(dump.id)
        async with self._connection() as conn:
            await postgres_turns.lock_conversation(conn, dump.id)
            cursor = await conn.execute("SELECT 1 FROM conversations WHERE id = %s", (dump.id,))
            if await cursor.fetchone():
                raise ValueError(f"conversation {dump.id!r} already exists")
            last = max((t.turn for t in dump.turns), default=0)
            await conn.execute(
                "INSERT INTO conversations (id, turns, created_at, updated_at, title)"
                " VALUES (%s, %s, %s, %s, %s)",
                (dump.id, last, as_time(dump.created_at), as_time(dump.updated_at), dump.title),
            )
            for t in dump.turns:
                created = as_time(t.created_at)
                await postgres_turns.write_turn(
                    conn, dump.id, t.turn, t.persona, created, t.record, t.messages
                )
            await postgres_turns.write_pictures(conn, dump.id, dump.pictures)

    async def schema_version(self) -> int:
        """How many of :data:`~.postgres_schema.MIGRATIONS` the database has applied."""
        async with self._connection() as conn:
            cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
            (version,) = await cursor.fetchone()
            return int(version)

    # ------------------------------------------------------------------ claims

    async def claim_key(
        self, owner: str, key: str, tag: str, *, lease: float, keep: float
    ) -> Claim:
        """Claim ``key`` (:class:`~generic_framework.store.keys.ClaimStore`), once
        across replicas; expired keys are purged first when a purge is due."""
        if time.monotonic() >= self._next_purge:
            self._next_purge = time.monotonic() + PURGE_EVERY
            async with self._connection() as conn:
                await postgres_keys.purge(conn)
        async with self._connection() as conn:
            return await postgres_keys.claim(conn, owner, key, tag, lease, keep)

    async def renew_key(self, owner: str, key: str, token: str, *, lease: float) -> bool:
        """Extend a running claim's lease; False when it is no longer this claim's."""
        async with self._connection() as conn:
            return await postgres_keys.renew(conn, owner, key, token, lease)

    async def finish_key(self, owner: str, key: str, token: str, value: bytes) -> bool:
        """Keep a claim's value; False when the claim is no longer this one's."""
        async with self._connection() as conn:
            return await postgres_keys.finish(conn, owner, key, token, value)

    async def release_key(self, owner: str, key: str, token: str) -> None:
        """Forget a claim: a retry claims it again."""
        async with self._connection() as conn:
            await postgres_keys.release(conn, owner, key, token)

    @property
    def latest_version(self) -> int:
        """The schema version this release migrates to."""
        return len(MIGRATIONS)

    async def aclose(self) -> None:
        """Close the turns' connection and the pool (waiting for connections in use to come
        back); once."""
        await self._locks.aclose()
        async with self._opening:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
