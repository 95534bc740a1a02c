"""``GET /v1/conversations`` (the list), and what ``GET /v1/conversations/{id}`` gives a page to
restore a conversation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from conversation_turns import exchange

from generic_framework.citation import Citation
from generic_framework.store import SQLiteStore, TurnRecord

Client = Callable[..., httpx.AsyncClient]
PERSONAS = Path(__file__).resolve().parents[2] / "personas"


async def add(store: SQLiteStore, cid: str, persona: str, typed: str, answer: str) -> None:
    sources = (
        Citation(number=1, title="Weather", url="https://weather.example.org/n", site="Example"),
    )
    record = TurnRecord(input=typed, model="glm-4.7", sources=sources if "//" in typed else ())
    question = typed.removeprefix("//").strip()
    await store.append_turn(cid, persona, exchange(question, answer, tool=True), record)
    await asyncio.sleep(0.003)  # milliseconds apart, so the order is by time


async def test_list_pages_newest_first(client_for: Client, store: SQLiteStore) -> None:
    await add(store, "one", "scout", "// weather in Nanaimo?", "Rain [1].")
    await add(store, "two", "scout", "hello", "Hi!")
    await add(store, "three", "helper", "2+2?", "4")
    await add(store, "one", "helper", "and tomorrow?", "Dry.")
    async with client_for() as client:
        first = await client.get("/v1/conversations", params={"limit": 2})
        after = first.json()["next_before"]
        second = await client.get("/v1/conversations", params={"limit": 2, "before": after})
        everything = await client.get("/v1/conversations")
    assert first.status_code == second.status_code == 200
    page = first.json()
    assert page["object"] == "list"
    assert [(c["id"], c["persona"], c["title"], c["turns"]) for c in page["data"]] == [
        ("one", "helper", "// weather in Nanaimo?", 2),
        ("three", "helper", "2+2?", 1),
    ]
    assert set(page["data"][0]) == {"id", "persona", "title", "created_at", "updated_at", "turns"}
    assert [c["id"] for c in second.json()["data"]] == ["two"]
    assert second.json()["next_before"] is None
    assert [c["id"] for c in everything.json()["data"]] == ["one", "three", "two"]
    assert everything.json()["next_before"] is None


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"before": "yesterday"}, "before"),
        ({"before": "1767323045678000~a/b"}, "before"),
        ({"before": ""}, "before"),
        ({"limit": "5", "offset": "10"}, "offset"),
    ],
)
async def test_bad_list_queries_are_400(
    client_for: Client, query: dict[str, str], param: str
) -> None:
    async with client_for() as client:
        response = await client.get("/v1/conversations", params=query)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


async def test_a_conversation_has_what_a_page_restores(
    client_for: Client, store: SQLiteStore
) -> None:
    await add(store, "c1", "helper", "what is 2+2?", "It is 4.")
    await add(store, "c1", "scout", "//  weather in Nanaimo?", "Rain today [1].")
    async with client_for() as client:
        body = (await client.get("/v1/conversations/c1")).json()
    assert body["persona"] == "scout"  # the latest turn's
    assert [(t["persona"], t["input"], t["answer"]) for t in body["turns"]] == [
        ("helper", "what is 2+2?", "It is 4."),
        ("scout", "//  weather in Nanaimo?", "Rain today [1]."),  # as typed, `//` kept
    ]
    assert [c["url"] for c in body["turns"][1]["citations"]] == ["https://weather.example.org/n"]
