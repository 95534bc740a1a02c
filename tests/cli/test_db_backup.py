"""``generic-framework db backup`` and ``db restore`` as processes: what they refuse, and that a
refused restore changes nothing (the end-to-end runs under load are in
tests/reliability/test_backup_restore.py)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import run_cli

from generic_framework.service.sole import sole_sqlite_service
from generic_framework.store import SQLiteStore, TurnRecord, checksum, open_store
from generic_framework.store.chats import ChatState
from generic_framework.store.sqlite_schema import MIGRATIONS
from generic_framework.wire.messages import AssistantMessage, UserMessage

V1 = Path(__file__).resolve().parents[1] / "store" / "data" / "conversations-v1.sqlite3"
LATEST = len(MIGRATIONS)

pytestmark = pytest.mark.e2e


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), env, timeout=120)


@pytest.fixture
def db_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("DATABASE_")}


async def _fill(path: Path, conversations: dict[str, int]) -> None:
    store = SQLiteStore(path)
    try:
        for cid, turns in conversations.items():
            for n in range(turns):
                turn = [UserMessage(content=f"{cid} q{n}"), AssistantMessage(content=f"a{n}")]
                await store.append_turn(cid, "scout", turn)
    finally:
        await store.aclose()


async def _checksums(url: str) -> dict[str, str]:
    store = open_store(url, sqlite_path="-")
    try:
        dumps = [await store.dump(cid) for cid in await store.conversation_ids()]
        return {d.id: checksum(d) for d in dumps if d is not None}
    finally:
        await store.aclose()


def sums(path: Path | str) -> dict[str, str]:
    return asyncio.run(_checksums(str(path)))


@pytest.fixture
def live(db_env: dict[str, str]) -> Path:
    """DATA_DIR's database with two conversations."""
    database = Path(db_env["DATA_DIR"]) / "conversations.sqlite3"
    asyncio.run(_fill(database, {"a1": 2, "b2": 1}))
    return database


def test_backup_then_restore_into_a_fresh_data_dir(
    db_env: dict[str, str], live: Path, tmp_path: Path
) -> None:
    backup = tmp_path / "backups" / "one.sqlite3"
    done = cli(db_env, "db", "backup", "--to", str(backup))
    assert done.returncode == 0, done.stderr
    assert f"2 conversation(s), 3 turn(s), 6 message(s), schema version {LATEST}" in done.stdout
    with sqlite3.connect(backup) as db:  # one self-contained file
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert sorted(p.name for p in backup.parent.iterdir()) == ["one.sqlite3"]

    again = cli(db_env, "db", "backup", "--to", str(backup))
    assert (
        again.returncode == 2 and "exists: choose another name, or pass --replace" in again.stderr
    )
    assert cli(db_env, "db", "backup", "--to", str(backup), "--replace").returncode == 0

    fresh = {**db_env, "DATA_DIR": str(tmp_path / "fresh")}
    restored = cli(fresh, "db", "restore", "--from", str(backup))
    assert restored.returncode == 0, restored.stderr
    assert sums(tmp_path / "fresh" / "conversations.sqlite3") == sums(live)
    assert sums(backup) == sums(live)


def test_restore_replaces_only_with_replace_and_keeps_the_replaced_database(
    db_env: dict[str, str], live: Path, tmp_path: Path
) -> None:
    backup = tmp_path / "old.sqlite3"
    assert cli(db_env, "db", "backup", "--to", str(backup)).returncode == 0
    asyncio.run(_fill(live, {"c3": 1}))  # written after the backup
    current = sums(live)

    refused = cli(db_env, "db", "restore", "--from", str(backup))
    assert refused.returncode == 2
    assert "already exists: pass --replace" in refused.stderr
    assert sums(live) == current

    done = cli(db_env, "db", "restore", "--from", str(backup), "--replace")
    assert done.returncode == 0, done.stderr
    assert set(sums(live)) == {"a1", "b2"}
    (kept,) = live.parent.glob("conversations.sqlite3.before-restore-*")
    assert f"kept as {kept}" in done.stdout
    assert sums(kept) == current
    assert not live.with_name(live.name + "-wal").exists()


