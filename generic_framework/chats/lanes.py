"""Lanes: the jobs of one chat run one at a time, in the order they came; chats run side by side.

A chat platform hands its updates over in order. Running them one after another would make
every chat wait for the slowest turn of any chat (python-telegram-bot's default, sequential
processing, does exactly that); running each in a task of its own would let a chat's second
message overtake its first. :class:`Lanes` keeps one queue per chat key with one worker task
draining it: :meth:`Lanes.submit` never waits, jobs of one key run in submission order, jobs of
different keys concurrently. Across processes the runtime's conversation lock keeps the order
of turns (a second process answering the same chat waits for the first's turn to end).

A job that raises is handed to ``on_error`` and the lane goes on with its next job: one bad
update never stops the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable

__all__ = ["Job", "Lanes"]

logger = logging.getLogger("generic_framework.chats")

Job = Callable[[], Awaitable[None]]
"""A unit of work: a coroutine function without arguments."""


def _log_error(key: str, exc: BaseException) -> None:
    logger.error("a chat job failed (%s: %s)", type(exc).__name__, exc)


class Lanes:
    """One ordered queue per key, drained by one task each.

    Args:
        on_error: called with the key and the exception of a job that raised (after which the
            lane goes on); logs one line when omitted.
    """

    def __init__(self, on_error: Callable[[str, BaseException], None] | None = None) -> None:
        self._queues: dict[str, deque[Job]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._on_error = on_error or _log_error

    @property
    def busy(self) -> int:
        """How many lanes have a job running or waiting."""
        return len(self._workers)

    def submit(self, key: str, job: Job) -> None:
        """Queue ``job`` behind the jobs of ``key`` (returns at once)."""
        self._queues.setdefault(key, deque()).append(job)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._drain(key), name=f"lane:{key}")

    async def _drain(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                job = queue.popleft()
                try:
                    await job()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._on_error(key, exc)
        finally:
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)

    async def join(self, within: float | None = None) -> bool:
        """Wait until every lane is empty (jobs submitted meanwhile included), at most
        ``within`` seconds; then cancel what is still running.

        Returns:
            True when every job ended by itself.
        """
        loop = asyncio.get_running_loop()
        deadline = None if within is None else loop.time() + within
        while self._workers:
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                break
            await asyncio.wait(list(self._workers.values()), timeout=left)
        if not self._workers:
            return True
        for task in list(self._workers.values()):
            task.cancel()
        for task in list(self._workers.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return False
