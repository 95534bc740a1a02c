"""Offload: blocking calls in worker threads, a short lock wait for quick ones (0703)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from generic_framework import offload
from generic_framework.offload import QUICK_WAIT, Offload

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


async def test_a_call_runs_in_a_worker_thread_with_the_callers_context() -> None:
    REQUEST_ID.set("r-42")
    where = await Offload().run(lambda: (threading.get_ident(), REQUEST_ID.get()))

    assert where[0] != threading.get_ident()
    assert where[1] == "r-42"


async def test_arguments_results_and_exceptions_pass_through() -> None:
    work = Offload()

    assert await work.run(lambda a, b=0: a + b, 2, b=3) == 5
    with pytest.raises(ZeroDivisionError):
        await work.run(lambda: 1 / 0)


async def test_a_slow_call_is_awaited_and_later_calls_skip_the_wait() -> None:
    work = Offload()
    loop_ticks = 0

    async def ticker() -> None:
        nonlocal loop_ticks
        while True:
            loop_ticks += 1
            await asyncio.sleep(0.001)

    ticking = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    assert await work.run(time.sleep, QUICK_WAIT * 30) is None
    assert work.quick is False
    assert loop_ticks > 3  # the loop kept running while the slow call ran
    ticking.cancel()

    assert await work.run(lambda: "quick") == "quick"
    await asyncio.sleep(0.01)
    assert work.quick is True  # a quick call re-enables the short wait


async def test_a_cancelled_caller_stops_waiting() -> None:
    release = threading.Event()
    work = Offload()
    work.quick = False
    task = asyncio.ensure_future(work.run(release.wait, 5))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()


def test_a_forked_child_builds_its_own_pool() -> None:
    pool = offload._executor()
    offload._forget_pool()
    try:
        assert offload._executor() is not pool
    finally:
        offload._forget_pool()
