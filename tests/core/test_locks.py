"""The runtime's conversation locks: FIFO per conversation, independent across conversations."""

from __future__ import annotations

import asyncio

from generic_framework.core.locks import ConversationLocks


async def test_turns_on_one_conversation_queue_in_arrival_order() -> None:
    locks = ConversationLocks()
    order: list[str] = []
    release = asyncio.Event()

    async def turn(name: str, cid: str) -> None:
        async with locks.hold(cid):
            order.append(f"{name}:start")
            if name == "first":
                await release.wait()
            order.append(f"{name}:end")

    first = asyncio.create_task(turn("first", "c"))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(turn(name, "c")) for name in ("second", "third")]
    other = asyncio.create_task(turn("other", "d"))
    await asyncio.wait_for(other, 1)  # another conversation does not wait
    assert order == ["first:start", "other:start", "other:end"]
    release.set()
    await asyncio.gather(first, *waiting)
    assert order[3:] == ["first:end", "second:start", "second:end", "third:start", "third:end"]


async def test_locks_are_dropped_when_nobody_holds_or_waits() -> None:
    locks = ConversationLocks()
    async with locks.hold("a"):
        async with locks.hold("b"):
            assert len(locks) == 2
    assert len(locks) == 0


async def test_no_conversation_means_no_lock() -> None:
    locks = ConversationLocks()
    async with locks.hold(None), locks.hold(None):
        assert len(locks) == 0


async def test_a_cancelled_waiter_leaves_no_lock_behind() -> None:
    locks = ConversationLocks()
    entered = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("c"):
            entered.set()
            await asyncio.sleep(10)

    async def waiter() -> None:
        async with locks.hold("c"):
            raise AssertionError("never reached")

    held = asyncio.create_task(holder())
    await entered.wait()
    queued = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    queued.cancel()
    held.cancel()
    await asyncio.gather(held, queued, return_exceptions=True)
    assert len(locks) == 0
