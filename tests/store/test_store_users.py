"""Users, keys, owners and limit counters: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conversation_turns import turn

from generic_framework.store import ConversationStore, TurnRecord, open_store
from generic_framework.store.sqlite_schema import MIGRATIONS
from generic_framework.store.users import (
    BOOTSTRAP_USER,
    Limits,
    conversation_key,
    expiry,
    key_id_of,
    match_key,
    split_key,
)
from generic_framework.wire.messages import UserMessage


async def test_the_bootstrap_admin_exists_and_cannot_be_removed(store: ConversationStore) -> None:
    admin = await store.user(BOOTSTRAP_USER)
    assert admin is not None and admin.id == BOOTSTRAP_USER and admin.is_admin
    with pytest.raises(ValueError, match="cannot be removed"):
        await store.remove_user(BOOTSTRAP_USER)
    with pytest.raises(ValueError, match="stays an admin"):
        await store.set_user(BOOTSTRAP_USER, role="user")
    with pytest.raises(ValueError, match="no limits"):
        await store.set_user(BOOTSTRAP_USER, limits=Limits(rpm=1))


async def test_users_are_added_listed_changed_and_unique(store: ConversationStore) -> None:
    alice = await store.add_user("alice@example.org", limits=Limits(rpm=30))
    assert alice.id.startswith("u") and alice.role == "user" and alice.limits.rpm == 30
    with pytest.raises(ValueError, match="exists already"):
        await store.add_user("alice@example.org")
    with pytest.raises(ValueError, match="user name"):
        await store.add_user("no spaces")
    assert [u.name for u in await store.users()] == ["admin", "alice@example.org"]
    changed = await store.set_user("alice@example.org", role="admin", limits=Limits(0, 1000, 5))
    assert changed is not None and changed.is_admin and changed.limits == Limits(0, 1000, 5)
    assert await store.set_user("nobody", role="admin") is None
    assert await store.user_by_id(alice.id) == changed


async def test_a_key_is_kept_only_as_a_hash_and_matches_only_itself(
    store: ConversationStore, database_url: str, tmp_path: Path
) -> None:
    bob = await store.add_user("bob")
    record, text = await store.create_key(bob.id, personas=("scout",))
    assert text.startswith("gfk_") and key_id_of(text) == record.id
    stored = await store.stored_key(record.id)
    assert stored is not None and stored.user == bob and stored.key.personas == ("scout",)
    assert text not in stored.hash and len(stored.hash) == 64
    found = match_key(text, stored)
    assert found is not None and found.user.id == bob.id
    wrong = text[:-1] + ("A" if text[-1] != "A" else "B")
    assert match_key(wrong, stored) is None
    assert match_key(text, None) is None
    dump = await store.dump_accounts()
    assert all(text not in repr(k) for k in dump.keys)
    if database_url.startswith("sqlite"):
        raw = Path(database_url.removeprefix("sqlite:///")).read_bytes()
        assert text.encode() not in raw and text[len("gfk_") + 13 :].encode() not in raw


async def test_revoked_and_expired_keys_match_nothing(store: ConversationStore) -> None:
    carol = await store.add_user("carol")
    live, live_text = await store.create_key(carol.id, expires_at=expiry(1))
    old, old_text = await store.create_key(carol.id, expires_at="2020-01-01T00:00:00.000+00:00")
    assert match_key(live_text, await store.stored_key(live.id)) is not None
    assert match_key(old_text, await store.stored_key(old.id)) is None
    assert await store.revoke_key(live.id) is True
    assert await store.revoke_key(live.id) is False
    assert match_key(live_text, await store.stored_key(live.id)) is None
    listed = await store.keys(carol.id)
    assert {k.id for k in listed} == {live.id, old.id}
    assert next(k for k in listed if k.id == live.id).revoked_at is not None


async def test_conversations_belong_to_the_owner_of_their_key(store: ConversationStore) -> None:
    dave = await store.add_user("dave")
    erin = await store.add_user("erin")
    for owner in (BOOTSTRAP_USER, dave.id, erin.id):
        await store.append_turn(conversation_key(owner, "chat-1"), "p", turn("hi " + owner))
    assert conversation_key(BOOTSTRAP_USER, "chat-1") == "chat-1"
    listed = await store.list_conversations(owner=dave.id)
    assert [split_key(c.id) for c in listed] == [(dave.id, "chat-1")]
    assert [c.title for c in listed] == [f"question hi {dave.id}"]
    assert [c.id for c in await store.list_conversations(owner=BOOTSTRAP_USER)] == ["chat-1"]
    assert len(await store.list_conversations()) == 3
    # Removing a user removes their keys and conversations, nobody else's.
    await store.create_key(dave.id)
    assert await store.remove_user("dave") is True
    assert await store.remove_user("dave") is False
    assert await store.keys(dave.id) == []
    assert sorted(await store.conversation_ids()) == ["chat-1", f"{erin.id}/chat-1"]


async def test_a_turn_record_keeps_who_asked(store: ConversationStore) -> None:
    record = TurnRecord(input="hi", user_id="u0123456789ab", key_id="0123456789ab")
    await store.append_turn("c", "p", [UserMessage(content="hi")], record)
    turns = await store.turns("c")
    assert turns is not None and turns[0].record == record


async def test_the_rate_window_admits_the_limit_across_stores(make_store: object) -> None:
    stores = [make_store() for _ in range(3)]  # type: ignore[operator]
    waits = await asyncio.gather(*(stores[i % 3].admit("u:x", 10) for i in range(25)))
    assert sum(1 for w in waits if w == 0) == 10
    assert all(0 < w <= 60 for w in waits if w)
    assert await stores[0].admit("u:other", 10) == 0  # another scope counts apart


async def test_the_rate_window_slides(store: ConversationStore) -> None:
    # A window the third call comes well within on a busy machine, then waited out.
    assert await store.admit("k:y", 2, window=2.0) == 0
    assert await store.admit("k:y", 2, window=2.0) == 0
    wait = await store.admit("k:y", 2, window=2.0)
    assert 0 < wait <= 2.0
    await asyncio.sleep(wait + 0.05)
    assert await store.admit("k:y", 2, window=2.0) == 0


async def test_daily_usage_adds_up_per_scope(store: ConversationStore) -> None:
    assert await store.usage_today("u:a") == (0, 0)
    await store.add_usage(("u:a", "k:b"), 120, 1)
    await store.add_usage(("u:a",), 30, 0)
    assert await store.usage_today("u:a") == (150, 1)
    assert await store.usage_today("k:b") == (120, 1)


async def test_accounts_copy_between_stores_keeps_ids_and_hashes(
    store: ConversationStore, tmp_path: Path
) -> None:
    frank = await store.add_user("frank", role="admin", limits=Limits(rpm=5))
    key, text = await store.create_key(frank.id, expires_at=expiry(3), personas=("a", "b"))
    await store.revoke_key(key.id)
    other = open_store(str(tmp_path / "other.sqlite3"), sqlite_path="unused")
    try:
        dump = await store.dump_accounts()
        assert await other.restore_accounts(dump) == 2  # frank and his key; admin exists
        assert await other.restore_accounts(dump) == 0
        copied = await other.stored_key(key.id)
        assert copied is not None and copied.user == await store.user("frank")
        assert copied.key == (await store.stored_key(key.id)).key  # type: ignore[union-attr]
        assert match_key(text, copied) is None  # revoked stays revoked
    finally:
        await other.aclose()


def test_an_old_sqlite_file_gives_its_conversations_to_the_bootstrap_admin(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)

    for step in MIGRATIONS[:4]:
        step(db)
    stamp = "2026-01-01T00:00:00.000+00:00"
    db.execute(
        "INSERT INTO conversations (id, turns, created_at, updated_at) VALUES ('old-1', 0, ?, ?)",
        (stamp, stamp),
    )
    db.execute("PRAGMA user_version = 4")
    db.commit()
    db.close()

    async def check() -> None:
        store = open_store(str(path), sqlite_path="unused")
        try:
            listed = await store.list_conversations(owner=BOOTSTRAP_USER)
            assert [c.id for c in listed] == ["old-1"]
            assert await store.schema_version() == len(MIGRATIONS)
        finally:
            await store.aclose()

    asyncio.run(check())


async def test_an_old_postgres_database_gives_its_conversations_to_the_bootstrap_admin(
    postgres_server: Any,
) -> None:
    import psycopg

    from generic_framework.store.postgres_schema import MIGRATIONS as PG_MIGRATIONS

    url = postgres_server.create_database(version=4)
    with psycopg.connect(url, autocommit=True) as conn:  # a database left at version 4
        conn.execute(
            "INSERT INTO conversations (id, turns, created_at, updated_at)"
            " VALUES ('old-1', 0, now(), now())"
        )
    store = open_store(url, sqlite_path="unused")
    try:
        listed = await store.list_conversations(owner=BOOTSTRAP_USER)
        assert [c.id for c in listed] == ["old-1"]
        assert await store.schema_version() == len(PG_MIGRATIONS)
        assert await store.user(BOOTSTRAP_USER) is not None
    finally:
        await store.aclose()
