"""Renaming a conversation (``PATCH /v1/conversations/{id}``) and removing its last turn
(``DELETE /v1/conversations/{id}/turns/last``), on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from conversation_turns import exchange

from generic_framework.store import ConversationStore, TurnRecord, open_store

Client = Callable[..., httpx.AsyncClient]


@pytest.fixture(params=["sqlite", "postgres"])
async def store(  # the service tests' store, on both backends here
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ConversationStore]:
    if request.param == "postgres":
        url = str(request.getfixturevalue("postgres_server").create_database())
    else:
        url = f"sqlite:///{tmp_path / 'data' / 'conversations.sqlite3'}"
    opened = open_store(url, sqlite_path="unused", pool_size=2)
    yield opened
    await opened.aclose()


async def add(store: ConversationStore, cid: str, typed: str, *, tool: bool = False) -> None:
    messages = exchange(typed, f"answer to {typed}", tool=tool)
    await store.append_turn(cid, "scout", messages, TurnRecord(input=typed))


async def test_rename_is_listed_and_checked(client_for: Client, store: ConversationStore) -> None:
    await add(store, "trip", "where should I go in May?")
    async with client_for() as client:
        renamed = await client.patch("/v1/conversations/trip", json={"title": "  May trip "})
        listed = (await client.get("/v1/conversations")).json()["data"]
        unknown = await client.patch("/v1/conversations/nope", json={"title": "x"})
        blank = await client.patch("/v1/conversations/trip", json={"title": "   "})
        extra = await client.patch("/v1/conversations/trip", json={"title": "x", "y": 1})
        two_lines = await client.patch("/v1/conversations/trip", json={"title": "a\nb"})
    assert renamed.status_code == 200
    assert renamed.json() == {"id": "trip", "title": "May trip"}
    assert [c["title"] for c in listed] == ["May trip"]
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "conversation_not_found"
    assert blank.status_code == 400 and blank.json()["error"]["code"] == "invalid_title"
    assert extra.status_code == 400 and extra.json()["error"]["param"] == "y"
    assert two_lines.status_code == 400 and two_lines.json()["error"]["param"] == "title"
    assert two_lines.json()["error"]["message"] == (
        "title: the title must be one line without control characters"
    )
    assert two_lines.json()["error"]["code"] == "invalid_title"


async def test_the_last_turn_is_removed_whole(client_for: Client, store: ConversationStore) -> None:
    await add(store, "c", "first question")
    await add(store, "c", "second question", tool=True)
    async with client_for() as client:
        removed = await client.delete("/v1/conversations/c/turns/last")
        body = (await client.get("/v1/conversations/c")).json()
        again = await client.delete("/v1/conversations/c/turns/last")
        gone = await client.get("/v1/conversations/c")
        none = await client.delete("/v1/conversations/c/turns/last")
        wrong = await client.get("/v1/conversations/c/turns/last")
    assert removed.status_code == 204
    # The stored history stays whole: turn 1 only, no orphan tool message of turn 2.
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert [t["input"] for t in body["turns"]] == ["first question"]
    # The only turn: the conversation goes with it; then there is nothing to remove.
    assert again.status_code == 204 and gone.status_code == 404
    assert none.status_code == 404 and none.json()["error"]["code"] == "conversation_not_found"
    assert wrong.status_code == 405


async def test_a_removed_turn_is_asked_again_with_the_same_number(
    client_for: Client, store: ConversationStore
) -> None:
    await add(store, "r", "one")
    await add(store, "r", "two")
    async with client_for() as client:
        removed = await client.delete("/v1/conversations/r/turns/last")
        await add(store, "r", "two, again")  # what the persona stores when asked again
        body: dict[str, Any] = (await client.get("/v1/conversations/r")).json()
    assert removed.status_code == 204
    assert [t["turn"] for t in body["turns"]] == [1, 2]
    assert [t["input"] for t in body["turns"]] == ["one", "two, again"]
