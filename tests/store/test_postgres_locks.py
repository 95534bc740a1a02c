"""PostgreSQL turns hold their conversation without a transaction: session advisory locks on one
dedicated connection per store (docs/design/0314). Two stores on one database stand for two
replicas."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

import pytest

from generic_framework.errors import StoreUnavailableError
from generic_framework.store.postgres import PostgresStore
from generic_framework.store.postgres_locks import conversation_key
from generic_framework.wire.messages import AssistantMessage, Message, UserMessage

_OTHERS = "datname = current_database() AND pid <> pg_backend_pid()"
IDLE_IN_TRANSACTION = (
    f"SELECT count(*) FROM pg_stat_activity WHERE {_OTHERS}"
    " AND state IN ('idle in transaction', 'idle in transaction (aborted)')"
)
HOLDERS = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
SLEEPING = f"SELECT count(*) FROM pg_stat_activity WHERE {_OTHERS} AND wait_event = 'PgSleep'"


def turn(text: str) -> list[Message]:
    return [UserMessage(content=text), AssistantMessage(content=f"answer to {text}")]


@pytest.fixture
def url(postgres_server: Any) -> str:
    return str(postgres_server.create_database())


async def query(server: Any, url: str, sql: str) -> list[tuple[Any, ...]]:
    return list(await asyncio.to_thread(server.query, url, sql))


async def test_a_held_turn_keeps_no_transaction_open(url: str, postgres_server: Any) -> None:
    store = PostgresStore(url, pool_size=1)
    try:
        async with store.lock("c") as held:
            assert await held.load(10) == []
            await asyncio.sleep(0.2)  # the model works
            assert await query(postgres_server, url, IDLE_IN_TRANSACTION) == [(0,)]
            assert len(await query(postgres_server, url, HOLDERS)) == 1
            await held.append_turn("p", turn("one"))
        assert await query(postgres_server, url, HOLDERS) == []
        assert [t.turn for t in await store.turns("c") or []] == [1]
    finally:
        await store.aclose()


async def test_running_turns_are_not_capped_by_the_pool(url: str) -> None:
    store = PostgresStore(url, pool_size=1)
    await store.open()
    work = 1.0  # each turn's model time: the five others' overhead must fit in it

    async def one(cid: str) -> None:
        async with store.lock(cid) as held:
            await held.load(10)
            await asyncio.sleep(work)
            await held.append_turn("p", turn(cid))

    try:
        started = time.monotonic()
        await asyncio.gather(*(one(f"c{i}") for i in range(6)))
        # Six turns at once, not one after another (6 s on the one pooled connection); the
        # bound is that, not a guess at a loaded machine's overhead.
        assert time.monotonic() - started < 6 * work
        assert len(await store.conversation_ids()) == 6
    finally:
        await store.aclose()


async def test_two_replicas_never_overlap_and_each_turn_sees_the_last(url: str) -> None:
    replicas = [PostgresStore(url), PostgresStore(url)]
    inside: list[int] = []
    seen: dict[str, int] = {}

    async def one(n: int) -> None:
        await asyncio.sleep(0.02 * n)
        async with replicas[n % 2].lock("c", history=100) as held:
            inside.append(n)
            assert len(inside) == 1, f"turns {inside} overlap"
            seen[f"t{n}"] = len(await held.load(100)) // 2
            await asyncio.sleep(0.05)
            inside.remove(n)
            await held.append_turn("p", turn(f"t{n}"))

    try:
        await asyncio.gather(*(one(n) for n in range(12)))
        stored = await replicas[0].turns("c") or []
        assert [t.turn for t in stored] == list(range(1, 13))
        texts = [t.messages[0].content for t in stored]
        assert [seen[str(text)] for text in texts] == list(range(12))  # each saw all before it
    finally:
        for each in replicas:
            await each.aclose()


async def test_turns_of_one_replica_keep_their_order(url: str) -> None:
    store = PostgresStore(url)

    async def one(n: int) -> None:
        async with store.lock("c") as held:
            await held.load(100)
            await asyncio.sleep(0.01 * (5 - n % 5))  # earlier turns work longer
            await held.append_turn("p", turn(f"t{n}"))

    try:
        tasks = []
        for n in range(10):
            tasks.append(asyncio.create_task(one(n)))
            await asyncio.sleep(0)  # arrival order
        await asyncio.gather(*tasks)
        stored = await store.turns("c") or []
        assert [t.messages[0].content for t in stored] == [f"t{n}" for n in range(10)]
    finally:
        await store.aclose()


HOLDER = """
import asyncio, sys, time
from generic_framework.store.postgres import PostgresStore
from generic_framework.store.postgres_locks import conversation_key

