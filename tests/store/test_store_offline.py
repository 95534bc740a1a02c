"""A turn record's ``offline`` mark (the embedded mock of the offline demo answered) is stored
and read back on both backends, counted in the checksum only when set, and a database of
schema version 7 (before the mark) is migrated keeping its records, read as billed turns."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from generic_framework.store import ConversationStore, TurnRecord, checksum, open_store
from generic_framework.store.base import _canonical_record
from generic_framework.store.sqlite_schema import MIGRATIONS
from generic_framework.wire.messages import AssistantMessage, UserMessage

TURN = [UserMessage(content="q"), AssistantMessage(content="a")]
RECORD = TurnRecord(input="q", model="glm-4.7", prompt_tokens=12, completion_tokens=3)


async def test_the_offline_mark_is_stored_and_read_back(store: ConversationStore) -> None:
    demo = TurnRecord(input="q", model="glm-4.7", prompt_tokens=12, offline=True)
    await store.append_turn("c", "scout", TURN, demo)
    await store.append_turn("c", "scout", TURN, RECORD)
    turns = await store.turns("c") or []
    assert [t.record for t in turns] == [demo, RECORD]
    assert [t.record.offline for t in turns if t.record] == [True, False]
    assert demo.to_json()["offline"] is True and TurnRecord.from_json(demo.to_json()) == demo


async def test_the_checksum_counts_the_mark_only_when_set(store: ConversationStore) -> None:
    await store.append_turn("c", "scout", TURN, RECORD)
    dump = await store.dump("c")
    assert dump is not None and dump.turns[0].record == RECORD
    marked = replace(dump.turns[0], record=replace(RECORD, offline=True))
    assert checksum(replace(dump, turns=(marked,))) != checksum(dump)
    # Unmarked, a record hashes as before the mark existed: the field is left out.
    earlier = ("user_id", "key_id", "offline")  # the fields left out when empty
    assert _canonical_record(RECORD) == {
        k: v for k, v in RECORD.to_json().items() if k not in earlier
    }


_WHEN = "2026-11-01T10:00:00.000+00:00"
_OLD_TURN = (  # a conversation with one turn, as release 7 stored it (no offline column)
    "INSERT INTO conversations (id, turns, created_at, updated_at)"
    f" VALUES ('old', 1, '{_WHEN}', '{_WHEN}')",
    "INSERT INTO turns (conversation_id, turn, persona, created_at, input, model, sources,"
    f" prompt_tokens, completion_tokens, round_ms) VALUES ('old', 1, 'scout', '{_WHEN}', 'q',"
    " 'glm-4.7', '[]', 12, 3, '[]')",
)


def _at_version_7(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A database of the backend left at schema version 7 with one turn; its URL."""
    if backend == "postgres":
        import psycopg

        url = str(request.getfixturevalue("postgres_server").create_database(version=7))
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in _OLD_TURN:
                conn.execute(statement)  # type: ignore[call-overload]
        return url
    path = tmp_path / "conversations.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:7]:
        migration(db)
    for statement in _OLD_TURN:
        db.execute(statement)
    db.execute("PRAGMA user_version = 7")
    db.close()
    return f"sqlite:///{path}"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_version_7_database_is_migrated_its_turns_read_as_billed(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_store(_at_version_7(backend, tmp_path, request), sqlite_path="unused")
    try:
        assert await store.schema_version() == len(MIGRATIONS)
        turns = await store.turns("old") or []
        assert turns[0].record is not None and turns[0].record.offline is False
        assert turns[0].record.prompt_tokens == 12
        demo = TurnRecord(input="q2", model="glm-4.7", offline=True)
        await store.append_turn("old", "scout", TURN, demo)
        assert [t.record for t in await store.turns("old") or []][-1] == demo
    finally:
        await store.aclose()
