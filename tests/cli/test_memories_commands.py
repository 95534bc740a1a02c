"""``generic-framework memories list`` and ``memories forget`` as processes, on SQLite and on
PostgreSQL (``DATABASE_URL``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import run_cli

from generic_framework.store import open_store
from generic_framework.store.memories import Memory

pytestmark = pytest.mark.e2e


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), env, timeout=120)


@pytest.fixture(params=["sqlite", "postgres"])
def db_env(env: dict[str, str], request: pytest.FixtureRequest) -> dict[str, str]:
    clean = {k: v for k, v in env.items() if not k.startswith("DATABASE_")}
    if request.param == "postgres":
        server: Any = request.getfixturevalue("postgres_server")
        return {**clean, "DATABASE_URL": server.create_database()}
    return clean


def _url(env: dict[str, str]) -> str:
    return env.get("DATABASE_URL") or str(Path(env["DATA_DIR"]) / "conversations.sqlite3")


async def _fill(url: str) -> dict[str, Memory]:
    store = open_store(url, sqlite_path="-")
    try:
        alice = await store.add_user("alice")
        bob = await store.add_user("bob")
        return {
            "tea": await store.remember(alice.id, "guide", "likes tea", max_items=5),
            "climbs": await store.remember(alice.id, "scout", "climbs", max_items=5),
            "bob": await store.remember(bob.id, "guide", "bob's own", max_items=5),
        }
    finally:
        await store.aclose()


async def _texts(url: str) -> list[str]:
    store = open_store(url, sqlite_path="-")
    try:
        return [m.text for m in await store.dump_memories()]
    finally:
        await store.aclose()


def test_list_and_forget(db_env: dict[str, str]) -> None:
    cli(db_env, "db", "upgrade")
    facts = asyncio.run(_fill(_url(db_env)))
    listed = cli(db_env, "memories", "list", "--user", "alice")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert [line.split("\t")[1:2] + line.split("\t")[3:] for line in lines] == [
        ["scout", "climbs"],
        ["guide", "likes tea"],
    ]
    assert lines[1].startswith(facts["tea"].id + "\t") and "bob's own" not in listed.stdout
    one = cli(db_env, "memories", "list", "--user", "alice", "--persona", "guide", "--json")
    assert [m["text"] for m in json.loads(one.stdout)] == ["likes tea"]
    empty = cli(db_env, "memories", "list", "--user", "admin")
    assert empty.returncode == 0 and empty.stdout == "" and "no kept facts" in empty.stderr
    nobody = cli(db_env, "memories", "list", "--user", "nobody")
    assert nobody.returncode == 1 and "no user named 'nobody'" in nobody.stderr
    gone = cli(db_env, "memories", "forget", facts["tea"].id)
    assert gone.returncode == 0 and f"forgot {facts['tea'].id} (guide): likes tea" in gone.stdout
    again = cli(db_env, "memories", "forget", facts["tea"].id)
    assert again.returncode == 1 and "no kept fact" in again.stderr
    bad = cli(db_env, "memories", "forget", "mem_x")
    assert bad.returncode == 1 and "memory id" in bad.stderr
    assert sorted(asyncio.run(_texts(_url(db_env)))) == ["bob's own", "climbs"]
