"""Chat states and claimed updates in the store: every test runs on SQLite and on a real
PostgreSQL server; the races run several processes on one database."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from generic_framework.store import ConversationStore, open_store
from generic_framework.store.chats import (
    UPDATE_KEEP_SECONDS,
    ChatState,
    ChatStateRow,
    check_chat_key,
    check_platform,
)
from generic_framework.store.sqlite_schema import MIGRATIONS

MakeStore = Callable[[], ConversationStore]


async def test_a_chat_keeps_its_conversation_and_persona(make_store: MakeStore) -> None:
    store, other = make_store(), make_store()
    assert await store.chat_state("telegram", "1001") is None
    await store.set_chat_state("telegram", "1001", ChatState("tg-1001-a"))
    await store.set_chat_state("telegram", "-100200:7", ChatState("tg-topic", "scout"))
    assert await other.chat_state("telegram", "1001") == ChatState("tg-1001-a", None)
    # /new: a fresh conversation id replaces the old one; /persona: the chosen persona.
    await other.set_chat_state("telegram", "1001", ChatState("tg-1001-b", "guide.v2"))
    assert await store.chat_state("telegram", "1001") == ChatState("tg-1001-b", "guide.v2")
    assert await store.chat_state("telegram", "-100200:7") == ChatState("tg-topic", "scout")
    assert await store.chat_state("telegram", "-100200") is None  # the group is not its topic
    assert await store.chat_state("discord", "1001") is None  # chats are per platform


async def test_an_update_is_claimed_once_across_stores(make_store: MakeStore) -> None:
    first, second = make_store(), make_store()
    assert await first.claim_update("telegram", 100)
    assert not await second.claim_update("telegram", 100)
    assert not await first.claim_update("telegram", 100)
    assert await second.claim_update("telegram", 101)
    assert await first.claim_update("discord", 100)  # update ids are per platform
    assert await first.claim_update("telegram", 2**40)  # Telegram's ids outgrow 32 bits


async def test_many_tasks_claiming_the_same_updates_win_once_each(make_store: MakeStore) -> None:
    stores = [make_store() for _ in range(4)]
    ids = range(500, 520)
    results = await asyncio.gather(
        *(s.claim_update("telegram", i) for i in ids for s in stores for _ in range(3))
    )
    wins = [r for r in results if r]
    assert len(results) == 240 and len(wins) == 20


def test_processes_racing_on_one_database_win_once_each(database_url: str) -> None:
    # Four processes (replicas) claim the same 40 update ids at the same moment.
    start = time.time() + 3.0
    script = (
        "import asyncio, json, sys, time\n"
        "from generic_framework.store import open_store\n"
        "async def main():\n"
        "    store = open_store(sys.argv[1], sqlite_path='unused', pool_size=4)\n"
        "    await store.open()\n"
        "    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "    won = await asyncio.gather(*(store.claim_update('telegram', i) for i in range(40)))\n"
        "    await store.aclose()\n"
        "    print(json.dumps([i for i, w in enumerate(won) if w]))\n"
        "asyncio.run(main())\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, database_url, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    won: list[int] = []
    for proc in procs:
        out, errors = proc.communicate(timeout=120)
        assert proc.returncode == 0, errors
        won += json.loads(out)
    assert sorted(won) == list(range(40))


async def _age_claims(url: str, server: Any, seconds: float) -> None:
    """Make every claim ``seconds`` older, as the store's clock sees it."""
    if url.startswith("postgresql"):
        server.query(
            url,
            "UPDATE claimed_updates SET claimed_at = claimed_at - make_interval(secs => %s)",
            seconds,
        )
        return
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        db.execute("UPDATE claimed_updates SET claimed_at = claimed_at - ?", (seconds,))