async def main():
    store = PostgresStore(sys.argv[1])
    async with store.lock("c") as held:
        await held.load(10)
        print("held", flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


async def test_a_crashed_replica_s_hold_ends_with_its_session(url: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url], stdout=subprocess.PIPE, text=True
    )
    store = PostgresStore(url)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5), store.lock("c"):
                pass
        holder.kill()  # SIGKILL: no clean-up of the holder runs
        started = time.monotonic()
        async with asyncio.timeout(10), store.lock("c") as held:
            await held.append_turn("p", turn("after the crash"))
        assert time.monotonic() - started < 5
    finally:
        holder.kill()
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
        await store.aclose()


async def test_a_lost_connection_fails_the_turn_holding_its_lock(
    url: str, postgres_server: Any
) -> None:
    first, second = PostgresStore(url), PostgresStore(url)
    try:
        async with first.lock("c") as held:
            await held.load(10)
            [(pid,)] = await query(postgres_server, url, HOLDERS)
            await query(postgres_server, url, f"SELECT pg_terminate_backend({pid})")
            # The lock went with the session: another replica takes it and stores a turn.
            async with asyncio.timeout(5), second.lock("c") as other:
                await other.append_turn("p", turn("second"))
            # The first replica connects again for another conversation: a new session,
            # which does not hold "c".
            async with first.lock("d") as unrelated:
                await unrelated.append_turn("p", turn("elsewhere"))
            with pytest.raises(StoreUnavailableError, match="lock was lost"):
                await held.append_turn("p", turn("first"))
        stored = await second.turns("c") or []
        assert [t.messages[0].content for t in stored] == ["second"]
        async with first.lock("c") as held:
            assert len(await held.load(10)) == 2
            await held.append_turn("p", turn("third"))
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_turn_whose_write_fails_commits_nothing_then_gives_the_lock_back(
    url: str, postgres_server: Any
) -> None:
    store = PostgresStore(url)
    try:
        async with store.lock("c") as held:
            await held.append_turn("p", turn("one"))
        # The next turn's number is taken already: its write fails on the server.
        await query(
            postgres_server,
            url,
            "INSERT INTO turns (conversation_id, turn, persona, created_at)"
            " VALUES ('c', 2, 'p', now())",
        )
        with pytest.raises(Exception, match="duplicate key"):
            async with store.lock("c") as held:
                await held.append_turn("p", turn("two"))
        assert await query(postgres_server, url, HOLDERS) == []  # given back after the failure
        assert await query(postgres_server, url, IDLE_IN_TRANSACTION) == [(0,)]
        assert await query(postgres_server, url, "SELECT turns FROM conversations") == [(1,)]
        await query(postgres_server, url, "DELETE FROM turns WHERE turn = 2")
        async with store.lock("c") as held:  # the same connection serves the next turn
            assert [m.content for m in await held.load(1)] == ["one", "answer to one"]
            assert await held.append_turn("p", turn("two")) == 2
        assert await query(postgres_server, url, HOLDERS) == []
    finally:
        await store.aclose()