def test_restore_is_refused_while_a_service_holds_the_database(
    db_env: dict[str, str], live: Path, tmp_path: Path
) -> None:
    backup = tmp_path / "b.sqlite3"
    assert cli(db_env, "db", "backup", "--to", str(backup)).returncode == 0
    asyncio.run(_fill(live, {"c3": 1}))
    current = sums(live)
    with sole_sqlite_service(live):  # what `serve` holds while it runs
        refused = cli(db_env, "db", "restore", "--from", str(backup), "--replace")
    assert refused.returncode == 2
    assert "a service is running on" in refused.stderr and "stop it first" in refused.stderr
    assert sums(live) == current
    assert list(live.parent.glob("*.before-restore-*")) == []


def _damage(path: Path) -> None:
    """Overwrite the cell pointers of every page but the first (the schema): the file opens,
    its b-trees do not add up. Every page, not one: which page holds rows depends on the
    tables the schema has, and an empty page's unused bytes are no damage."""
    with sqlite3.connect(path) as db:
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
    data = bytearray(path.read_bytes())
    for page in range(page_size, len(data), page_size):
        data[page + 8 : page + 72] = b"\xff" * 64
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("problem", ["damaged", "newer", "not a store", "not a database"])
def test_a_bad_backup_is_refused_before_anything_changes(
    db_env: dict[str, str], live: Path, tmp_path: Path, problem: str
) -> None:
    backup = tmp_path / "bad.sqlite3"
    assert cli(db_env, "db", "backup", "--to", str(backup)).returncode == 0
    if problem == "damaged":
        _damage(backup)
    elif problem == "newer":
        with sqlite3.connect(backup) as db:
            db.execute("PRAGMA user_version = 99")
    elif problem == "not a store":
        backup.unlink()
        sqlite3.connect(backup).close()
        with sqlite3.connect(backup) as db:
            db.execute("CREATE TABLE t (x)")
    else:
        backup.write_bytes(b"not a database at all" * 100)
    current = sums(live)
    refused = cli(db_env, "db", "restore", "--from", str(backup), "--replace")
    assert refused.returncode == 2, refused.stdout
    expected = {
        "damaged": "integrity",
        "newer": f"schema version 99, newer than this release's {LATEST}",
        "not a store": "is not a conversation store",
        "not a database": "is not a usable SQLite database",
    }[problem]
    assert expected in refused.stderr
    assert sums(live) == current
    assert sorted(p.name for p in live.parent.iterdir() if not p.name.endswith(".lock")) == [
        "conversations.sqlite3"
    ]


def test_an_older_backup_is_migrated_on_restore(db_env: dict[str, str], tmp_path: Path) -> None:
    backup = tmp_path / "v1.sqlite3"
    shutil.copy(V1, backup)
    done = cli(db_env, "db", "restore", "--from", str(backup))
    assert done.returncode == 0, done.stderr
    assert f"schema version {LATEST}" in done.stdout
    assert V1.read_bytes() == backup.read_bytes()  # the backup itself is left as it was
    restored = Path(db_env["DATA_DIR"]) / "conversations.sqlite3"
    assert sums(restored) == sums(backup)


def test_postgres_backup_and_restore_and_their_refusals(
    db_env: dict[str, str], live: Path, tmp_path: Path, postgres_server: Any
) -> None:
    url = postgres_server.create_database()
    assert cli(db_env, "db", "copy", "--from", str(live), "--to", url).returncode == 0
    backup = tmp_path / "pg.sqlite3"
    done = cli({**db_env, "DATABASE_URL": url}, "db", "backup", "--to", str(backup))
    assert done.returncode == 0, done.stderr
    assert "2 conversation(s), 3 turn(s)" in done.stdout
    assert sums(backup) == sums(url) == sums(live)
    assert sorted(p.name for p in tmp_path.glob(".pg.sqlite3*")) == []

    into = postgres_server.create_database()
    restored = cli({**db_env, "DATABASE_URL": into}, "db", "restore", "--from", str(backup))
    assert restored.returncode == 0, restored.stderr
    assert "restored 2 conversation(s)" in restored.stdout
    assert sums(into) == sums(live)
    again = cli(db_env, "db", "restore", "--from", str(backup), "--to", into)
    assert again.returncode == 0 and "2 already there" in again.stdout
    replace = cli(db_env, "db", "restore", "--from", str(backup), "--to", into, "--replace")
    assert replace.returncode == 2 and "--replace is for SQLite" in replace.stderr


