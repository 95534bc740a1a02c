"""Blocking calls in worker threads, with a cheap way back to the event loop for quick ones.

Sync tools and the SQLite store never run on the event loop: a blocking call there would freeze
every conversation of the process. ``asyncio.to_thread`` keeps them off it, but its way back is
dear for short calls: the worker completes a ``concurrent.futures.Future``, whose callback
wakes the loop through its self-pipe, completes a chained asyncio future and reschedules the
waiting task. In the benchmark's two-round chat that hop cost about 140 µs of CPU per call, more
than the Persona's own bookkeeping for the whole turn (docs/design/0703-quick-offload.md).

:class:`Offload` still runs every call in a worker thread, but the loop thread first waits for
the result on a plain lock, for at most :data:`QUICK_WAIT` seconds: a quick call (a pure
function, an SQLite statement) comes back without any of the loop's machinery. A call that takes
longer falls back to an awaited asyncio future, and the :class:`Offload` remembers that its
calls are slow, so later calls skip the short wait and never hold the loop at all; a call that
runs quickly again re-enables it. The loop is therefore held for at most :data:`QUICK_WAIT` per
slow call, and only right after calls of the same kind were quick.
"""

from __future__ import annotations

import _thread
import asyncio
import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from time import perf_counter
from typing import Any, TypeVar

__all__ = ["QUICK_WAIT", "Offload"]

_T = TypeVar("_T")

QUICK_WAIT = 0.001
"""Seconds the loop thread may wait for a call it expects to be quick (1 ms)."""

_MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)
"""As many threads as asyncio's default executor, which ``asyncio.to_thread`` used."""

_pool: ThreadPoolExecutor | None = None
_pool_guard = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """The shared worker threads (created on first use)."""
    global _pool  # noqa: PLW0603 - one pool per process, like asyncio's default executor
    if _pool is None:
        with _pool_guard:
            if _pool is None:
                _pool = ThreadPoolExecutor(_MAX_WORKERS, thread_name_prefix="generic_framework")
    return _pool


def _forget_pool() -> None:
    """In a forked child the parent's threads do not exist: start a new pool there."""
    global _pool  # noqa: PLW0603
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


class Offload:
    """Runs one kind of blocking call (one tool, one store) in worker threads.

    Attributes:
        quick: whether the next call waits :data:`QUICK_WAIT` on a lock before falling back to
            the event loop (True until a call overruns it; True again after a quick call).
    """

    __slots__ = ("quick",)

    def __init__(self) -> None:
        self.quick = True

    async def run(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        """``fn(*args, **kwargs)`` in a worker thread, in a copy of the caller's context.

        Like ``asyncio.to_thread``: the result is returned and an exception re-raised; a
        cancelled caller stops waiting, while the call itself runs to its end in its thread.
        """
        context = contextvars.copy_context()
        future = _executor().submit(self._timed, context, fn, args, kwargs)
        if self.quick:
            done = _thread.allocate_lock()
            done.acquire()
            future.add_done_callback(lambda _: done.release())
            if done.acquire(True, QUICK_WAIT):
                return future.result()
            self.quick = False
        return await asyncio.wrap_future(future)

    def _timed(
        self,
        context: contextvars.Context,
        fn: Callable[..., _T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> _T:
        """Worker side: run the call; a quick one makes the next call wait on the lock again."""
        started = perf_counter()
        value = context.run(fn, *args, **kwargs)
        if perf_counter() - started < QUICK_WAIT / 2:
            self.quick = True
        return value
