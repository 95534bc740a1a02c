"""Calls to the Bot API that survive Telegram's flood limits and a flaky network.

Every call the bot makes goes through :class:`Delivery`:

- **429 Too Many Requests** (``RetryAfter``): waited out for exactly the ``retry_after`` Telegram
  gave, then sent again (at most :data:`ATTEMPTS` times). A live update (a draft or an edit of
  an answer still being written) is not worth waiting for: it is dropped, and no live update is
  sent to Telegram before ``retry_after`` has passed (:attr:`Delivery.quiet_until`).
- **"message is not modified"**: an edit to the text a message already has is a success.
- **Network errors** (a timeout, a refused connection, a 5xx): retried with exponential backoff
  (0.5 s, 1 s, 2 s...), at most :data:`ATTEMPTS` times; then the error is raised.

Anything else (a 400 of a bad call, a 403 of a user who blocked the bot) is raised at once.
One place for all three, instead of python-telegram-bot's ``AIORateLimiter``
(docs/design/0614 says why).
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from telegram.error import BadRequest, NetworkError, RetryAfter

__all__ = ["ATTEMPTS", "Delivery", "not_modified", "retry_seconds"]

logger = logging.getLogger("generic_framework.telegram")

ATTEMPTS = 5
"""The most times one call is sent (the first time included)."""
BACKOFF = 0.5
"""The first wait after a network error (doubled each time)."""
MAX_RETRY_AFTER = 120.0
"""A ``retry_after`` above this is not waited for: the call fails (a flood ban, not a pause)."""

_T = TypeVar("_T")


def retry_seconds(exc: RetryAfter) -> float:
    """The seconds Telegram asked to wait, whatever python-telegram-bot's time setting."""
    value = getattr(exc, "_retry_after", None)
    if not isinstance(value, timedelta):
        with warnings.catch_warnings():  # the int-or-timedelta migration warns on access
            warnings.simplefilter("ignore")
            value = exc.retry_after
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return max(0.0, seconds)


def not_modified(exc: BadRequest) -> bool:
    """True for Telegram's answer to an edit that changes nothing."""
    return "message is not modified" in exc.message.lower()


class Delivery:
    """Runs Bot API calls with the retries of the module's docstring.

    Args:
        sleep: what waits (tests may pass a recording one); :func:`asyncio.sleep` by default.
    """

    def __init__(self, sleep: Callable[[float], Awaitable[None]] | None = None) -> None:
        self._sleep = sleep or asyncio.sleep
        self.quiet_until = 0.0
        """``time.monotonic()`` before which no live update is sent (after a 429)."""

    @property
    def quiet(self) -> bool:
        """True while a 429's ``retry_after`` has not passed."""
        return time.monotonic() < self.quiet_until

    async def send(self, what: str, call: Callable[[], Awaitable[_T]]) -> _T | None:
        """Run ``call`` until it succeeds (``None``: an edit that changed nothing).

        Raises:
            TelegramError: the call failed for good (a bad request, a user who blocked the
                bot, a network still down after :data:`ATTEMPTS` tries, a 429 longer than
                :data:`MAX_RETRY_AFTER`).
        """
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await call()
            except RetryAfter as exc:
                wait = retry_seconds(exc)
                self._hold(wait)
                if wait > MAX_RETRY_AFTER or attempt == ATTEMPTS:
                    raise
                logger.info("Telegram asked to wait %g s before %s (429); waiting", wait, what)
                await self._sleep(wait)
            except BadRequest as exc:
                if not_modified(exc):
                    return None
                raise
            except NetworkError as exc:
                if attempt == ATTEMPTS:
                    raise
                wait = BACKOFF * 2 ** (attempt - 1)
                logger.info("%s failed (%s); retrying in %g s", what, exc.message, wait)
                await self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    async def live(self, what: str, call: Callable[[], Awaitable[_T]]) -> _T | None:
        """Run ``call`` once if no 429 is being waited out; a failure drops it (``None``).

        For updates of an answer still being written: the next one replaces this one anyway.
        """
        if self.quiet:
            return None
        try:
            return await call()
        except RetryAfter as exc:
            self._hold(retry_seconds(exc))
        except BadRequest as exc:
            if not not_modified(exc):
                raise
        except NetworkError as exc:
            logger.info("%s failed (%s); the next update replaces it", what, exc.message)
        return None

    def _hold(self, seconds: float) -> None:
        self.quiet_until = max(self.quiet_until, time.monotonic() + seconds)