def test_database_urls_are_never_shown_with_their_password(
    db_env: dict[str, str], tmp_path: Path
) -> None:
    secret = "pw-Backup-Secret-77"
    url = f"postgresql://bot:{secret}@127.0.0.1:9/bot"
    for args in (("db", "backup", "--to", url), ("db", "restore", "--from", url)):
        done = cli(db_env, *args)
        assert done.returncode == 2
        assert "the backup file's path, not a database URL" in done.stderr
        assert secret not in done.stdout + done.stderr
    down = f"{url}?connect_timeout=2"
    for args in (("db", "backup", "--from", down, "--to", str(tmp_path / "b")),
                 ("db", "restore", "--from", str(V1), "--to", down)):  # fmt: skip
        done = cli(db_env, *args)
        assert done.returncode == 1, done.stderr
        option = args[2] if args[1] == "backup" else args[4]
        assert f"the database of {option} postgresql://bot:***@" in done.stderr
        assert secret not in done.stdout + done.stderr


async def _chats(url: str, states: dict[str, ChatState] | None = None) -> dict[str, ChatState]:
    """Set ``states`` (Telegram chats) and claim update 7 in the database; its chat states."""
    store = open_store(url, sqlite_path="-")
    try:
        for chat, state in (states or {}).items():
            await store.set_chat_state("telegram", chat, state)
            await store.claim_update("telegram", 7)
        return {r.chat: r.state for r in await store.dump_chat_states()}
    finally:
        await store.aclose()


async def _claimed(url: str, update_id: int) -> bool:
    store = open_store(url, sqlite_path="-")
    try:
        return not await store.claim_update("telegram", update_id)
    finally:
        await store.aclose()


def test_backup_restore_and_copy_carry_the_chat_states(
    db_env: dict[str, str], live: Path, tmp_path: Path, postgres_server: Any
) -> None:
    states = {"1001": ChatState("tg-1001", "scout"), "-100200:3": ChatState("tg-topic")}
    assert asyncio.run(_chats(str(live), states)) == states
    backup = tmp_path / "one.sqlite3"
    assert cli(db_env, "db", "backup", "--to", str(backup)).returncode == 0
    fresh = tmp_path / "fresh"
    assert (
        cli({**db_env, "DATA_DIR": str(fresh)}, "db", "restore", "--from", str(backup)).returncode
        == 0
    )
    assert asyncio.run(_chats(str(fresh / "conversations.sqlite3"))) == states

    # Through PostgreSQL: db copy, a backup of it, a restore into another database.
    url = postgres_server.create_database()
    copied = cli(db_env, "db", "copy", "--from", str(live), "--to", url)
    assert copied.returncode == 0 and "2 chat state(s) added" in copied.stdout
    assert asyncio.run(_chats(url)) == states
    assert not asyncio.run(_claimed(url, 7))  # claimed updates stay behind
    pg_backup = tmp_path / "pg.sqlite3"
    env = {**db_env, "DATABASE_URL": url}
    assert cli(env, "db", "backup", "--to", str(pg_backup)).returncode == 0
    assert asyncio.run(_chats(str(pg_backup))) == states
    into = postgres_server.create_database()
    restored = cli({**db_env, "DATABASE_URL": into}, "db", "restore", "--from", str(pg_backup))
    assert restored.returncode == 0 and "2 chat state(s) added" in restored.stdout
    assert asyncio.run(_chats(into)) == states
    again = cli(db_env, "db", "copy", "--from", str(live), "--to", into)
    assert again.returncode == 0 and "0 chat state(s) added" in again.stdout