async def test_claims_older_than_two_days_are_purged(
    make_store: MakeStore, database_url: str, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("postgres_server") if "postgres" in database_url else None
    store = make_store()
    assert await store.claim_update("telegram", 1)
    assert await store.claim_update("telegram", 2)
    await _age_claims(database_url, server, UPDATE_KEEP_SECONDS + 60)
    assert await store.claim_update("telegram", 3)
    await _age_claims(database_url, server, UPDATE_KEEP_SECONDS - 3600)  # 3 is a day old
    # A store's first claim purges (then at most every minute): 1 and 2 are forgotten, 3 is not.
    later = make_store()
    assert await later.claim_update("telegram", 1)
    assert not await later.claim_update("telegram", 3)
    assert await later.claim_update("telegram", 2)


async def test_bad_keys_and_states_are_refused(store: ConversationStore) -> None:
    for platform in ("", "Telegram", "tele gram", "x" * 33, "1tg"):
        with pytest.raises(ValueError, match="chat platform"):
            await store.chat_state(platform, "1")
    for chat in ("", "a/b", "1 2", "x" * 129, "1\n"):
        with pytest.raises(ValueError, match="chat key"):
            await store.set_chat_state("telegram", chat, ChatState("c1"))
    for update in (-1, 2**63, True):
        with pytest.raises(ValueError, match="update id"):
            await store.claim_update("telegram", update)
    with pytest.raises(ValueError, match="conversation"):
        ChatState("a.b")
    with pytest.raises(ValueError, match="persona name"):
        ChatState("c1", "bad persona")
    assert check_platform("matrix") == "matrix" and check_chat_key("x" * 128) == "x" * 128
    assert ChatState("u0123456789ab/tg-1").conversation_id == "u0123456789ab/tg-1"


async def test_chat_states_dump_and_restore_without_overwriting(
    make_store: MakeStore, tmp_path: Path
) -> None:
    source = make_store()
    await source.set_chat_state("telegram", "1001", ChatState("tg-a", "scout"))
    await source.set_chat_state("telegram", "-5:3", ChatState("tg-b"))
    await source.claim_update("telegram", 9)
    rows = await source.dump_chat_states()
    assert [(r.platform, r.chat, r.state) for r in rows] == [
        ("telegram", "-5:3", ChatState("tg-b")),
        ("telegram", "1001", ChatState("tg-a", "scout")),
    ]
    assert all(r.updated_at.endswith("+00:00") for r in rows)
    other = open_store(str(tmp_path / "other.sqlite3"), sqlite_path="unused")
    try:
        await other.set_chat_state("telegram", "1001", ChatState("kept"))
        assert await other.restore_chat_states(rows) == 1
        assert await other.restore_chat_states(rows) == 0
        assert await other.chat_state("telegram", "1001") == ChatState("kept")
        assert await other.chat_state("telegram", "-5:3") == ChatState("tg-b")
        restored = {r.chat: r.updated_at for r in await other.dump_chat_states()}
        assert restored["-5:3"] == rows[0].updated_at
        assert await other.claim_update("telegram", 9)  # claims are not part of the dump
    finally:
        await other.aclose()
    bad = (ChatStateRow("Telegram", "1", ChatState("c"), rows[0].updated_at),)
    with pytest.raises(ValueError, match="chat platform"):
        await source.restore_chat_states(bad)


def test_a_version_6_sqlite_file_is_migrated_keeping_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v6.sqlite3"
    db = sqlite3.connect(path)
    for step in MIGRATIONS[:6]:
        step(db)
    stamp = "2026-01-01T00:00:00.000+00:00"
    db.execute(
        "INSERT INTO conversations (id, turns, created_at, updated_at) VALUES ('old-1', 0, ?, ?)",
        (stamp, stamp),
    )
    db.execute(
        "INSERT INTO users (id, name, role, created_at)"
        " VALUES ('u0123456789ab', 'carol', 'user', ?)",
        (stamp,),
    )
    db.execute("PRAGMA user_version = 6")
    db.commit()
    db.close()

    async def check() -> None:
        store = open_store(str(path), sqlite_path="unused")
        try:
            assert await store.schema_version() == len(MIGRATIONS)
            assert await store.conversation_ids() == ["old-1"]
            assert [u.name for u in await store.users()] == ["admin", "carol"]
            await store.set_chat_state("telegram", "42", ChatState("old-1"))
            assert await store.chat_state("telegram", "42") == ChatState("old-1")
            assert await store.claim_update("telegram", 1)
        finally:
            await store.aclose()

    asyncio.run(check())


async def test_a_version_6_postgres_database_is_migrated_keeping_its_data(
    postgres_server: Any,
) -> None:
    import psycopg

    url = postgres_server.create_database(version=6)
    with psycopg.connect(url, autocommit=True) as conn:  # a database left at version 6
        conn.execute("INSERT INTO conversations (id, turns, created_at, updated_at)"
                     " VALUES ('old-1', 0, now(), now())")  # fmt: skip
        conn.execute("INSERT INTO users (id, name, role) VALUES ('u0123456789ab', 'carol', 'user')")
    store = open_store(url, sqlite_path="unused")
    try:
        assert await store.schema_version() == len(MIGRATIONS)
        assert await store.conversation_ids() == ["old-1"]
        assert [u.name for u in await store.users()] == ["admin", "carol"]
        await store.set_chat_state("telegram", "42", ChatState("old-1", "scout"))
        assert await store.chat_state("telegram", "42") == ChatState("old-1", "scout")
        assert await store.claim_update("telegram", 1)
    finally:
        await store.aclose()
