"""Conversations held across replicas with no transaction open: session-level advisory locks.

Each :class:`~generic_framework.store.postgres.PostgresStore` keeps one dedicated connection
(autocommit) for its turns, beside its pool:

- **holding** a conversation takes this process's FIFO lock for it first (a session's advisory
  locks are re-entrant, so two turns of one process must never both ask), then
  ``pg_try_advisory_lock(key)`` on the dedicated connection. When another replica holds it, the
  turn tries again after a short backoff (:data:`FIRST_WAIT`, doubling up to :data:`MOST_WAIT`):
  a blocking ``pg_advisory_lock`` would stall every other turn sharing the connection;
- **the turn's statements** run on that same connection, the session holding the lock: the
  history is one autocommit read, sent with the lock's try in one round trip; the turn is one
  statement (it commits on its own) that also hands the lock to its own transaction and gives
  back the session's (``postgres.py``). The model works with no
  transaction open and no pooled connection taken;
- **a crashed replica**'s session ends and the server releases its locks: the next try of a
  waiting replica gets the conversation;
- **a lost connection** (server restart, network) takes this replica's locks with it. Every
  hold remembers the connection it was taken on (a generation number); a turn whose
  connection is gone fails with :class:`~generic_framework.errors.StoreUnavailableError`
  when it next loads or stores, so it never writes without holding the lock. The next hold
  connects again.

Statements on the connection are serialised by one ``asyncio.Lock``; each is short (a lock try
with its read, a write that releases), so turns of one replica queue for milliseconds at most,
never for a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from generic_framework.errors import StoreUnavailableError
from generic_framework.store.postgres_bounds import bounded, connection_options, is_hung
from generic_framework.store.postgres_errors import (
    RETRY_AFTER,
    require_driver,
    translated,
    unavailable,
)
from generic_framework.store.postgres_schema import advisory_key, not_initialised

__all__ = [
    "FIRST_WAIT",
    "MOST_WAIT",
    "Hold",
    "PostgresLocks",
    "Read",
    "conversation_key",
    "execute_text",
]

_T = TypeVar("_T")

FIRST_WAIT = 0.01
"""Seconds before the second try of a conversation another replica holds."""
MOST_WAIT = 0.2
"""The longest wait between two tries (the backoff doubles up to it)."""

UNLOCK = "SELECT pg_advisory_unlock(%s)"
# What every new connection is given in one query: the read sent with a lock's try shares its
# implicit transaction, so it must take its own snapshot (after the lock) whatever the
# database's default level; and the try, prepared in the session, so that a try with its read
# is one simple query of two EXECUTEs (see PostgresLocks._try).
_SETUP = (
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED;"
    " PREPARE gf_try (bigint) AS SELECT pg_try_advisory_lock($1)"
)


def conversation_key(conversation_id: str) -> int:
    """The conversation's advisory-lock key (also taken by ``delete`` and ``restore``)."""
    return advisory_key("conversation", conversation_id)


Read = tuple[str, tuple[str | int, ...]]
"""A statement prepared on the connection (named in the ``prepare`` text the locks were given)
and its arguments, sent with the lock's try (see :meth:`PostgresLocks.hold`)."""


def execute_text(conn: Any, name: str, args: tuple[str | int, ...]) -> bytes:
    """``EXECUTE name(args)`` with the arguments bound here: integers as digits, text quoted
    and escaped by libpq for the connection's encoding."""
    import psycopg

    escape = psycopg.pq.Escaping(conn.pgconn).escape_literal
    encoding = conn.info.encoding
    bound = [b"%d" % arg if isinstance(arg, int) else escape(arg.encode(encoding)) for arg in args]
    return b"EXECUTE %s(%s)" % (name.encode(), b", ".join(bound))