async def _offline_marks(url: str, marks: dict[str, bool] | None = None) -> dict[str, bool]:
    """Each conversation's one turn: stored (``marks``: conversation -> answered offline) or
    read back (whether its record says the embedded mock answered)."""
    store = open_store(url, sqlite_path="-")
    try:
        for cid, offline in (marks or {}).items():
            turn = [UserMessage(content="q"), AssistantMessage(content="a")]
            record = TurnRecord(input="q", model="glm-4.7", prompt_tokens=9, offline=offline)
            await store.append_turn(cid, "scout", turn, record)
        read = {cid: await store.turns(cid) for cid in await store.conversation_ids()}
        return {cid: t[0].record.offline for cid, t in read.items() if t and t[0].record}
    finally:
        await store.aclose()


def test_backup_restore_and_copy_carry_the_offline_mark(
    db_env: dict[str, str], tmp_path: Path, postgres_server: Any
) -> None:
    live = Path(db_env["DATA_DIR"]) / "conversations.sqlite3"
    marks = {"demo": True, "billed": False}
    assert asyncio.run(_offline_marks(str(live), marks)) == marks
    backup = tmp_path / "one.sqlite3"
    assert cli(db_env, "db", "backup", "--to", str(backup)).returncode == 0
    assert asyncio.run(_offline_marks(str(backup))) == marks

    url = postgres_server.create_database()
    copied = cli(db_env, "db", "copy", "--from", str(live), "--to", url)
    assert copied.returncode == 0, copied.stderr
    assert asyncio.run(_offline_marks(url)) == marks
    assert sums(url) == sums(live)  # the checksums cover the mark
    pg_backup = tmp_path / "pg.sqlite3"
    done = cli({**db_env, "DATABASE_URL": url}, "db", "backup", "--to", str(pg_backup))
    assert done.returncode == 0, done.stderr
    assert asyncio.run(_offline_marks(str(pg_backup))) == marks
    into = postgres_server.create_database()
    restored = cli({**db_env, "DATABASE_URL": into}, "db", "restore", "--from", str(pg_backup))
    assert restored.returncode == 0, restored.stderr
    assert asyncio.run(_offline_marks(into)) == marks


async def _facts(url: str, alice: bool = False) -> list[tuple[str, str, str]]:
    """Give alice (added first when ``alice``) two kept facts; every fact's (user, persona,
    text)."""
    store = open_store(url, sqlite_path="-")
    try:
        if alice:
            user = await store.add_user("alice")
            await store.remember(user.id, "guide", "Alice has a cat called Miso", max_items=5)
            await store.remember(user.id, "scout", "Alice climbs", max_items=5)
        users = {u.id: u.name for u in await store.users()}
        return [(users[m.user_id], m.persona, m.text) for m in await store.dump_memories()]
    finally:
        await store.aclose()


def test_backup_restore_and_copy_carry_the_kept_facts(
    db_env: dict[str, str], live: Path, tmp_path: Path, postgres_server: Any
) -> None:
    facts = asyncio.run(_facts(str(live), alice=True))
    assert [f[2] for f in facts] == ["Alice has a cat called Miso", "Alice climbs"]
    backup = tmp_path / "one.sqlite3"
    assert cli(db_env, "db", "backup", "--to", str(backup)).returncode == 0
    fresh = tmp_path / "fresh"
    env = {**db_env, "DATA_DIR": str(fresh)}
    assert cli(env, "db", "restore", "--from", str(backup)).returncode == 0
    assert asyncio.run(_facts(str(fresh / "conversations.sqlite3"))) == facts

    url = postgres_server.create_database()
    copied = cli(db_env, "db", "copy", "--from", str(live), "--to", url)
    assert copied.returncode == 0 and "2 kept fact(s) added" in copied.stdout
    assert asyncio.run(_facts(url)) == facts
    pg_backup = tmp_path / "pg.sqlite3"
    assert (
        cli({**db_env, "DATABASE_URL": url}, "db", "backup", "--to", str(pg_backup)).returncode == 0
    )
    into = postgres_server.create_database()
    restored = cli({**db_env, "DATABASE_URL": into}, "db", "restore", "--from", str(pg_backup))
    assert restored.returncode == 0 and "2 kept fact(s) added" in restored.stdout
    assert asyncio.run(_facts(into)) == facts
