"""The facts personas keep: every test runs on SQLite and on a real PostgreSQL server; the
race runs several processes remembering for one user at the same moment."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from generic_framework.store import ConversationStore, open_store
from generic_framework.store.memories import (
    FACT_CHARS,
    Memory,
    check_fact,
    check_memory_id,
)

MakeStore = Callable[[], ConversationStore]
_T = TypeVar("_T")


async def test_facts_are_kept_per_user_and_persona_newest_first(make_store: MakeStore) -> None:
    store, other = make_store(), make_store()
    alice = await store.add_user("alice")
    bob = await store.add_user("bob")
    first = await store.remember(alice.id, "guide", "Alice has a cat called Miso", max_items=5)
    second = await other.remember(alice.id, "guide", "Alice lives in  Nanaimo ", max_items=5)
    await store.remember(alice.id, "scout", "Alice climbs", max_items=5)
    await store.remember(bob.id, "guide", "Bob is vegetarian", max_items=5)
    assert check_memory_id(first.id) == first.id and first.id != second.id
    assert second.text == "Alice lives in Nanaimo"  # spaces made one
    kept = await other.memories(alice.id, "guide")
    assert [m.text for m in kept] == ["Alice lives in Nanaimo", "Alice has a cat called Miso"]
    assert kept[1] == first and kept[1].created_at.endswith("+00:00")
    assert {m.persona for m in await store.memories(alice.id)} == {"guide", "scout"}
    assert [m.text for m in await store.memories(bob.id)] == ["Bob is vegetarian"]
    # The same fact twice is kept once.
    again = await store.remember(alice.id, "guide", "Alice has a cat called Miso", max_items=5)
    assert again == first and len(await store.memories(alice.id, "guide")) == 2


async def test_a_fact_is_erased_only_for_its_user(make_store: MakeStore) -> None:
    store = make_store()
    alice = await store.add_user("alice")
    bob = await store.add_user("bob")
    fact = await store.remember(alice.id, "guide", "Alice likes tea", max_items=5)
    assert await store.forget(bob.id, fact.id) is None  # bob cannot erase alice's fact
    assert await store.forget(alice.id, fact.id, persona="scout") is None  # another persona's
    assert [m.id for m in await store.memories(alice.id)] == [fact.id]
    assert await store.forget(alice.id, fact.id, persona="guide") == fact
    assert await store.forget(alice.id, fact.id) is None
    # The operator (user None) erases anyone's; forget_all clears one persona only.
    kept = await store.remember(alice.id, "guide", "Alice likes coffee", max_items=5)
    assert await store.forget(None, kept.id) == kept
    for n in range(3):
        await store.remember(alice.id, "guide", f"fact {n}", max_items=5)
    await store.remember(alice.id, "scout", "scout fact", max_items=5)
    assert await store.forget_all(alice.id, "guide") == 3
    assert [m.text for m in await store.memories(alice.id)] == ["scout fact"]


async def test_max_items_is_refused_clearly(store: ConversationStore) -> None:
    alice = await store.add_user("alice")
    for n in range(3):
        await store.remember(alice.id, "guide", f"fact {n}", max_items=3)
    with pytest.raises(ValueError, match=r"full \(3 facts.*forget one first"):
        await store.remember(alice.id, "guide", "one too many", max_items=3)
    await store.remember(alice.id, "scout", "another persona has room", max_items=3)
    assert len(await store.memories(alice.id, "guide")) == 3


async def test_many_tasks_remembering_at_once_never_overshoot(make_store: MakeStore) -> None:
    stores = [make_store() for _ in range(4)]
    alice = await stores[0].add_user("alice")

    async def one(store: ConversationStore, n: int) -> bool:
        try:
            await store.remember(alice.id, "guide", f"fact {n}", max_items=7)
        except ValueError as exc:
            assert "memory is full" in str(exc)
            return False
        return True

    kept = await asyncio.gather(*(one(stores[n % 4], n) for n in range(40)))
    assert sum(kept) == 7 and len(await stores[0].memories(alice.id, "guide")) == 7


def test_processes_remembering_at_once_never_overshoot(database_url: str) -> None:
    # Four processes (replicas) remember ten facts each for one user at the same moment.
    user = asyncio.run(_on(database_url, lambda store: store.add_user("alice"))).id
    start = time.time() + 3.0
    script = (
        "import asyncio, json, sys, time\n"
        "from generic_framework.store import open_store\n"
        "async def one(store, n):\n"
        "    try:\n"
        "        await store.remember(sys.argv[3], 'guide', f'fact {sys.argv[4]}-{n}',"
        " max_items=13)\n"
        "        return True\n"
        "    except ValueError as exc:\n"
        "        assert 'memory is full' in str(exc)\n"
        "        return False\n"
        "async def main():\n"
        "    store = open_store(sys.argv[1], sqlite_path='unused', pool_size=4)\n"
        "    await store.open()\n"
        "    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "    kept = await asyncio.gather(*(one(store, n) for n in range(10)))\n"
        "    await store.aclose()\n"
        "    print(json.dumps(sum(kept)))\n"
        "asyncio.run(main())\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, database_url, str(start), user, str(p)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(4)
    ]
    total = 0
    for proc in procs:
        out, errors = proc.communicate(timeout=120)
        assert proc.returncode == 0, errors
        total += json.loads(out)
    assert total == 13
    kept = asyncio.run(_on(database_url, lambda store: store.memories(user, "guide")))
    assert len(kept) == 13


async def _on(url: str, operation: Callable[[ConversationStore], Awaitable[_T]]) -> _T:
    """``operation`` on a store of its own, closed after."""
    store = open_store(url, sqlite_path="unused")
    try:
        return await operation(store)
    finally:
        await store.aclose()


async def test_what_must_not_be_kept_is_refused(store: ConversationStore) -> None:
    alice = await store.add_user("alice")
    cases = {
        "": "must not be empty",
        "   ": "must not be empty",
        "x" * (FACT_CHARS + 1): f"at most {FACT_CHARS} characters",
        "two\nlines": "one line",
        # A Z.AI-shaped key (32 hex, a dot, 16 letters), built here so no key-shaped text is kept.
        "my key is " + "0123456789abcdef" * 2 + "." + "ABCDEFGHijklmnop": "key, a token",
        "api_key=supersecretvalue": "key, a token",
        "use sk-abcdefghijkl for it": "key, a token",
        "Authorization: Bearer abcdefghijklmnop": "key, a token",
    }
    for text, problem in cases.items():
        with pytest.raises(ValueError, match=problem):
            await store.remember(alice.id, "guide", text, max_items=5)
    with pytest.raises(ValueError, match="persona name"):
        await store.remember(alice.id, "bad persona", "fine", max_items=5)
    with pytest.raises(ValueError, match="max_items"):
        await store.remember(alice.id, "guide", "fine", max_items=0)
    with pytest.raises(ValueError, match="memory id"):
        await store.forget(alice.id, "mem_nothex")
    assert await store.memories(alice.id) == []
    assert check_fact("x" * FACT_CHARS) == "x" * FACT_CHARS


async def test_facts_go_with_their_user(store: ConversationStore) -> None:
    alice = await store.add_user("alice")
    bob = await store.add_user("bob")
    await store.remember(alice.id, "guide", "Alice likes tea", max_items=5)
    await store.remember(bob.id, "guide", "Bob likes coffee", max_items=5)
    assert await store.remove_user("alice")
    assert await store.memories(alice.id) == []
    assert [m.text for m in await store.dump_memories()] == ["Bob likes coffee"]


async def test_facts_dump_and_restore_without_overwriting(
    make_store: MakeStore, tmp_path: Path
) -> None:
    source = make_store()
    alice = await source.add_user("alice")
    first = await source.remember(alice.id, "guide", "Alice likes tea", max_items=5)
    second = await source.remember(alice.id, "scout", "Alice climbs", max_items=5)
    await source.remember("admin", "guide", "the operator's own", max_items=5)
    dumped = await source.dump_memories()
    assert [m.text for m in dumped] == ["Alice likes tea", "Alice climbs", "the operator's own"]
    other = open_store(str(tmp_path / "other.sqlite3"), sqlite_path="unused")
    try:
        # Facts of a user the target lacks are left out; the accounts come first (db copy).
        assert await other.restore_memories(dumped) == 1
        await other.restore_accounts(await source.dump_accounts())
        assert await other.restore_memories(dumped) == 2
        assert await other.restore_memories(dumped) == 0
        assert await other.memories(alice.id) == [second, first]
    finally:
        await other.aclose()
    bad = (Memory("mem_0123456789abcdef", alice.id, "guide", "token=abcdefgh1234", "x"),)
    with pytest.raises(ValueError, match="key, a token"):
        await source.restore_memories(bad)


async def test_the_schema_version_counts_the_memories_migration(store: ConversationStore) -> None:
    from generic_framework.store.postgres_schema import MIGRATIONS as PG
    from generic_framework.store.sqlite_schema import MIGRATIONS

    assert len(PG) == len(MIGRATIONS)
    assert await store.schema_version() == len(MIGRATIONS)
