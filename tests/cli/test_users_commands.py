"""``generic-framework users ...`` and ``keys ...`` as processes, and ``db copy`` keeping owners."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conversation_turns import turn
from support import run_cli

from generic_framework.store import SQLiteStore, open_store
from generic_framework.store.users import conversation_key, key_id_of, match_key

pytestmark = pytest.mark.e2e


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), env, timeout=120)


@pytest.fixture
def db_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("DATABASE_")}


def _store(env: dict[str, str]) -> SQLiteStore:
    return SQLiteStore(Path(env["DATA_DIR"]) / "conversations.sqlite3")


async def test_keys_create_prints_the_key_last_and_it_works(db_env: dict[str, str]) -> None:
    made = cli(db_env, "keys", "create", "--user", "alice", "--expires", "2", "--personas", "a,b")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]
    key_id = key_id_of(key)
    assert key_id is not None and "added user alice" in made.stderr
    store = _store(db_env)
    try:
        found = match_key(key, await store.stored_key(key_id))
        assert found is not None and found.user.name == "alice"
        assert found.key.personas == ("a", "b") and found.key.expires_at is not None
    finally:
        await store.aclose()
    listed = cli(db_env, "keys", "list", "--user", "alice")
    assert listed.returncode == 0 and key_id in listed.stdout and "\tok\t" in listed.stdout
    assert key not in listed.stdout and key[len("gfk_") + 13 :] not in listed.stdout
    as_json = cli(db_env, "keys", "create", "--user", "alice", "--json")
    record = json.loads(as_json.stdout)
    assert record["user"] == "alice" and record["key"].startswith("gfk_" + record["id"])
    # Revoked by the whole key or by its id; a second time is an error.
    assert cli(db_env, "keys", "revoke", key).returncode == 0
    again = cli(db_env, "keys", "revoke", key_id)
    assert again.returncode == 1 and "not revoked yet" in again.stderr
    assert "revoked" in cli(db_env, "keys", "list").stdout
    bad = cli(db_env, "keys", "revoke", "nonsense")
    assert bad.returncode == 2 and "KEY_OR_ID" in bad.stderr


def test_users_add_set_list_remove(db_env: dict[str, str]) -> None:
    added = cli(db_env, "users", "add", "bob", "--rpm", "30", "--daily-tokens", "1000")
    assert added.returncode == 0, added.stderr
    assert "bob\tuser\trpm=30\tdaily_tokens=1000\tdaily_searches=default" in added.stdout
    assert cli(db_env, "users", "add", "bob").returncode == 1
    assert "user name" in cli(db_env, "users", "add", "bad name").stderr
    changed = cli(db_env, "users", "set", "bob", "--admin", "--daily-searches", "0")
    assert "bob\tadmin\trpm=30\tdaily_tokens=1000\tdaily_searches=none" in changed.stdout
    # The bootstrap admin never has limits: none, not the users' default.
    plain = cli(db_env, "users", "list").stdout
    assert "admin\tadmin\trpm=none\tdaily_tokens=none\tdaily_searches=none" in plain
    listed = json.loads(cli(db_env, "users", "list", "--json").stdout)
    assert [u["name"] for u in listed] == ["admin", "bob"]
    assert listed[1]["limits"] == {"rpm": 30, "daily_tokens": 1000, "daily_searches": 0}
    assert cli(db_env, "users", "remove", "bob").returncode == 0
    assert cli(db_env, "users", "remove", "bob").returncode == 1
    refused = cli(db_env, "users", "remove", "admin")
    assert refused.returncode == 1 and "bootstrap admin cannot be removed" in refused.stderr
    assert cli(db_env, "users", "set", "nobody", "--rpm", "1").returncode == 1
    assert cli(db_env, "users", "add", "x", "--rpm", "-1").returncode == 2


def test_a_chat_platform_user_name_holds_a_colon(db_env: dict[str, str]) -> None:
    added = cli(db_env, "users", "add", "telegram:42", "--daily-tokens", "5000")
    assert added.returncode == 0, added.stderr
    assert "telegram:42\tuser\trpm=default\tdaily_tokens=5000" in added.stdout
    assert cli(db_env, "users", "set", "telegram:42", "--rpm", "5").returncode == 0
    assert "telegram:42" in cli(db_env, "users", "list").stdout
    for bad in ("telegram/42", ":42"):
        refused = cli(db_env, "users", "add", bad)
        assert refused.returncode != 0 and "'+', ':' or '-'" in refused.stderr


async def test_db_copy_keeps_users_keys_and_owners(
    db_env: dict[str, str], tmp_path: Path, postgres_server: Any
) -> None:
    key = cli(db_env, "keys", "create", "--user", "dana").stdout.strip().splitlines()[-1]
    source = _store(db_env)
    dana = await source.user("dana")
    assert dana is not None
    await source.append_turn(conversation_key(dana.id, "chat-1"), "p", turn("dana's"))
    await source.append_turn("chat-1", "p", turn("the admin's"))
    await source.aclose()
    url = postgres_server.create_database()
    copied = cli(db_env, "db", "copy", "--from", str(source.path), "--to", url)
    assert copied.returncode == 0, copied.stderr
    assert "2 user(s) and key(s) added" in copied.stdout
    target = open_store(url, sqlite_path="unused")
    try:
        found = match_key(key, await target.stored_key(str(key_id_of(key))))
        assert found is not None and found.user == dana
        mine = await target.list_conversations(owner=dana.id)
        assert [(c.id, c.title) for c in mine] == [(f"{dana.id}/chat-1", "question dana's")]
        admins = await target.list_conversations(owner="admin")
        assert [(c.id, c.title) for c in admins] == [("chat-1", "question the admin's")]
    finally:
        await target.aclose()
