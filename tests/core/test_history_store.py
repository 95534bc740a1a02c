"""The SQLite conversation store and history across Persona objects."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conversation_turns import turn
from zai_script import Script, call, completion, make_settings

from generic_framework.core.persona import Persona
from generic_framework.errors import ConfigError
from generic_framework.runtime import Runtime
from generic_framework.store.sqlite import MIGRATIONS, SQLiteStore
from generic_framework.tools import tool
from generic_framework.wire.client import GLMClient
from generic_framework.wire.messages import (
    AssistantMessage,
    UserMessage,
)

MakeScript = Callable[..., Script]
MakeClient = Callable[..., GLMClient]


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


# The round trip, last turns and deletion are the store contract's (tests/store), run on
# SQLite and PostgreSQL alike; what follows is SQLite's own.


async def test_the_file_s_missing_folders_are_created(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "deep" / "db.sqlite3")
    assert await store.append_turn("c", "scout", turn(1)) == 1
    await store.aclose()
    assert (tmp_path / "deep" / "db.sqlite3").is_file()


async def test_file_is_wal_and_migrated(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    await store.append_turn("c", "p", turn(1))
    await store.aclose()
    with sqlite3.connect(tmp_path / "db.sqlite3") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    again = SQLiteStore(tmp_path / "db.sqlite3")  # reopening re-runs nothing
    assert len(await again.load("c", 5)) == 2
    await again.aclose()


async def test_a_failing_write_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    store = SQLiteStore(path)
    await store.append_turn("c", "p", turn(1))
    with sqlite3.connect(path) as db:  # make the third message of a turn fail mid-transaction
        db.execute(
            "CREATE TRIGGER fail BEFORE INSERT ON messages WHEN NEW.body LIKE '%FAIL%'"
            " BEGIN SELECT RAISE(ABORT, 'disk trouble'); END"
        )
    broken = [UserMessage(content="q"), AssistantMessage(content="a"), UserMessage(content="FAIL")]
    with pytest.raises(sqlite3.IntegrityError, match="disk trouble"):
        await store.append_turn("c", "p", broken)
    with pytest.raises(ValueError):
        await store.append_turn("c", "p", [])
    assert len(await store.load("c", 10)) == 2
    stored = await store.get("c")
    assert stored is not None and {m.turn for m in stored} == {1}
    assert await store.append_turn("c", "p", turn(2)) == 2
    await store.aclose()


async def test_two_stores_on_one_file_number_turns_without_gaps(tmp_path: Path) -> None:
    """Two connections (as two processes would have) write concurrently from threads."""
    path = tmp_path / "shared.sqlite3"
    await SQLiteStore(path).aclose()
    numbers: list[int] = []
    lock = threading.Lock()

    def writer() -> None:
        async def write() -> None:
            store = SQLiteStore(path)
            for n in range(10):
                number = await store.append_turn("shared", "p", turn(n))
                with lock:
                    numbers.append(number)
            await store.aclose()

        asyncio.run(write())

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(numbers) == list(range(1, 21))
    store = SQLiteStore(path)
    assert len(await store.load("shared", 100)) == 40
    await store.aclose()


async def test_unusable_path_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = SQLiteStore(blocker / "db.sqlite3")
    with pytest.raises(ConfigError, match="DATA_DIR"):
        await store.load("c", 1)


async def test_a_file_that_is_not_a_database_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    path.write_bytes(b"these bytes are not a database " * 200)
    store = SQLiteStore(path)
    with pytest.raises(ConfigError, match=r"is damaged \(file is not a database\)") as caught:
        await store.load("c", 5)
    assert str(path) in str(caught.value)
    # Moved aside by the operator: the same store object opens a fresh file.
    path.rename(tmp_path / "broken.sqlite3")
    assert await store.append_turn("c", "p", turn(1)) == 1
    await store.aclose()


async def test_a_damaged_page_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    store = SQLiteStore(path)
    for n in range(60):
        await store.append_turn(f"c{n % 3}", "p", turn(n, with_tool=True))
    await store.aclose()
    data = bytearray(path.read_bytes())
    assert len(data) > 6 * 4096
    data[3 * 4096 : 6 * 4096] = b"\xff" * (3 * 4096)  # pages in the middle of the tables
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"is damaged \(database disk image is malformed\)"):
        await store.load("c0", 100)
    await store.aclose()


async def test_history_survives_a_new_persona_on_the_same_data_dir(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path)
    s = script(
        completion("", tool_calls=[call("echo", {"text": "hi"}, id="e1")], reasoning="think"),
        completion("First answer."),
        completion("Second answer."),
    )
    first = Persona("p", "System.", [echo], runtime=Runtime(settings, client=client_for(s)))
    await first.respond("// one", conversation_id="u42")
    await first.runtime.aclose()
    second = Persona("p", "System.", [echo], runtime=Runtime(settings, client=client_for(s)))
    reply = await second.respond("two", conversation_id="u42")
    await second.runtime.aclose()
    assert reply.content == "Second answer."
    assert s.requests[2]["messages"] == [
        {"role": "system", "content": "System."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "tool_calls": [{"id": "e1", "type": "function",
         "function": {"name": "echo", "arguments": '{"text": "hi"}'}}], "content": None},
        {"role": "tool", "content": "hi", "tool_call_id": "e1"},
        {"role": "assistant", "content": "First answer."},
        {"role": "user", "content": "two"},
    ]  # fmt: skip
    assert (tmp_path / "conversations.sqlite3").exists()


async def test_preserved_thinking_keeps_earlier_reasoning(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, base_url="http://zai.test/api/coding/paas/v4")
    s = script(completion("One.", reasoning="why one"), completion("Two."))
    persona = Persona("p", "S.", runtime=Runtime(settings, client=client_for(s)))
    await persona.respond("1", conversation_id="c")
    await persona.respond("2", conversation_id="c")
    await persona.runtime.aclose()
    assert s.requests[1]["messages"][2] == {
        "role": "assistant",
        "content": "One.",
        "reasoning_content": "why one",
    }


async def test_history_turns_limits_what_is_sent(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, history_turns=1)
    s = script(completion("a1"), completion("a2"), completion("a3"))
    persona = Persona("p", "S.", runtime=Runtime(settings, client=client_for(s)))
    for text in ("q1", "q2", "q3"):
        await persona.respond(text, conversation_id="c")
    await persona.runtime.aclose()
    assert [m["content"] for m in s.requests[2]["messages"]] == ["S.", "q2", "a2", "q3"]


async def test_turns_on_one_conversation_run_one_at_a_time(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    @tool
    async def gate() -> str:
        """Wait for the test."""
        entered.set()
        await release.wait()
        return "open"

    s = script(
        completion("", tool_calls=[call("gate", "{}")]),
        completion("first"),
        completion("second"),
    )
    persona = Persona(
        "p", "S.", [gate], runtime=Runtime(make_settings(tmp_path), client=client_for(s))
    )
    first = asyncio.create_task(persona.respond("// a", conversation_id="c"))
    await entered.wait()
    second = asyncio.create_task(persona.respond("b", conversation_id="c"))
    await asyncio.sleep(0)  # let the second turn reach the lock
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(s.requests) == 1  # the second turn waits for the first
    release.set()
    replies = await asyncio.gather(first, second)
    assert [r.content for r in replies] == ["first", "second"]
    # The second turn saw the first one's whole turn.
    assert [m["role"] for m in s.requests[2]["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "user",
    ]  # fmt: skip
    await persona.runtime.aclose()


async def test_other_conversations_are_not_blocked(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @tool
    async def gate() -> str:
        """Wait for the test."""
        entered.set()
        await release.wait()
        return "open"

    s = script(completion("", tool_calls=[call("gate", "{}")]), completion("b"), completion("a"))
    persona = Persona(
        "p", "S.", [gate], runtime=Runtime(make_settings(tmp_path), client=client_for(s))
    )
    blocked = asyncio.create_task(persona.respond("// a", conversation_id="one"))
    # Conversation one holds its turn inside the tool before two starts: the scripted answers
    # go out in that order (two's turn could otherwise load its history first and call first).
    await asyncio.wait_for(entered.wait(), 30)
    other = await asyncio.wait_for(persona.respond("b", conversation_id="two"), 30)  # not forever
    assert other.content == "b"
    release.set()
    assert (await blocked).content == "a"
    await persona.runtime.aclose()
