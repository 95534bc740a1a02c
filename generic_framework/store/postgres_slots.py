"""One upstream budget per API key across replicas: session-level advisory locks over N slots.

Every replica on the same database and API key shares ``LLM_MAX_CONCURRENCY`` slots, slot ``i``
being the advisory lock ``(budget, i)`` (the two-key form, which never collides with the
one-key conversation locks). A replica takes slots on one dedicated connection of its own:

- **taking** a slot is one statement, ``pg_try_advisory_lock`` over the slot ids this replica
  does not hold, from a random start, stopping at the first it gets (``LIMIT 1``). The slots
  it holds are left out because a session's advisory locks are re-entrant: asking again for a
  slot the connection holds would succeed. None free means waiting: the first local caller in
  line polls (every :data:`POLL` seconds, or at once when a slot of this replica is given
  back), the others queue behind it, FIFO, within ``LLM_QUEUE_TIMEOUT``;
- **giving back** is ``pg_advisory_unlock``, shielded from cancellation so a slot is never
  left taken by an abandoned call;
- **a crashed replica** loses its connection, and the server releases every slot it held;
- **a 1302** writes ``upstream_pauses.until`` for the budget; every replica reads it before
  taking a slot and waits it out (docs/design/0315).

If the connection breaks (the server restarted), the slots it held are gone with it; calls in
flight keep running and their release does nothing, so for their length the budget can be
exceeded by that many calls. The next call reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from generic_framework.store.postgres_errors import unavailable
from generic_framework.wire.slots import BUSY_RETRY_AFTER, SlotLease, busy_error

__all__ = ["POLL", "PostgresSlots", "budget_namespace"]

logger = logging.getLogger("generic_framework.store")

POLL = 0.05
"""Seconds between two looks at the shared slots while every one is taken."""

# unnest() yields the candidates in array order and LIMIT stops at the first lock taken, so
# at most one slot is taken per statement (no ORDER BY: a sort would run the filter on all).
_TAKE = "SELECT s FROM unnest(%s::integer[]) AS u(s) WHERE pg_try_advisory_lock(%s, s) LIMIT 1"
_PAUSE_LEFT = (
    "SELECT greatest(extract(epoch FROM until - clock_timestamp()), 0)::float8"
    " FROM upstream_pauses WHERE budget = %s"
)
_PAUSE = (
    "INSERT INTO upstream_pauses (budget, until)"
    " VALUES (%s, clock_timestamp() + make_interval(secs => %s))"
    " ON CONFLICT (budget) DO UPDATE SET until = greatest(upstream_pauses.until, EXCLUDED.until)"
)


def budget_namespace(budget: str) -> int:
    """The signed 32-bit first key of the budget's advisory locks."""
    digest = hashlib.sha256(f"generic_framework:slots:{budget}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


class _Lease:
    __slots__ = ("_generation", "_owner", "_released", "slot")

    def __init__(self, owner: PostgresSlots, slot: int, generation: int) -> None:
        self._owner = owner
        self.slot = slot
        self._generation = generation
        self._released = False

    async def release(self) -> None:
        if self._released:
            return
        self._released = True
        # Shielded: a cancelled caller must not leave the slot taken on a live connection.
        await asyncio.shield(self._owner._give_back(self.slot, self._generation))


class PostgresSlots:
    """``limit`` upstream slots shared through PostgreSQL by every replica using ``budget``.

    Args:
        url: the database (``DATABASE_URL``).
        budget: names the budget (a digest of the API key, never the key).
        limit: slots (``LLM_MAX_CONCURRENCY``).
        wait: seconds a call may wait for a slot (``LLM_QUEUE_TIMEOUT``).
        ready: awaited before the first statement (the store's migrations).
    """

    def __init__(
        self,
        url: str,
        *,
        budget: str,
        limit: int,
        wait: float,
        ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._url = url
        self.budget = budget
        self.limit = limit
        self.wait = wait
        self.namespace = budget_namespace(budget)
        self._ready = ready
        self._conn: Any = None
        self._generation = 0
        self._held: set[int] = set()
        self._io = asyncio.Lock()
        self._line = asyncio.Lock()
        self._freed = asyncio.Event()
        self._paused_until = 0.0

    def __repr__(self) -> str:
        return f"PostgresSlots(limit={self.limit}, wait={self.wait:g})"

    async def acquire(self, *, respect_pause: bool = True) -> SlotLease:
        """Take a shared slot; see :meth:`~generic_framework.wire.slots.UpstreamSlots.acquire`."""
        deadline = time.monotonic() + self.wait
        try:
            async with asyncio.timeout(self.wait):
                await self._line.acquire()
        except TimeoutError:
            raise busy_error(self.wait, BUSY_RETRY_AFTER) from None
        try:
            return await self._poll(deadline, respect_pause)
        finally:
            self._line.release()

    async def _poll(self, deadline: float, respect_pause: bool) -> SlotLease:
        while True:
            self._freed.clear()
            pause, lease = await self._attempt(respect_pause)
            if lease is not None:
                return lease
            left = deadline - time.monotonic()
            if pause > left:
                raise busy_error(
                    self.wait, pause, why="Z.AI asked every call to wait (1302) longer than allowed"
                )
            if left <= 0:
                raise busy_error(self.wait, BUSY_RETRY_AFTER)
            try:
                async with asyncio.timeout(min(pause or POLL, left)):
                    await (asyncio.sleep(pause) if pause else self._freed.wait())
            except TimeoutError:
                pass

    async def _attempt(self, respect_pause: bool) -> tuple[float, SlotLease | None]:
        """One look: the pause left, or a slot. Shielded, so a slot taken by a statement
        whose caller was cancelled meanwhile is given back, never lost."""
        task = asyncio.ensure_future(self._take(respect_pause))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_give_back_orphan)
            raise

    async def _take(self, respect_pause: bool) -> tuple[float, SlotLease | None]:
        local = self._paused_until - time.monotonic()
        if respect_pause and local > 0:
            return local, None
        async with self._io:
            conn = await self._connection()
            generation = self._generation
            try:
                if respect_pause:
                    cursor = await conn.execute(_PAUSE_LEFT, (self.budget,))
                    row = await cursor.fetchone()
                    if row is not None and row[0] > 0:
                        return float(row[0]), None
                candidates = self._candidates()
                taken = None
                if candidates:
                    cursor = await conn.execute(_TAKE, (candidates, self.namespace))
                    taken = await cursor.fetchone()
            except BaseException as exc:
                await self._broken(exc)
                raise
            if taken is None:
                return 0.0, None
            self._held.add(int(taken[0]))
        return 0.0, _Lease(self, int(taken[0]), generation)

    def _candidates(self) -> list[int]:
        """The slots this replica does not hold, from a random start (spreads the replicas)."""
        start = random.randrange(self.limit)  # noqa: S311 - spreading, not secrets
        order = [(start + i) % self.limit for i in range(self.limit)]
        return [slot for slot in order if slot not in self._held]

    async def _give_back(self, slot: int, generation: int) -> None:
        async with self._io:
            if self._conn is not None and generation == self._generation:
                try:
                    await self._conn.execute(
                        "SELECT pg_advisory_unlock(%s, %s)", (self.namespace, slot)
                    )
                except Exception as exc:  # the slot went with the connection
                    await self._broken(exc, raise_=False)
                self._held.discard(slot)
        self._freed.set()

    async def pause(self, seconds: float) -> None:
        """No replica takes a slot of this budget for ``seconds`` (best effort if the database
        is down: this replica pauses anyway)."""
        if seconds <= 0:
            return
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)
        async with self._io:
            try:
                conn = await self._connection()
                await conn.execute(_PAUSE, (self.budget, seconds))
            except Exception as exc:
                logger.warning("could not share the 1302 pause with the other replicas: %s", exc)
                await self._broken(exc, raise_=False)

    async def _connection(self) -> Any:
        """The budget's own connection (autocommit: advisory locks of the session)."""
        if self._conn is None:
            import psycopg

            if self._ready is not None:
                await self._ready()
            try:
                self._conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
            except psycopg.OperationalError as exc:
                raise unavailable(exc, "(upstream budget)") from exc
            self._generation += 1
        return self._conn

    async def _broken(self, exc: BaseException, *, raise_: bool = True) -> None:
        """Drop a failed connection (its slots are gone with it); map the error."""
        import psycopg

        if not isinstance(exc, psycopg.Error):
            return
        conn, self._conn = self._conn, None
        self._held.clear()  # the server released them with the connection
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
        if raise_:
            raise unavailable(exc, "(upstream budget)") from exc

    async def aclose(self) -> None:
        """Close the connection: the server releases every slot it still held."""
        async with self._io:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()


def _give_back_orphan(task: asyncio.Future[tuple[float, SlotLease | None]]) -> None:
    if task.cancelled() or task.exception() is not None:
        return
    _, lease = task.result()
    if lease is not None:
        asyncio.ensure_future(lease.release())  # noqa: RUF006 - shielded, self-contained
