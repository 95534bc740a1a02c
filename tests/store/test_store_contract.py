"""The store contract: every test runs on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from conversation_turns import turn

from generic_framework.citation import Citation
from generic_framework.store import (
    ConversationStore,
    TurnRecord,
    checksum,
    open_store,
)
from generic_framework.store.pictures import StoredPicture
from generic_framework.store.sqlite_schema import MIGRATIONS
from generic_framework.wire.messages import (
    AssistantMessage,
    Message,
    UserMessage,
)

MakeStore = Callable[[], ConversationStore]


def record(n: int) -> TurnRecord:
    return TurnRecord(
        input=f"//  question {n} \u00e9\u6f22",
        model="glm-4.7",
        stop_reason="completed",
        sources=(
            Citation(
                number=1,
                title="Title",
                url="https://example.org/a",
                site="Example",
                published="2026-01-02",
                snippet="s",
                ref="ref_1",
            ),
            Citation(number=2, url="https://example.org/b"),
        ),
        prompt_tokens=100 + n,
        completion_tokens=20,
        cached_tokens=64,
        reasoning_tokens=7,
        web_searches=1,
        rounds=2,
        started_at="2026-11-23T10:00:00.123+00:00",
        duration_ms=1234.5,
        round_ms=(1000.0, 234.5),
    )


class Exploding(UserMessage):
    """A message that fails while its turn is being written."""

    def model_dump_json(self, **kwargs: Any) -> str:
        raise RuntimeError("disk trouble")


async def test_round_trip_and_last_turns(store: ConversationStore) -> None:
    assert await store.load("c", 5) == []
    for n in range(1, 5):
        assert await store.append_turn("c", "scout", turn(n, with_tool=n % 2 == 0)) == n
    everything = await store.load("c", 100)
    assert [m.role for m in everything[:4]] == ["user", "assistant", "user", "assistant"]
    assert everything[3].tool_calls[0].id == "t2"  # type: ignore[union-attr]
    assert everything[3].reasoning_content == "r2"  # type: ignore[union-attr]
    last_two = await store.load("c", 2)
    assert last_two[0] == UserMessage(content="question 3")
    assert last_two == everything[-len(last_two) :]
    assert await store.load("c", 0) == []
    stored = await store.get("c")
    assert stored is not None and [m.turn for m in stored][:3] == [1, 1, 2]
    assert [m.message for m in stored] == everything
    assert {m.persona for m in stored} == {"scout"} and stored[0].created_at
    assert await store.get("other") is None


async def test_delete(store: ConversationStore) -> None:
    await store.append_turn("c", "p", turn(1, with_tool=True))
    await store.append_turn("d", "p", turn(1))
    assert await store.delete("c") is True
    assert await store.delete("c") is False
    assert await store.get("c") is None and await store.load("c", 5) == []
    assert await store.turns("c") is None
    assert await store.conversation_ids() == ["d"]
    assert await store.append_turn("c", "p", turn(1)) == 1  # a new conversation


async def test_the_turn_record_is_kept(store: ConversationStore) -> None:
    await store.append_turn("c", "scout", turn(1))
    await store.append_turn("c", "scout", turn(2), record(2))
    turns = await store.turns("c")
    assert turns is not None and [t.turn for t in turns] == [1, 2]
    assert turns[0].record is None
    assert turns[1].record == record(2)
    assert turns[1].record.input.startswith("//")
    assert list(turns[1].messages) == turn(2)
    assert turns[1].persona == "scout" and turns[1].created_at.endswith("+00:00")


async def test_a_failing_write_stores_nothing(store: ConversationStore) -> None:
    await store.append_turn("c", "p", turn(1))
    broken: list[Message] = [UserMessage(content="q"), AssistantMessage(content="a")]
    broken.append(Exploding(content="boom"))
    with pytest.raises(RuntimeError, match="disk trouble"):
        await store.append_turn("c", "p", broken)
    with pytest.raises(ValueError):
        await store.append_turn("c", "p", [])
    with pytest.raises(ValueError):
        await store.append_turn("", "p", turn(1))
    assert len(await store.load("c", 10)) == 2
    assert [t.turn for t in await store.turns("c") or []] == [1]
    assert await store.append_turn("c", "p", turn(2)) == 2


async def test_concurrent_appends_number_turns_without_gaps(make_store: MakeStore) -> None:
    """Two stores (two processes) append to one conversation at once."""
    first, second = make_store(), make_store()

    async def write(store: ConversationStore, offset: int) -> list[int]:
        return [await store.append_turn("shared", "p", turn(offset + n)) for n in range(10)]

    numbers = await asyncio.gather(write(first, 0), write(second, 100))
    assert sorted(numbers[0] + numbers[1]) == list(range(1, 21))
    assert len(await first.load("shared", 100)) == 40


async def test_a_held_conversation_loads_and_appends(store: ConversationStore) -> None:
    async with store.lock("c") as held:
        assert await held.load(5) == []
        assert await held.append_turn("p", turn(1), record(1)) == 1
    async with store.lock("c") as held:
        assert await held.load(5) == turn(1)
        assert await held.append_turn("p", turn(2)) == 2
    turns = await store.turns("c")
    assert turns is not None and turns[0].record == record(1)


async def test_a_failed_turn_under_the_lock_stores_nothing(store: ConversationStore) -> None:
    with pytest.raises(RuntimeError, match="the model failed"):
        async with store.lock("c") as held:
            await held.load(5)
            raise RuntimeError("the model failed")
    assert await store.get("c") is None
    async with store.lock("c") as held:
        assert await held.append_turn("p", turn(1)) == 1


async def test_ids_dump_restore_and_checksum(make_store: MakeStore, backend: str) -> None:
    source = make_store()
    for cid in ("b", "a"):
        await source.append_turn(cid, "scout", turn(1, with_tool=True), record(1))
        await source.append_turn(cid, "helper", turn(2))
    assert await source.conversation_ids() == ["a", "b"]
    dump = await source.dump("a")
    assert dump is not None and len(dump.turns) == 2 and dump.message_count == 6
    assert await source.dump("missing") is None
    with pytest.raises(ValueError, match="already exists"):
        await source.restore(dump)
    await source.delete("a")
    await source.restore(dump)
    again = await source.dump("a")
    assert again == dump and checksum(again) == checksum(dump)
    assert await source.append_turn("a", "scout", turn(3)) == 3  # the counter came along
    assert checksum(await source.dump("a") or dump) != checksum(dump)


async def test_schema_version_is_the_latest(store: ConversationStore) -> None:
    await store.open()
    await store.open()  # a second open does nothing
    assert await store.schema_version() == len(MIGRATIONS)


async def test_a_closed_store_is_not_reopened_silently(database_url: str, backend: str) -> None:
    store = open_store(database_url, sqlite_path="unused")
    await store.append_turn("c", "p", turn(1))
    await store.aclose()
    reopened = open_store(database_url, sqlite_path="unused")
    try:
        assert await reopened.load("c", 1) == turn(1)
    finally:
        await reopened.aclose()


async def test_copying_between_backends_keeps_the_checksum(
    make_store: MakeStore, tmp_path: Any, backend: str
) -> None:
    here = make_store()
    await here.append_turn("x", "scout", turn(1, with_tool=True), record(1))
    await here.append_turn("x", "scout", turn(2, text="NUL\u0000 and emoji \U0001f600"))
    other = open_store(f"sqlite:///{tmp_path / 'other.sqlite3'}", sqlite_path="unused")
    try:
        dump = await here.dump("x")
        assert dump is not None
        await other.restore(dump)
        assert checksum(await other.dump("x") or dump) == checksum(dump)
    finally:
        await other.aclose()


async def test_a_title_of_its_own_is_listed_dumped_and_restored(make_store: MakeStore) -> None:
    store = make_store()
    await store.append_turn("named", "scout", turn(1, text="the first input"))
    assert await store.rename("named", "  Trip plans  ") is True
    assert await store.rename("missing", "Anything") is False
    (listed,) = await store.list_conversations()
    assert listed.title == "Trip plans"
    for bad in ("", "   ", "two\nlines", "x" * 201):
        with pytest.raises(ValueError, match="title"):
            await store.rename("named", bad)
    dump = await store.dump("named")
    assert dump is not None and dump.title == "Trip plans"
    await store.delete("named")
    await store.restore(dump)
    assert (await store.list_conversations())[0].title == "Trip plans"
    untitled = await store.dump("named")
    assert untitled is not None
    # The title is part of the checksum: a copy that lost it does not compare equal.
    assert checksum(replace(untitled, title=None)) != checksum(untitled)


async def test_delete_last_turn_removes_one_whole_turn(store: ConversationStore) -> None:
    await store.append_turn("c", "scout", turn(1))
    await store.append_turn("c", "scout", turn(2, with_tool=True))
    assert await store.delete_last_turn("c") is True
    turns = await store.turns("c")
    assert turns is not None and [t.turn for t in turns] == [1]
    stored = await store.get("c")
    assert stored is not None and [m.message.role for m in stored] == ["user", "assistant"]
    assert await store.load("c", 5) == turn(1)  # no orphan tool message, nothing of turn 2
    assert await store.append_turn("c", "helper", turn(3)) == 2  # the number is used again
    (listed,) = await store.list_conversations()
    assert listed.turns == 2 and listed.persona == "helper"
    # The only turn: the conversation goes with it.
    await store.append_turn("single", "scout", turn(1))
    assert await store.delete_last_turn("single") is True
    assert await store.turns("single") is None
    assert await store.delete_last_turn("single") is False
    assert await store.delete_last_turn("never") is False


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def pictured(n: int) -> tuple[StoredPicture, ...]:
    return (
        StoredPicture(sha256=f"{n:064x}", mime="image/png", data=PNG, description=f"seen {n}"),
        StoredPicture(sha256="f" * 64, mime="", url="https://pictures.invalid/a.png"),
    )


async def test_a_turn_s_pictures_are_kept_dumped_restored_and_removed_with_it(
    make_store: MakeStore,
) -> None:
    store = make_store()
    await store.append_turn("c", "scout", turn(1), record(1), pictured(1))
    async with store.lock("c", history=1) as held:
        await held.load(1)
        await held.append_turn("scout", turn(2), None, pictured(2))
    await store.append_turn("c", "scout", turn(3))
    kept = await store.picture("c", f"{2:064x}")
    assert kept == replace(pictured(2)[0], turn=2, seq=0)
    linked = await store.picture("c", "f" * 64)
    assert linked is not None and linked.turn == 1 and linked.seq == 1 and linked.data == b""
    assert await store.picture("other", f"{1:064x}") is None
    dump = await store.dump("c")
    assert dump is not None and [(p.turn, p.seq) for p in dump.pictures] == [
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
    ]
    # The pictures are part of the checksum, and come back whole with a restore.
    assert checksum(replace(dump, pictures=())) != checksum(dump)
    await store.delete("c")
    assert await store.picture("c", f"{1:064x}") is None
    await store.restore(dump)
    assert await store.dump("c") == dump
    # Removing the last turn with pictures removes them; the conversation, the rest.
    await store.delete_last_turn("c")
    await store.delete_last_turn("c")
    assert await store.picture("c", f"{2:064x}") is None
    assert await store.picture("c", f"{1:064x}") is not None
    await store.delete("c")
    assert await store.picture("c", f"{1:064x}") is None
