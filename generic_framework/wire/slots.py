"""The upstream budget: how many calls to Z.AI may be in flight, and the pause after a 1302.

Z.AI limits concurrent requests per API key (business code 1302, docs/protocol.md §7). The
:class:`~generic_framework.wire.client.GLMClient` takes one slot of an :class:`UpstreamSlots`
for every attempt (a streamed answer keeps it until the stream ends) and tells it to
:meth:`~UpstreamSlots.pause` when Z.AI answers 1302, so that no call of the budget starts
before the pause is over.

- :class:`LocalSlots` (here): the budget of one process, ``LLM_MAX_CONCURRENCY`` slots.
- :class:`~generic_framework.store.postgres_slots.PostgresSlots`: one budget per API key
  across every replica sharing a PostgreSQL database (docs/design/0315).

A call that gets no slot within ``LLM_QUEUE_TIMEOUT`` seconds fails with
:class:`~generic_framework.wire.errors.UpstreamBusyError` (the service answers 503 with
``Retry-After``) instead of queueing without end.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from contextvars import ContextVar
from typing import Protocol

from generic_framework.wire.errors import UpstreamBusyError

__all__ = [
    "BUSY_RETRY_AFTER",
    "CONTINUING",
    "LocalSlots",
    "SlotLease",
    "UpstreamSlots",
    "busy_error",
]

BUSY_RETRY_AFTER = 5.0
"""Seconds a caller refused for want of a slot is told to wait (slots turn over quickly)."""


class SlotLease(Protocol):
    """One taken slot; :meth:`release` gives it back (a second call does nothing)."""

    async def release(self) -> None:
        """Give the slot back."""
        ...


class UpstreamSlots(Protocol):
    """A budget of concurrent upstream calls, shared by every call that uses it."""

    limit: int
    """How many calls may be in flight at once."""

    async def acquire(self, *, respect_pause: bool = True) -> SlotLease:
        """Wait (within the budget's bounded wait) for a free slot and take it.

        ``respect_pause=False`` is for the retry of the call that got the 1302: its retry
        policy already waits out the same ``Retry-After``.

        Raises:
            UpstreamBusyError: no slot became free, or a 1302 pause outlasted the wait.
            StoreUnavailableError: a shared budget's database could not be reached.
        """
        ...

    async def pause(self, seconds: float) -> None:
        """After a 1302: no call of this budget starts a new attempt for ``seconds``."""
        ...

    async def aclose(self) -> None:
        """Release what the budget holds open (a database connection)."""
        ...


def busy_error(wait: float, retry_after: float, *, why: str = "") -> UpstreamBusyError:
    """The error of a call that found no slot within ``wait`` seconds."""
    reason = why or "every upstream slot (LLM_MAX_CONCURRENCY) stayed taken"
    return UpstreamBusyError(
        f"{reason} for {wait:g}s (LLM_QUEUE_TIMEOUT); nothing was sent",
        retry_after=max(retry_after, 1.0),
    )


CONTINUING: ContextVar[bool] = ContextVar("generic_framework_continuing", default=False)
"""True while a turn makes a later call (its next round): a :class:`LocalSlots` serves such
calls before first calls. Set by the turn engine around each of its model calls."""


class _Lanes:
    """``limit`` slots handed out in order, calls of a turn under way before first calls.

    Two FIFO lines of waiting futures; a slot freed goes to the first live waiter of the front
    line, else of the back line. A waiter that gave up (timed out, cancelled) stays in its line
    as a done future and is skipped, so leaving costs nothing.
    """

    __slots__ = ("_back", "_free", "_front")

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._front: deque[asyncio.Future[None]] = deque()
        self._back: deque[asyncio.Future[None]] = deque()

    async def take(self, *, front: bool) -> None:
        # Free slots exist only while nobody waits (give() hands a slot to a waiter first).
        if self._free > 0:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (self._front if front else self._back).append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot just as it gave up: pass it on
            raise

    def give(self) -> None:
        for line in (self._front, self._back):
            while line:
                waiter = line.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._free += 1


class _LocalLease:
    __slots__ = ("_owner", "_released")

    def __init__(self, owner: LocalSlots) -> None:
        self._owner = owner
        self._released = False

    async def release(self) -> None:
        if not self._released:
            self._released = True
            self._owner._lanes.give()


class LocalSlots:
    """The budget of one process: ``limit`` slots, a bounded wait, a local 1302 pause.

    Calls queue in arrival order, except that the later calls of a turn under way
    (:data:`CONTINUING`) go ahead of first calls: turns that have begun finish before new ones
    start, so fewer turns hold their rounds' state at once (docs/design/0701).

    Args:
        limit: concurrent upstream calls (``LLM_MAX_CONCURRENCY``).
        wait: seconds a call may wait for a slot, pause included (``LLM_QUEUE_TIMEOUT``).
    """

    def __init__(self, limit: int, wait: float) -> None:
        self.limit = limit
        self.wait = wait
        self._lanes = _Lanes(limit)
        self._paused_until = 0.0

    def __repr__(self) -> str:
        return f"LocalSlots(limit={self.limit}, wait={self.wait:g})"

    async def acquire(self, *, respect_pause: bool = True) -> SlotLease:
        """Take a slot once no pause is running; see :meth:`UpstreamSlots.acquire`."""
        deadline = time.monotonic() + self.wait
        while True:
            if respect_pause:
                await self._sit_out_pause(deadline)
            left = deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(left, 0.0)):
                    await self._lanes.take(front=CONTINUING.get())
            except TimeoutError:
                raise busy_error(self.wait, BUSY_RETRY_AFTER) from None
            if not respect_pause or self._paused_until <= time.monotonic():
                return _LocalLease(self)
            # A 1302 arrived while this call queued: it waits for the pause like the rest.
            self._lanes.give()

    async def _sit_out_pause(self, deadline: float) -> None:
        now = time.monotonic()
        if self._paused_until <= now:
            return
        if self._paused_until > deadline:
            raise busy_error(
                self.wait,
                self._paused_until - now,
                why="Z.AI asked every call to wait (1302) longer than allowed",
            )
        await asyncio.sleep(self._paused_until - now)

    async def pause(self, seconds: float) -> None:
        """No new slot is handed out for ``seconds`` (a later end wins over an earlier one)."""
        self._paused_until = max(self._paused_until, time.monotonic() + max(seconds, 0.0))

    async def aclose(self) -> None:
        """Nothing to release."""
