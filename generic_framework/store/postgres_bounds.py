"""Bounded waits on PostgreSQL: a hung server answers no call later than its bound.

A server that is down refuses connections at once; a server that hangs (paused, swapping, a
partition that drops packets) accepts them and answers nothing, and without bounds a call
waits for as long as it hangs. Every connection of the store, the turns' lock connection and
the upstream budget's connection is opened with :func:`connection_options`:

- ``connect_timeout``: a connection whose start-up is not answered fails after the call's
  wait (libpq counts whole seconds, at least 2);
- TCP keepalives and ``tcp_user_timeout``: a peer that vanished (its machine lost, a
  partition) is noticed on an idle connection in about 25 s and on a busy one in 15 s;
- ``statement_timeout``: the server ends a statement running longer than the call's wait
  (migrations lift it for their own transaction).

And each call runs under :func:`bounded`, the client's own deadline, because a paused server
enforces nothing: after ``2 * wait`` (a pooled connection's wait, then the statements' time)
the call is cancelled, and a second cancel :data:`CANCEL_GRACE` later makes psycopg close the
connection instead of waiting for the server to confirm the cancel (and another every
:data:`CANCEL_GRACE` after it while the block still runs: one absorbed on its way would
otherwise leave psycopg waiting up to 10 s more, for a query that may then succeed). The caller gets
:class:`~generic_framework.errors.StoreUnavailableError` (a 503 with ``Retry-After``) within
``2 * wait + CANCEL_GRACE`` seconds: 11 s with ``DATABASE_POOL_TIMEOUT=5``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from generic_framework.errors import StoreUnavailableError
from generic_framework.store.postgres_errors import RETRY_AFTER

__all__ = ["CANCEL_GRACE", "bound_of", "bounded", "connection_options", "is_hung"]

CANCEL_GRACE = 1.0
"""Seconds between the deadline's cancel and the second one that drops the connection."""

KEEPALIVE_IDLE = 10
KEEPALIVE_INTERVAL = 5
KEEPALIVE_COUNT = 3
TCP_USER_TIMEOUT_MS = 15_000


class _HungServerError(StoreUnavailableError):
    """The server did not answer within the call's bound: retrying at once would wait again."""


def is_hung(exc: BaseException) -> bool:
    """True when ``exc`` is :func:`bounded`'s: the server did not answer within the bound."""
    return isinstance(exc, _HungServerError)


def bound_of(wait: float) -> float:
    """The longest a call waits on a hung server, for a per-call ``wait``."""
    return 2 * wait + CANCEL_GRACE


def connection_options(wait: float) -> dict[str, Any]:
    """psycopg connection arguments bounding every wait on the server to about ``wait``."""
    return {
        "connect_timeout": max(2, math.ceil(wait)),
        "keepalives": 1,
        "keepalives_idle": KEEPALIVE_IDLE,
        "keepalives_interval": KEEPALIVE_INTERVAL,
        "keepalives_count": KEEPALIVE_COUNT,
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
        "options": f"-c statement_timeout={max(1, round(wait * 1000))}",
    }


@asynccontextmanager
async def bounded(wait: float, where: str) -> AsyncIterator[None]:
    """Fail the block with :class:`StoreUnavailableError` once it has run ``2 * wait``
    seconds (see the module's text); the block's own errors pass through."""
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - always inside a task under asyncio
        yield
        return
    loop = asyncio.get_running_loop()
    fired = 0
    handles: list[asyncio.TimerHandle] = []

    def expire() -> None:
        nonlocal fired
        fired += 1
        task.cancel()
        # Again every CANCEL_GRACE until the block ends: a cancel that psycopg's own clean-up
        # absorbs (it cancels the query, then waits up to 5 s more for it, twice) must not
        # let the block wait for the hung server after all.
        handles.append(loop.call_later(CANCEL_GRACE, expire))

    handles.append(loop.call_later(2 * wait, expire))
    try:
        yield
    except asyncio.CancelledError:
        if fired == 0:
            raise
        _settle(task, handles, fired)
        fired = 0
        if task.cancelling():  # cancelled from outside as well: that cancel wins
            raise
        raise _HungServerError(
            f"the conversation database {where} did not answer within {2 * wait:g} s "
            "(twice DATABASE_POOL_TIMEOUT): it hangs, or the network drops its packets",
            retry_after=RETRY_AFTER,
        ) from None
    finally:
        # Also when the block ended otherwise after the deadline's cancel (an error
        # raised in its place): no cancel of ours stays pending on the task.
        _settle(task, handles, fired)


def _settle(task: asyncio.Task[Any], handles: list[asyncio.TimerHandle], fired: int) -> None:
    for handle in handles:
        handle.cancel()
    for _ in range(fired):
        task.uncancel()
