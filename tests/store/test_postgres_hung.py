"""A hung PostgreSQL (every server process stopped with SIGSTOP, as ``docker pause`` does): each
call of the store, of the turns' lock connection and of the upstream budget fails with
StoreUnavailableError within its documented bound (store/postgres_bounds.py), and everything
works again once the server resumes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_postgres import eventually

from generic_framework.errors import StoreUnavailableError
from generic_framework.store.postgres import PostgresStore
from generic_framework.store.postgres_bounds import (
    CANCEL_GRACE,
    bound_of,
    bounded,
    connection_options,
)
from generic_framework.store.postgres_slots import GIVE_BACK_WAIT, TURNOVER, PostgresSlots
from generic_framework.wire.messages import AssistantMessage, Message, UserMessage

WAIT = 1.0  # DATABASE_POOL_TIMEOUT of these stores
SLACK = 1.5  # the event loop's and a busy machine's share


def turn(text: str) -> list[Message]:
    return [UserMessage(content=text), AssistantMessage(content=f"answer to {text}")]


def _server_pids(data: Path) -> list[int]:
    """The postmaster and every process it started (the backends, the checkpointer...)."""
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == postmaster:
                pids.append(int(entry.name))
    return pids


def _signal(pid: int, number: signal.Signals) -> None:
    """Signal ``pid``; nothing when it has ended. A backend that was exiting when it was listed
    (a zombie takes the stop) is reaped by the postmaster as soon as that one continues, before
    the loop reaches it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


