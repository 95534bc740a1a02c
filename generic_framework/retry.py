"""The one retry policy, built on tenacity.

What retries (decided by the business code first, see :func:`generic_framework.errors.error_for`):
connection errors, timeouts, HTTP 408/409/5xx, and HTTP 429 only for 1302/1303/1305/1312.
Never 1113, 1214, 1261, 1301, 401 or 403.

How long: exponential backoff with full jitter (0.5 s doubling, capped at 8 s), at most
``LLM_MAX_RETRIES`` retries and never past ``LLM_RETRY_DEADLINE`` seconds in total. A
``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms`` header from the server wins over
the backoff, up to :data:`MAX_RETRY_AFTER` seconds. Each retry logs one WARNING line with its
reason.

Tests call :func:`set_testing` to remove the waits while keeping the attempt counting.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from generic_framework.errors import GLMError

__all__ = ["MAX_RETRY_AFTER", "RetryPolicy", "is_retryable", "parse_retry_after", "set_testing"]

logger = logging.getLogger("generic_framework.retry")

MAX_RETRY_AFTER = 120.0
"""The longest wait a server's ``Retry-After`` can impose on us, in seconds."""

_T = TypeVar("_T")
_testing = False


def set_testing(enabled: bool = True) -> None:
    """Remove (or restore) every retry wait; attempts are still counted and capped."""
    global _testing  # noqa: PLW0603 - a process-wide switch, like stamina's set_testing
    _testing = enabled


def is_retryable(exc: BaseException) -> bool:
    """True when ``exc`` is one of ours and says a retry may succeed."""
    return isinstance(exc, GLMError) and exc.retryable


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Read ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date) as seconds, capped."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return _cap(float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return _cap(float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return _cap(when.timestamp() - (time.time() if now is None else now))


def _cap(seconds: float) -> float:
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class _stop_after_deadline(stop_base):
    """Stop when the next wait would end past the deadline."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        upcoming = retry_state.upcoming_sleep or 0.0
        elapsed = retry_state.seconds_since_start or 0.0
        return elapsed + upcoming >= self.deadline


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts, deadline and backoff for one logical request.

    Args:
        max_retries: retries after the first attempt (``LLM_MAX_RETRIES``).
        deadline: total seconds, waits included, after which no retry starts.
        initial: first backoff in seconds; doubles each attempt.
        maximum: the largest backoff in seconds.
    """

    max_retries: int = 3
    deadline: float = 600.0
    initial: float = 0.5
    maximum: float = 8.0

    def wait_for(self, retry_state: RetryCallState) -> float:
        """The pause before the next attempt: the server's Retry-After, else jittered backoff."""
        if _testing:
            return 0.0
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, GLMError) and exc.retry_after is not None:
            return exc.retry_after
        ceiling = min(self.maximum, self.initial * 2 ** (retry_state.attempt_number - 1))
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not cryptography

    async def call(self, fn: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``fn`` until it succeeds, raises a non-retryable error, or the policy gives up.

        The last error is re-raised unchanged, so callers always see a typed error.
        """
        retrying = AsyncRetrying(
            retry=retry_if_exception(is_retryable),
            stop=stop_after_attempt(self.max_retries + 1) | _stop_after_deadline(self.deadline),
            wait=self.wait_for,
            before_sleep=_log_retry,
            reraise=True,
        )
        return await retrying(fn)


def _log_retry(retry_state: RetryCallState) -> None:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    wait = retry_state.upcoming_sleep or 0.0
    logger.warning(
        "retrying after attempt %d failed (%s: %s); next attempt in %.2fs",
        retry_state.attempt_number,
        type(exc).__name__,
        exc,
        wait,
    )