async def test_the_turn_and_the_release_are_one_statement_and_the_lock_outlives_the_write(
    url: str, postgres_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    store = PostgresStore(url)
    await store.open()
    # The turn's statement sleeps at its end, after its writes, before its commit: long
    # enough for two checks from new connections on a busy machine.
    await query(
        postgres_server,
        url,
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN PERFORM pg_sleep(3); RETURN NULL; END $$;"
        " CREATE TRIGGER slow AFTER INSERT ON messages FOR EACH STATEMENT EXECUTE FUNCTION slow()",
    )
    sent: list[str] = []
    execute = psycopg.AsyncCursor.execute

    async def counted(self: Any, sql: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(sql))
        return await execute(self, sql, *args, **kwargs)

    try:
        async with store.lock("c", history=1) as held:
            await held.load(1)
            monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted)
            writing = asyncio.ensure_future(held.append_turn("p", turn("one")))
            deadline = time.monotonic() + 30
            while await query(postgres_server, url, SLEEPING) != [(1,)]:  # in the trigger
                assert time.monotonic() < deadline, "the write never reached its trigger"
            # Uncommitted: another session can neither take the conversation nor see the turn.
            key = conversation_key("c")
            assert await query(postgres_server, url, f"SELECT pg_try_advisory_lock({key})") == [
                (False,)
            ]
            assert await query(postgres_server, url, "SELECT count(*) FROM turns") == [(0,)]
            assert await writing == 1
            monkeypatch.undo()
        assert len(sent) == 1  # the write, its commit and the release in one round trip
        assert await query(postgres_server, url, HOLDERS) == []
        assert await query(postgres_server, url, f"SELECT pg_try_advisory_lock({key})") == [(True,)]
    finally:
        monkeypatch.undo()
        await store.aclose()


async def test_the_lock_s_try_and_the_history_read_are_one_query(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    store = PostgresStore(url)
    sent: list[str] = []
    execute = psycopg.AsyncCursor.execute

    async def counted(self: Any, sql: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(sql.decode() if isinstance(sql, bytes) else str(sql))
        return await execute(self, sql, *args, **kwargs)

    try:
        async with store.lock("u0123456789ab/c-1_x") as held:
            await held.append_turn("p", turn("one"))
        monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted)
        async with store.lock("u0123456789ab/c-1_x", history=1) as held:
            monkeypatch.undo()
            assert [m.content for m in await held.load(1)] == ["one", "answer to one"]
            await held.append_turn("p", turn("two"))
        # One query, no pipeline: the try and the read prepared in the session, the id bound.
        assert sent == [
            f"EXECUTE gf_try({conversation_key('u0123456789ab/c-1_x')});"
            " EXECUTE gf_history('u0123456789ab/c-1_x', 1)"
        ]
    finally:
        monkeypatch.undo()
        await store.aclose()


async def test_a_statement_s_text_arguments_are_escaped(url: str) -> None:
    import psycopg

    from generic_framework.store.postgres_locks import execute_text

    hostile = "x'); DROP TABLE messages; -- \\ '' \\' é"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("PREPARE echo (text, integer) AS SELECT $1, $2")
        cursor = await conn.execute(execute_text(conn, "echo", (hostile, -7)), prepare=False)
        assert await cursor.fetchall() == [(hostile, -7)]
        cursor = await conn.execute("SELECT to_regclass('messages') IS NOT NULL")
        assert await cursor.fetchall() == [(True,)]


async def test_message_bodies_keep_every_character_through_the_turn_s_json_arrays(
    url: str,
) -> None:
    text = 'quote " backslash \\ \\u0000 NUL \x00 newline \n tab \t 漢字 😀 [1, "a"]'
    store = PostgresStore(url)
    try:
        async with store.lock("c", history=1) as held:
            await held.append_turn("p", [UserMessage(content=text), AssistantMessage(content=text)])
        async with store.lock("c", history=1) as held:
            assert [m.content for m in await held.load(1)] == [text, text]
        assert [m.content for m in await store.load("c", 1)] == [text, text]
    finally:
        await store.aclose()