@contextmanager
def paused(server: Any) -> Iterator[None]:
    pids = _server_pids(server.data)
    for pid in pids:
        _signal(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            _signal(pid, signal.SIGCONT)


async def timed_failure(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        await call()
    assert caught.value.retryable and caught.value.retry_after
    return time.monotonic() - started


def test_every_connection_is_opened_with_the_bounds() -> None:
    options = connection_options(5.0)
    assert options["connect_timeout"] == 5
    assert options["keepalives"] == 1 and options["tcp_user_timeout"] > 0
    assert "statement_timeout=5000" in options["options"]
    assert connection_options(0.5)["connect_timeout"] == 2  # libpq's least
    assert bound_of(5.0) == 11.0


async def test_a_paused_server_gives_each_call_its_error_within_the_bound(
    postgres_server: Any,
) -> None:
    url = postgres_server.create_database()
    store = PostgresStore(url, pool_size=2, pool_timeout=WAIT)
    budget = PostgresSlots(url, budget="hung", limit=2, wait=30.0, ready=store.open, timeout=WAIT)
    try:
        # Every connection open and in use before the pause: the pool's, the locks', the budget's.
        await store.append_turn("a", "p", turn("before"))
        async with store.lock("a", history=1) as held:
            assert len(await held.load(1)) == 2
        held_slot = await budget.acquire()  # kept: the next call needs a statement

        with paused(postgres_server):
            calls: list[Callable[[], Awaitable[Any]]] = [
                lambda: store.get("a"),
                lambda: store.append_turn("b", "p", turn("while hung")),
                store.conversation_ids,
                budget.acquire,
            ]
            waits = await asyncio.gather(*(timed_failure(call) for call in calls))
            assert max(waits) < bound_of(WAIT) + SLACK, waits

            async def a_turn() -> None:
                async with store.lock("a", history=1):
                    pass

            assert await timed_failure(a_turn) < bound_of(WAIT) + SLACK
            # A store opened while the server hangs: the connect timeout (libpq's 2 s least).
            fresh = PostgresStore(url, pool_timeout=WAIT)
            try:
                assert await timed_failure(fresh.open) < 2 + SLACK
            finally:
                await fresh.aclose()

        await held_slot.release()  # its connection is gone: nothing to give back
        # Resumed: every path answers again (the hung connections were dropped, not reused).
        assert await eventually(lambda: store.append_turn("a", "p", turn("after"))) == 2
        async with store.lock("a", history=2) as held:
            assert len(await held.load(2)) == 4
        await (await eventually(budget.acquire)).release()
        assert len(await store.turns("a") or []) == 2
    finally:
        await budget.aclose()
        await store.aclose()


async def test_a_turn_the_hung_server_failed_does_not_wait_for_its_unlock(
    postgres_server: Any,
) -> None:
    # The turn holds its conversation when the server hangs; a call in it fails at its bound.
    # The error goes out then: the unlock (another bound on the hung server) is left to the
    # background, and lands once the server answers again.
    url = postgres_server.create_database()
    store = PostgresStore(url, pool_size=2, pool_timeout=WAIT)
    other = PostgresStore(url, pool_timeout=WAIT)
    stopped: list[int] = []
    try:
        await store.append_turn("a", "p", turn("before"))
        await other.open()

        async def a_turn() -> None:
            async with store.lock("a", history=1):
                for pid in _server_pids(postgres_server.data):
                    _signal(pid, signal.SIGSTOP)
                    stopped.append(pid)
                await store.get("a")

        try:
            took = await timed_failure(a_turn)
        finally:
            for pid in stopped:
                _signal(pid, signal.SIGCONT)
        assert took < bound_of(WAIT) + SLACK, took

        async def another_replicas_turn() -> int:
            async with other.lock("a", history=1) as held:
                return await held.append_turn("p", turn("after"))

        # Another session gets the conversation: the unlock did land.
        assert await asyncio.wait_for(eventually(another_replicas_turn), 30) == 2
    finally:
        await other.aclose()
        await store.aclose()


async def test_calls_queued_behind_a_call_the_hung_server_failed_fail_with_it(
    postgres_server: Any,
) -> None:
    # Two calls of one replica need a statement for a slot: the second waits in line behind
    # the first. The server hangs: the first fails at its bound, and the second with it,
    # instead of trying on the hung server for another bound after its wait in line.
    url = postgres_server.create_database()
    budget = PostgresSlots(url, budget="line", limit=3, wait=30.0, timeout=WAIT)
    try:
        kept = await budget.acquire()  # the connection open; the next calls need a statement
        with paused(postgres_server):
            waits = await asyncio.gather(*(timed_failure(budget.acquire) for _ in range(2)))
        assert max(waits) < bound_of(WAIT) + SLACK, waits
        await kept.release()
        # Resumed: the next call takes a slot again.
        await (await eventually(budget.acquire)).release()
    finally:
        await budget.aclose()


async def test_the_deadline_ends_a_block_that_absorbs_its_first_cancels() -> None:
    # psycopg answers a cancel by cancelling the query and waiting for it again (5 s, twice):
    # a cancel absorbed on its way must not leave the block waiting past its bound.
    absorbed = 0

    async def stubborn() -> None:
        nonlocal absorbed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                absorbed += 1
                if absorbed == 3:
                    raise

    async def call() -> None:
        async with bounded(0.2, "(test)"):
            await stubborn()

    took = await asyncio.wait_for(timed_failure(call), 10)
    assert absorbed == 3
    assert took < 0.4 + 2 * CANCEL_GRACE + SLACK, took


async def test_a_slot_given_back_on_a_hung_server_does_not_hold_its_turn(
    postgres_server: Any,
) -> None:
    # A turn gives its slot back after its model call, then stores its answer: the unlock on
    # the hung server goes on in the background instead of holding the turn another bound.
    url = postgres_server.create_database()
    budget = PostgresSlots(url, budget="give", limit=2, wait=30.0, timeout=WAIT)
    other = PostgresSlots(url, budget="give", limit=2, wait=1.0, timeout=WAIT)
    try:
        slot = await budget.acquire()
        await asyncio.sleep(TURNOVER)  # past the reuse window: given back with a statement
        with paused(postgres_server):
            started = time.monotonic()
            await slot.release()
            assert time.monotonic() - started < GIVE_BACK_WAIT + SLACK
        # The unlock landed once the server answered: another replica takes both slots.
        held = [await eventually(other.acquire) for _ in range(2)]
        for lease in held:
            await lease.release()
    finally:
        await other.aclose()
        await budget.aclose()
