"""The one retry policy, built on tenacity.

What retries (decided by the business code first, see
:func:`generic_framework.wire.errors.error_for`):
connection errors, timeouts, HTTP 408/409/5xx, and HTTP 429 only for 1302/1303/1305/1312.
Never 1113, 1214, 1261, 1301, 401 or 403.

How long: exponential backoff with jitter (a uniform pick between half and all of 0.5 s,
doubling per attempt, capped at 8 s), at most ``LLM_MAX_RETRIES`` retries and never past
``LLM_RETRY_DEADLINE`` seconds in total, counted from the first attempt. A ``Retry-After``
(seconds or an HTTP date) or ``retry-after-ms`` header from the server wins over the backoff, up
to :data:`MAX_RETRY_AFTER` seconds. Each retry logs one WARNING line with its reason.

Tests call :func:`set_testing` to remove the waits while keeping the attempt counting, or replace
:data:`sleep` to observe the waits without spending them.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from generic_framework.errors import GLMError, StoreUnavailableError

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = [
    "MAX_RETRY_AFTER",
    "RetryPolicy",
    "is_retryable",
    "parse_retry_after",
    "set_testing",
    "sleep",
]

logger = logging.getLogger("generic_framework.wire.retry")

MAX_RETRY_AFTER = 120.0
"""The longest wait a server's ``Retry-After`` can impose on us, in seconds."""

_T = TypeVar("_T")
_testing = False


async def sleep(seconds: float) -> None:
    """Wait between attempts; looked up on every retry, so tests may replace it."""
    await asyncio.sleep(seconds)


def set_testing(enabled: bool = True) -> None:
    """Remove (or restore) every retry wait; attempts are still counted and capped."""
    global _testing  # noqa: PLW0603 - a process-wide switch, like stamina's set_testing
    _testing = enabled


def is_retryable(exc: BaseException) -> bool:
    """True when ``exc`` is one of ours and says a retry may succeed. Not a database failure
    (the upstream budget's store): the call did not reach the upstream, and its caller answers
    503 with ``Retry-After`` within the store's bound instead of waiting out retries here."""
    return (
        isinstance(exc, GLMError) and exc.retryable and not isinstance(exc, StoreUnavailableError)
    )


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Read ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date) as seconds, capped.

    Header names match case-insensitively, also in a plain dict. Unparseable values, ``NaN``
    and dates in the past give ``None`` or ``0.0``; anything longer is cut to
    :data:`MAX_RETRY_AFTER`.
    """
    raw_ms = _header(headers, "retry-after-ms")
    if raw_ms:
        millis = _number(raw_ms)
        if millis is not None:
            return _cap(millis / 1000.0)
    raw = _header(headers, "retry-after")
    if not raw:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return _cap(seconds)
    try:
        when = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" parses naive; an HTTP date is always GMT
        when = when.replace(tzinfo=datetime.UTC)
    return _cap(when.timestamp() - (time.time() if now is None else now))


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None and not hasattr(headers, "get_list"):  # a plain dict: fold case by hand
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return value


def _number(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _cap(seconds: float) -> float:
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class _stop_after_deadline:
    """Stop when the next wait would end past the deadline, counted from ``started``.

    A plain callable (tenacity accepts one for ``stop``), so that tenacity itself is imported
    only when a first attempt failed: most processes never retry, and the import costs about
    8 ms of start-up (docs/design/0704).
    """

    def __init__(self, deadline: float, started: float) -> None:
        self.deadline = deadline
        self.started = started

    def __call__(self, retry_state: RetryCallState) -> bool:
        upcoming = retry_state.upcoming_sleep or 0.0
        return time.monotonic() - self.started + upcoming >= self.deadline


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

    def pause_for(self, exc: GLMError) -> float:
        """How long a 1302 pauses the upstream budget: the server's Retry-After, else the
        first backoff (no pause with :func:`set_testing`)."""
        if _testing:
            return 0.0
        return exc.retry_after if exc.retry_after is not None else self.initial

    def wait_for(self, retry_state: RetryCallState) -> float:
        """The pause before the next attempt: the server's Retry-After, else jittered backoff."""
        if _testing:
            return 0.0
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, GLMError) and exc.retry_after is not None:
            return exc.retry_after
        ceiling = min(self.maximum, self.initial * 2 ** (retry_state.attempt_number - 1))
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not cryptography

    async def call(
        self,
        fn: Callable[[], Awaitable[_T]],
        *,
        on_retry: Callable[[BaseException], None] | None = None,
    ) -> _T:
        """Run ``fn`` until it succeeds, raises a non-retryable error, or the policy gives up.

        The last error is re-raised unchanged, so callers always see a typed error.
        ``on_retry`` is told each error that is about to be retried (the client's metrics).
        """
        started = time.monotonic()
        try:
            return await fn()
        except BaseException as exc:
            if self.max_retries <= 0 or not is_retryable(exc):
                raise
            failed: list[BaseException] = [exc]

        # The first attempt runs outside tenacity: its per-call set-up costs more CPU than the
        # rest of a request's client-side work, and most requests succeed at once. tenacity's
        # own first attempt replays that failure, so counting, waits and logging are unchanged.
        async def attempt() -> _T:
            if failed:
                raise failed.pop()
            return await fn()

        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

        attempts, deadline = stop_after_attempt(self.max_retries + 1), self.deadline
        past_deadline = _stop_after_deadline(deadline, started)
        retrying = AsyncRetrying(
            retry=retry_if_exception(is_retryable),
            stop=lambda state: attempts(state) or past_deadline(state),
            wait=self.wait_for,
            sleep=_sleep_hook,
            before_sleep=_log_retry if on_retry is None else _reported(on_retry),
            reraise=True,
        )
        return await retrying(attempt)


async def _sleep_hook(seconds: float) -> None:
    await sleep(seconds)


def _reported(on_retry: Callable[[BaseException], None]) -> Callable[[RetryCallState], None]:
    """:func:`_log_retry`, then ``on_retry`` with the error."""

    def report(retry_state: RetryCallState) -> None:
        _log_retry(retry_state)
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if exc is not None:
            on_retry(exc)

    return report


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