class _Queue:
    """One FIFO ``asyncio.Lock`` per key, dropped when nobody holds or waits for it (the
    store may not import the core's ``ConversationLocks``: a lower layer)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[None]]] = {}

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(name, (asyncio.Lock(), []))
        users.append(None)
        try:
            async with lock:
                yield
        finally:
            users.pop()
            if not users:
                del self._locks[name]


class Hold:
    """One conversation's lock, taken on one generation of the dedicated connection; ``rows``
    is what the read sent with the lock returned (``None`` when none was sent)."""

    __slots__ = ("generation", "key", "released", "rows")

    def __init__(self, key: int, generation: int, rows: list[Any] | None = None) -> None:
        self.key = key
        self.generation = generation
        self.released = False
        self.rows = rows


class PostgresLocks:
    """The conversation locks of one store: one dedicated connection, advisory locks on it.

    Args:
        url: the database.
        where: the database as messages name it (no password).
        ready: awaited before the first connection (the store's migrations).
        wait: the bound of each wait on the server (:mod:`~.postgres_bounds`): a statement,
            waiting for the connection included, fails after ``2 * wait``.
        prepare: ``PREPARE`` statements run on every new connection (the reads a hold may
            send with its try).
    """

    def __init__(
        self,
        url: str,
        *,
        where: str,
        ready: Callable[[], Awaitable[None]],
        wait: float,
        prepare: str = "",
    ) -> None:
        self._url = url
        self._setup = f"{_SETUP}; {prepare}" if prepare else _SETUP
        self.where = where
        self._ready = ready
        self._wait = wait
        self._local = _Queue()
        self._conn: Any = None
        # Two cursors of the connection, kept while it lives: one for the tries, one for the
        # turns' statements. A cursor running the same statement text again reuses psycopg's
        # adaptation of its parameters (a new cursor starts it again each time).
        self._tries: Any = None
        self._cursor: Any = None
        self._generation = 0
        self._io = asyncio.Lock()
        self._unlocking: set[asyncio.Future[None]] = set()  # unlocks left to the background
        self._closed = False

    @asynccontextmanager
    async def hold(self, conversation_id: str, read: Read | None = None) -> AsyncIterator[Hold]:
        """Hold the conversation: this process's turns of it in arrival order, then the
        advisory lock (waiting while another replica holds it); released at the end.

        ``read`` is sent in the same round trip as the try that gets the lock, as a statement
        of its own after it: its snapshot is taken once the lock is held (one statement doing
        both would read from a snapshot taken before), and its rows are :attr:`Hold.rows`.
        The two go as one simple query of two ``EXECUTE``s of statements prepared in the
        session, not as a pipeline: psycopg's pipeline costs the client about as much CPU as
        a second round trip (docs/TRIED.md).
        """
        key = conversation_key(conversation_id)
        async with self._local.hold(conversation_id):
            held = await self._take(key, read)
            try:
                yield held
            except StoreUnavailableError:
                # The store failed the turn: the unlock goes on in the background instead of
                # holding the error for another bound on a server that hangs. The next turn's
                # statements queue behind it on the connection.
                self._release_later(held)
                raise
            finally:
                await self.release(held)

    async def _take(self, key: int, read: Read | None) -> Hold:
        wait = FIRST_WAIT
        reconnected = False
        while True:
            try:
                held = await self._attempt(key, read)
            except StoreUnavailableError as exc:
                if reconnected or self._conn is not None or is_hung(exc):
                    raise
                reconnected = True  # the connection had broken: once more on a new one
                continue
            if held is not None:
                return held
            await asyncio.sleep(wait * random.uniform(0.5, 1.0))  # noqa: S311 - spreading
            wait = min(wait * 2, MOST_WAIT)

    async def _attempt(self, key: int, read: Read | None) -> Hold | None:
        """One try. Shielded: a lock taken by a statement whose caller was cancelled
        meanwhile is given back, never left on the connection."""
        task = asyncio.ensure_future(self._try(key, read))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(self._orphan)
            raise

    async def _try(self, key: int, read: Read | None) -> Hold | None:
        async def attempt(conn: Any) -> Hold | None:
            query = b"EXECUTE gf_try(%d)" % key
            if read is not None:
                query += b"; " + execute_text(conn, *read)
            cursor = await self._tries.execute(query, prepare=False)
            (got,) = await cursor.fetchone()
            if not got:
                return None
            rows = None
            if read is not None:
                cursor.nextset()
                rows = await cursor.fetchall()
            return Hold(key, self._generation, rows)

        async with bounded(self._wait, self.where), self._io:
            return await self._on_connection(attempt)

    def _orphan(self, task: asyncio.Future[Hold | None]) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        held = task.result()
        if held is not None:
            asyncio.ensure_future(self.release(held))  # noqa: RUF006 - shielded

    async def run(self, held: Hold, operation: Callable[[Any], Awaitable[_T]]) -> _T:
        """Run ``operation(cursor)`` on the session that holds ``held`` (a cursor kept for the
        turns' statements: its ``execute`` returns it, with the rows).

        Raises:
            StoreUnavailableError: the connection holding the lock was lost (the lock with it).
        """
        try:
            async with bounded(self._wait, self.where), self._io:
                if held.released or held.generation != self._generation or self._conn is None:
                    raise self._lost()
                return await self._on_connection(lambda _: operation(self._cursor))
        except StoreUnavailableError as exc:
            if self._conn is None or held.generation != self._generation:
                raise self._lost() from exc  # dropped: the lock went with it
            raise

    async def release(self, held: Hold) -> None:
        """Give the lock back (nothing when it went with its connection); once."""
        if held.released:
            return
        held.released = True
        await asyncio.shield(self._unlock(held))

    def _release_later(self, held: Hold) -> None:
        """Give the lock back in the background (once)."""
        if held.released:
            return
        held.released = True
        task = asyncio.ensure_future(self._unlock(held))
        self._unlocking.add(task)
        task.add_done_callback(self._unlocking.discard)

    async def _unlock(self, held: Hold) -> None:
        with contextlib.suppress(StoreUnavailableError):
            async with bounded(self._wait, self.where):
                await self._unlock_now(held)

    async def _unlock_now(self, held: Hold) -> None:
        async with self._io:
            if held.generation != self._generation or self._conn is None:
                return  # released by the server with the connection
            with contextlib.suppress(StoreUnavailableError):
                await self._on_connection(lambda conn: conn.execute(UNLOCK, (held.key,)))

    async def _on_connection(self, operation: Callable[[Any], Awaitable[_T]]) -> _T:
        """``operation`` on the connection (opened when needed), under ``self._io``; a
        connection that broke is dropped, with every lock it held."""
        conn = await self._connection()
        try:
            with translated(self.where):
                return await operation(conn)
        except BaseException:
            await self._after_failure(conn)
            raise

    async def _after_failure(self, conn: Any) -> None:
        """Leave the connection idle (a failed write's transaction rolled back), or drop it."""
        import psycopg

        if not conn.closed and not conn.broken:
            idle = psycopg.pq.TransactionStatus.IDLE
            try:
                if conn.info.transaction_status != idle:
                    await conn.rollback()
                return
            except psycopg.Error:
                pass
        self._conn = None
        with contextlib.suppress(psycopg.Error):
            await conn.close()

    async def _connection(self) -> Any:
        if self._conn is not None and self._conn.closed:  # closed by a cancel on a hung server
            self._conn = None
        if self._conn is None:
            if self._closed:
                raise StoreUnavailableError(
                    f"the conversation database {self.where} is closed", retry_after=RETRY_AFTER
                )
            require_driver()
            import psycopg

            await self._ready()
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, **connection_options(self._wait)
                )
            except psycopg.OperationalError as exc:
                raise unavailable(exc, self.where) from exc
            try:
                await conn.execute(self._setup, prepare=False)  # see _SETUP
            except psycopg.errors.UndefinedTable as exc:
                # The statements prepared on tables that are gone: PostgreSQL came back on
                # an empty volume (docs/design/0325).
                await conn.close()
                raise not_initialised() from exc
            except psycopg.Error as exc:
                await conn.close()
                raise unavailable(exc, self.where) from exc
            self._conn = conn
            self._tries, self._cursor = conn.cursor(), conn.cursor()
            self._generation += 1
        return self._conn

    def _lost(self) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"the conversation's lock was lost with its connection to {self.where} "
            "(the database restarted or the network failed); the turn was not stored",
            retry_after=RETRY_AFTER,
        )

    async def aclose(self) -> None:
        """Close the connection: the server releases every lock it still held."""
        async with self._io:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()
