"""The conversation list (``list_conversations``) on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from generic_framework.store import ConversationDump, ConversationStore, StoredTurn, TurnRecord
from generic_framework.store.base import TITLE_CHARS, split_cursor
from generic_framework.wire.messages import AssistantMessage, Message, UserMessage


def turn(text: str) -> list[Message]:
    return [UserMessage(content=text.removeprefix("//").strip()), AssistantMessage(content="ok")]


async def add(store: ConversationStore, cid: str, persona: str, typed: str) -> None:
    await store.append_turn(cid, persona, turn(typed), TurnRecord(input=typed, model="glm-4.7"))
    await asyncio.sleep(0.003)  # SQLite keeps milliseconds: the next write is later


async def test_newest_first_with_persona_title_and_turn_count(store: ConversationStore) -> None:
    await add(store, "a", "scout", "//  weather in Nanaimo?")
    await add(store, "b", "helper", "what is 2+2?")
    await add(store, "a", "helper", "and tomorrow?")  # a is now the newest; its persona changed

    listed = await store.list_conversations()

    assert [(c.id, c.persona, c.title, c.turns) for c in listed] == [
        ("a", "helper", "//  weather in Nanaimo?", 2),  # the first input, as typed
        ("b", "helper", "what is 2+2?", 1),
    ]
    assert listed[0].updated_at > listed[1].updated_at
    assert listed[0].created_at < listed[0].updated_at
    assert all(c.updated_at.endswith("+00:00") for c in listed)


async def test_pages_follow_each_other_without_gaps_or_repeats(store: ConversationStore) -> None:
    ids = [f"c{n:02d}" for n in range(7)]
    for cid in ids:
        await add(store, cid, "scout", f"question {cid}")

    seen: list[str] = []
    before = None
    while True:
        page = await store.list_conversations(limit=3, before=before)
        seen += [c.id for c in page]
        if len(page) < 3:
            break
        before = page[-1].cursor
    assert seen == ids[::-1]


async def test_equal_update_times_are_ordered_by_id(store: ConversationStore) -> None:
    # Restored conversations keep their times: three share one.
    stamp = "2026-01-02T03:04:05.678+00:00"
    for cid in ("x1", "x3", "x2"):
        record = TurnRecord(input=f"hello {cid}")
        stored = StoredTurn(1, "scout", stamp, record, tuple(turn(f"hello {cid}")))
        await store.restore(ConversationDump(cid, stamp, stamp, (stored,)))
    first = await store.list_conversations(limit=2)
    rest = await store.list_conversations(limit=2, before=first[-1].cursor)
    assert [c.id for c in first + rest] == ["x3", "x2", "x1"]
    assert first[0].updated_at == stamp


async def test_a_long_first_input_is_cut(store: ConversationStore) -> None:
    typed = "// " + "é" * 200
    await add(store, "long", "scout", typed)
    (listed,) = await store.list_conversations()
    assert listed.title == typed[:TITLE_CHARS] + "\u2026"
    await add(store, "exact", "scout", "x" * TITLE_CHARS)
    assert (await store.list_conversations(limit=1))[0].title == "x" * TITLE_CHARS


async def test_empty_store_and_deleted_conversations(store: ConversationStore) -> None:
    assert await store.list_conversations() == []
    await add(store, "gone", "scout", "hi")
    await add(store, "kept", "scout", "hello")
    await store.delete("gone")
    assert [c.id for c in await store.list_conversations()] == ["kept"]


@pytest.mark.parametrize("limit", [0, -1, 101, True])
async def test_a_bad_limit_is_refused(store: ConversationStore, limit: int) -> None:
    with pytest.raises(ValueError, match="limit must be an integer from 1 to 100"):
        await store.list_conversations(limit=limit)


async def test_a_cursor_is_microseconds_and_the_id(store: ConversationStore) -> None:
    stamp = "2026-01-02T03:04:05.678+00:00"
    stored = StoredTurn(1, "scout", stamp, TurnRecord(input="hi"), tuple(turn("hi")))
    await store.restore(ConversationDump("c-1", stamp, stamp, (stored,)))
    (listed,) = await store.list_conversations()
    assert listed.cursor == "1767323045678000~c-1"
    assert split_cursor(listed.cursor) == (datetime(2026, 1, 2, 3, 4, 5, 678000, UTC), "c-1")
    assert await store.list_conversations(before=listed.cursor) == []
    assert [c.id for c in await store.list_conversations(before="1767323045678001~a")] == ["c-1"]


BAD_CURSORS = ["", "x", "12~", "~abc", "-5~abc", "1.5~abc", "12~a/b", "1" * 18 + "~a"]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
async def test_a_bad_cursor_is_refused(store: ConversationStore, cursor: str) -> None:
    with pytest.raises(ValueError, match="not a conversation list cursor"):
        await store.list_conversations(before=cursor)
