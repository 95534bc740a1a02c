"""The retry policy: Retry-After parsing, backoff, attempt cap, deadline, logging, testing switch.

Waits are observed through the ``waits`` fixture (``retry.sleep`` replaced), never slept.
"""

from __future__ import annotations

import email.utils
import logging
import time

import httpx
import pytest

from generic_framework.errors import GLMError, StoreUnavailableError
from generic_framework.wire import retry
from generic_framework.wire.errors import (
    APIConnectionError,
    BadRequestError,
    InsufficientBalanceError,
    RateLimitError,
    ServerError,
)
from generic_framework.wire.retry import MAX_RETRY_AFTER, RetryPolicy, parse_retry_after

NOW = 1_780_000_000.0


def _date(offset: float) -> str:
    return email.utils.formatdate(NOW + offset, usegmt=True)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"RETRY-AFTER": "0"}, 0.0),
        ({"Retry-After": "-3"}, 0.0),
        ({"Retry-After": "3600"}, MAX_RETRY_AFTER),
        ({"Retry-After": _date(30)}, 30.0),
        ({"Retry-After": _date(-30)}, 0.0),
        ({"Retry-After": _date(86_400)}, MAX_RETRY_AFTER),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "900000"}, MAX_RETRY_AFTER),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        ({"Retry-After": "later, please"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": ""}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    value = parse_retry_after(headers, now=NOW)

    assert value == (pytest.approx(expected) if expected is not None else None)


def test_parse_retry_after_reads_httpx_headers() -> None:
    headers = httpx.Headers({"Retry-After": _date(12)})

    assert parse_retry_after(headers, now=NOW) == pytest.approx(12.0)


def test_zoneless_http_date_is_gmt() -> None:
    # "-0000" parses to a naive datetime; reading it as local time would be off by the zone.
    when = "Wed, 20 May 2026 08:00:30 -0000"
    now = email.utils.parsedate_to_datetime("Wed, 20 May 2026 08:00:00 GMT").timestamp()

    assert parse_retry_after({"Retry-After": when}, now=now) == pytest.approx(30.0)


class Flaky:
    """An attempt function that raises the given errors in order, then returns "ok"."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


async def test_success_needs_one_call_and_no_wait(waits: list[float]) -> None:
    attempt = Flaky()

    assert await RetryPolicy().call(attempt) == "ok"
    assert attempt.calls == 1
    assert waits == []


async def test_a_store_failure_is_not_retried_as_an_upstream_one(waits: list[float]) -> None:
    # The upstream budget's database hangs or is down: the call never reached Z.AI, and its
    # caller answers 503 within the store's bound instead of waiting out the retries.
    attempt = Flaky(StoreUnavailableError("the budget's database is unavailable", retry_after=2))

    with pytest.raises(StoreUnavailableError):
        await RetryPolicy(max_retries=3).call(attempt)
    assert attempt.calls == 1 and waits == []


async def test_backoff_grows_with_jitter_and_is_capped(waits: list[float]) -> None:
    attempt = Flaky(*(ServerError("boom") for _ in range(6)))
    policy = RetryPolicy(max_retries=6, initial=0.5, maximum=2.0)

    assert await policy.call(attempt) == "ok"

    assert attempt.calls == 7
    ceilings = [0.5, 1.0, 2.0, 2.0, 2.0, 2.0]
    assert len(waits) == len(ceilings)
    for wait, ceiling in zip(waits, ceilings, strict=True):
        assert ceiling / 2 <= wait <= ceiling


async def test_retry_after_wins_over_backoff(waits: list[float]) -> None:
    attempt = Flaky(RateLimitError("busy", retry_after=42.0), RateLimitError("busy"))

    assert await RetryPolicy().call(attempt) == "ok"

    assert waits[0] == 42.0
    assert waits[1] <= 1.0  # the second error named no wait: backoff of attempt 2


@pytest.mark.parametrize("max_retries", [0, 1, 3, 5])
async def test_attempts_are_capped_at_max_retries_plus_one(max_retries: int) -> None:
    attempt = Flaky(*(ServerError(f"boom {i}") for i in range(10)))

    with pytest.raises(ServerError) as caught:
        await RetryPolicy(max_retries=max_retries).call(attempt)

    assert attempt.calls == max_retries + 1
    assert caught.value.message == f"boom {max_retries}"  # the last error, unchanged


@pytest.mark.parametrize(
    "error",
    [
        InsufficientBalanceError("no money", code="1113"),
        BadRequestError("bad", code="1214"),
        RateLimitError("not this one", retryable=False),
        ValueError("a bug, not a transient failure"),
    ],
)
async def test_non_retryable_errors_stop_at_once(error: BaseException, waits: list[float]) -> None:
    attempt = Flaky(error)

    with pytest.raises(type(error)):
        await RetryPolicy().call(attempt)

    assert attempt.calls == 1
    assert waits == []


async def test_deadline_stops_when_the_next_wait_would_pass_it(waits: list[float]) -> None:
    attempt = Flaky(RateLimitError("busy", retry_after=10.0))

    with pytest.raises(RateLimitError):
        await RetryPolicy(max_retries=5, deadline=5.0).call(attempt)

    assert attempt.calls == 1
    assert waits == []


async def test_deadline_counts_time_already_spent() -> None:
    # Real, short waits: the deadline (0.25 s) ends the retries long before the cap of 21.
    retry.set_testing(False)
    attempt = Flaky(*(RateLimitError("busy", retry_after=0.1) for _ in range(30)))
    started = time.monotonic()

    with pytest.raises(RateLimitError):
        await RetryPolicy(max_retries=20, deadline=0.25).call(attempt)

    assert 1 <= attempt.calls <= 3
    assert time.monotonic() - started < 2.0


async def test_set_testing_removes_every_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(retry, "sleep", fake_sleep)
    retry.set_testing(True)
    attempt = Flaky(RateLimitError("busy", retry_after=100.0), ServerError("boom"))

    assert await RetryPolicy().call(attempt) == "ok"

    assert attempt.calls == 3
    assert recorded == [0.0, 0.0]


async def test_set_testing_off_restores_waits(waits: list[float]) -> None:
    retry.set_testing(True)
    retry.set_testing(False)
    attempt = Flaky(ServerError("boom"))

    await RetryPolicy().call(attempt)

    assert 0.25 <= waits[0] <= 0.5


async def test_one_warning_per_retry_with_its_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attempt = Flaky(
        RateLimitError("too many at once", status_code=429, code="1302"),
        APIConnectionError("connection reset"),
    )

    with caplog.at_level(logging.DEBUG, logger="generic_framework.wire.retry"):
        assert await RetryPolicy().call(attempt) == "ok"

    lines = [r for r in caplog.records if r.name == "generic_framework.wire.retry"]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.WARNING]
    first, second = (r.getMessage() for r in lines)
    assert "attempt 1" in first
    assert "RateLimitError" in first
    assert "code 1302" in first
    assert "attempt 2" in second
    assert "APIConnectionError: connection reset" in second


def test_is_retryable_only_trusts_our_errors() -> None:
    assert retry.is_retryable(ServerError("x"))
    assert not retry.is_retryable(GLMError("x"))
    assert not retry.is_retryable(TimeoutError())
    assert not retry.is_retryable(httpx.ConnectError("raw httpx error"))


async def test_a_lambda_returning_a_coroutine_is_awaited_on_every_attempt() -> None:
    # tenacity awaits only coroutine *functions*; the policy must not hand it a plain lambda.
    attempt = Flaky(ServerError("boom"), ServerError("boom"))

    result = await RetryPolicy().call(lambda: attempt())  # noqa: PLW0108 - the point

    assert result == "ok"
    assert attempt.calls == 3
