"""An existing SQLite file is migrated in place on first open, losing nothing.

``data/conversations-v1.sqlite3`` was written by the store as it was before turn records
(schema version 1): three turns in two conversations, one with a tool round.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from generic_framework.errors import ConfigError
from generic_framework.store import SQLiteStore, TurnRecord
from generic_framework.store.sqlite import MIGRATIONS
from generic_framework.wire.messages import AssistantMessage, UserMessage

V1 = Path(__file__).parent / "data" / "conversations-v1.sqlite3"
ORIGINAL = {
    "conversations": "SELECT id, turns, created_at, updated_at FROM conversations ORDER BY id",
    "turns": "SELECT conversation_id, turn, persona, created_at FROM turns ORDER BY 1, 2",
    "messages": "SELECT * FROM messages ORDER BY 1, 2, 3",
}


def snapshot(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as db:
        return {name: db.execute(sql).fetchall() for name, sql in ORIGINAL.items()}


def version(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA user_version").fetchone()[0])


async def test_a_version_1_file_is_migrated_in_place_losing_nothing(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    shutil.copy(V1, path)
    before = snapshot(path)
    assert version(path) == 1 and len(before["messages"]) == 8

    store = SQLiteStore(path)
    try:
        history = await store.load("u42", 10)
        assert version(path) == len(MIGRATIONS)
        assert snapshot(path) == before
        assert history[0] == UserMessage(content="what's the weather in Nanaimo?")
        assert history[-1] == AssistantMessage(content="It is 4.")
        turns = await store.turns("u42")
        assert turns is not None and [(t.turn, t.persona, t.record) for t in turns] == [
            (1, "scout", None),
            (2, "helper", None),
        ]
        # Turns stored without a record: the list's title is the stored user message.
        listed = await store.list_conversations()
        assert [(c.id, c.persona, c.title, c.turns) for c in listed] == [
            ("u42", "helper", "what's the weather in Nanaimo?", 2),  # same time, larger id
            ("other", "scout", "hello 漢字 😀", 1),
        ]
        record = TurnRecord(input="// and now?", model="glm-4.7", rounds=1)
        assert await store.append_turn("u42", "scout", history[:2], record) == 3
        assert (await store.turns("u42") or [])[-1].record == record
    finally:
        await store.aclose()
    assert snapshot(path)["turns"][:3] == before["turns"]


async def test_a_file_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    store = SQLiteStore(path)
    with pytest.raises(ConfigError, match="schema version 99, newer"):
        await store.load("c", 1)
    await store.aclose()
