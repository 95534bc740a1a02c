"""``generic-framework db upgrade`` and ``db copy`` as processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support import run_cli

from generic_framework.store import SQLiteStore, TurnRecord, checksum
from generic_framework.store.sqlite_schema import MIGRATIONS
from generic_framework.wire.messages import AssistantMessage, UserMessage

V1 = Path(__file__).resolve().parents[1] / "store" / "data" / "conversations-v1.sqlite3"

pytestmark = pytest.mark.e2e


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), env, timeout=120)


@pytest.fixture
def db_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("DATABASE_")}


def test_three_upgrades_at_once_migrate_a_fresh_database_once(
    db_env: dict[str, str], postgres_server: Any
) -> None:
    url = postgres_server.create_database(initialised=False)
    with ThreadPoolExecutor(3) as pool:
        runs = list(
            pool.map(lambda _: cli({**db_env, "DATABASE_URL": url}, "db", "upgrade"), range(3))
        )
    assert [r.returncode for r in runs] == [0, 0, 0], [r.stderr for r in runs]
    latest = len(MIGRATIONS)
    assert all(f"schema version {latest} (up to date)" in r.stdout for r in runs)
    assert postgres_server.query(url, "SELECT version FROM schema_migrations ORDER BY 1") == [
        (v,) for v in range(1, latest + 1)
    ]


def test_upgrade_migrates_an_existing_sqlite_file_in_data_dir(
    db_env: dict[str, str], tmp_path: Path
) -> None:
    data = Path(db_env["DATA_DIR"])
    data.mkdir(parents=True)
    shutil.copy(V1, data / "conversations.sqlite3")
    done = cli(db_env, "db", "upgrade")
    assert done.returncode == 0, done.stderr
    assert f"conversations.sqlite3: schema version {len(MIGRATIONS)}" in done.stdout
    with sqlite3.connect(data / "conversations.sqlite3") as db:
        assert db.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)
        assert db.execute("SELECT count(*) FROM messages").fetchone() == (8,)


async def _sqlite_checksums(path: Path) -> dict[str, str]:
    store = SQLiteStore(path)
    try:
        dumps = [await store.dump(cid) for cid in await store.conversation_ids()]
        return {d.id: checksum(d) for d in dumps if d is not None}
    finally:
        await store.aclose()


async def test_copy_sqlite_to_postgresql_and_back_verifies_every_conversation(
    db_env: dict[str, str], tmp_path: Path, postgres_server: Any
) -> None:
    source = tmp_path / "source.sqlite3"
    shutil.copy(V1, source)
    store = SQLiteStore(source)  # migrated, plus a turn with a record
    record = TurnRecord(input="// weather?", model="glm-4.7", rounds=1, web_searches=1)
    turn = [UserMessage(content="weather?"), AssistantMessage(content="Sunny [1].")]
    await store.append_turn("u42", "scout", turn, record)
    await store.aclose()
    url = postgres_server.create_database()
    back = tmp_path / "back.sqlite3"

    there = cli(db_env, "db", "copy", "--from", str(source), "--to", url)
    assert there.returncode == 0, there.stderr
    assert "copied 2 conversation(s), 4 turn(s), 10 message(s); 0 already there" in there.stdout
    assert "verified" in there.stdout
    again = cli(db_env, "db", "copy", "--from", f"sqlite:///{source}", "--to", url)
    assert again.returncode == 0 and "copied 0 conversation(s)" in again.stdout
    assert "2 already there" in again.stdout
    home = cli(db_env, "db", "copy", "--from", url, "--to", f"sqlite:///{back}")
    assert home.returncode == 0, home.stderr
    assert await _sqlite_checksums(back) == await _sqlite_checksums(source)

    postgres_server.query(url, "UPDATE messages SET body = replace(body, 'Sunny', 'Rainy')")
    conflict = cli(db_env, "db", "copy", "--from", str(source), "--to", url)
    assert conflict.returncode == 1
    assert "u42: already in the target, with different content" in conflict.stderr


def test_no_password_is_shown_when_the_database_is_down(db_env: dict[str, str]) -> None:
    secret = "pw-Secret-Cli-4242"
    url = f"postgresql://bot:{secret}@127.0.0.1:9/bot?connect_timeout=2"
    for args in (("db", "upgrade"), ("db", "copy", "--from", url, "--to", "x.sqlite3")):
        done = cli({**db_env, "DATABASE_URL": url}, *args)
        assert done.returncode == 1
        assert "unavailable" in done.stderr
        assert secret not in done.stdout + done.stderr
    bad = cli(db_env, "db", "copy", "--from", "mysql://x", "--to", "y")
    assert bad.returncode == 2 and "postgresql://" in bad.stderr
    wrong = cli({**db_env, "DATABASE_URL": f"mysql://u:{secret}@h/d"}, "db", "upgrade")
    assert wrong.returncode == 2 and "DATABASE_URL must start with postgresql://" in wrong.stderr
    assert secret not in wrong.stderr
