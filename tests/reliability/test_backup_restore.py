"""Backups taken while the real service writes turns, restored into a fresh store that then
serves a new turn: ``db backup`` / ``db restore`` on SQLite and PostgreSQL, and the README's
``pg_dump`` / ``pg_restore`` recipe on PostgreSQL.

A writer thread keeps sending turns to a few conversations through the bot's HTTP API while the
backup runs. Every turn acknowledged before the backup started must be in the restored store,
and every conversation there must be whole: turns numbered from 1 without a gap, each with the
question that was sent and its answer (a backup taken in the middle of a turn's write holds the
turn whole or not at all).
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helper_paths  # noqa: F401  (tests, tests/mock and tests/service on sys.path)
import httpx
import pytest
from load import plain_question, write_fixtures
from service_processes import TOKEN, Process, base_env, bot_process
from support import run_cli

from generic_framework.store import ConversationStore, open_store
from generic_framework.wire.messages import AssistantMessage, UserMessage

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONVERSATIONS = 3
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def question(conversation: int, turn: int) -> tuple[str, str]:
    """The question of a conversation's turn (1-based) and the mock's answer to it."""
    return plain_question((conversation * 7 + turn) % 20)


@dataclass
class Writer:
    """Sends turns to ``CONVERSATIONS`` conversations, one after another, until stopped."""

    url: str
    prefix: str
    acknowledged: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        turn = 0
        with httpx.Client(headers=AUTH, timeout=60) as client:
            while not self.stop.is_set():
                turn += 1
                for index in range(CONVERSATIONS):
                    cid = f"{self.prefix}-{index}"
                    text, _ = question(index, turn)
                    reply = client.post(
                        f"{self.url}/v1/conversations/{cid}/messages",
                        json={"persona": "scout", "content": text},
                    )
                    if reply.status_code != 200:
                        self.failures.append(f"{cid} turn {turn}: {reply.status_code}")
                        return
                    self.acknowledged[cid] = turn

    def total(self) -> int:
        return sum(dict(self.acknowledged).values())


@contextmanager
def writing(bot: Process, prefix: str, before: int = 12) -> Iterator[Writer]:
    """A writer running against ``bot`` with at least ``before`` turns acknowledged."""
    writer = Writer(bot.url, prefix)
    thread = threading.Thread(target=writer.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while writer.total() < before and not writer.failures:
        assert time.monotonic() < deadline, "the service answered too few turns"
        time.sleep(0.05)
    try:
        yield writer
    finally:
        writer.stop.set()
        thread.join(60)
    assert writer.failures == []


def mock_for_load(tmp: Path) -> Process:
    fixtures = tmp / "fixtures"
    write_fixtures(fixtures)
    args = ["mock", "--fixtures", str(fixtures), "--host", "127.0.0.1", "--port", "0"]
    return Process(args, tmp / "mock.log", base_env(tmp), tmp)


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    return {**base_env(tmp), "DATA_DIR": str(tmp / "data"), **extra}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), env, timeout=120)


async def check_restored(
    store: ConversationStore, prefix: str, before: dict[str, int]
) -> dict[str, int]:
    """Every conversation of the store whole and every turn of ``before`` in it; the turns."""
    try:
        found: dict[str, int] = {}
        for cid in await store.conversation_ids():
            dump = await store.dump(cid)
            assert dump is not None
            index = int(cid.removeprefix(f"{prefix}-"))
            assert [t.turn for t in dump.turns] == list(range(1, len(dump.turns) + 1)), cid
            for stored in dump.turns:
                text, answer = question(index, stored.turn)
                assert [type(m) for m in stored.messages] == [UserMessage, AssistantMessage]
                assert stored.messages[0].content == text
                assert stored.messages[1].content == answer
            found[cid] = len(dump.turns)
    finally:
        await store.aclose()
    for cid, turns in before.items():
        assert found.get(cid, 0) >= turns, (cid, found.get(cid), turns)
    return found


def serves_a_new_turn(bot: Process, cid: str, turns: int, index: int) -> None:
    """The restored store's next turn of ``cid`` is number ``turns + 1``, with its history."""
    text, answer = question(index, turns + 1)
    reply = httpx.post(
        f"{bot.url}/v1/conversations/{cid}/messages",
        json={"persona": "scout", "content": text},
        headers=AUTH,
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["content"] == answer
    stored = httpx.get(f"{bot.url}/v1/conversations/{cid}", headers=AUTH, timeout=30).json()
    turns_seen = [m["turn"] for m in stored["messages"]]
    assert turns_seen == [n for n in range(1, turns + 2) for _ in (0, 1)]


def test_sqlite_backup_while_the_service_writes_restores_every_turn(tmp_path: Path) -> None:
    with mock_for_load(tmp_path) as mock:
        with bot_process(tmp_path, mock) as bot, writing(bot, "s") as writer:
            before = dict(writer.acknowledged)
            done = cli(cli_env(tmp_path), "db", "backup", "--to", str(tmp_path / "b.sqlite3"))
            during = writer.total() - sum(before.values())
            time.sleep(0.5)  # the service keeps writing after the backup too
        assert done.returncode == 0, done.stderr
        assert "integrity check ok" in done.stdout
        assert writer.total() > sum(before.values())
        print(f"\nturns acknowledged before the backup: {sum(before.values())}, during: {during}")

        fresh = tmp_path / "fresh"
        env = cli_env(fresh)
        restored = cli(env, "db", "restore", "--from", str(tmp_path / "b.sqlite3"))
        assert restored.returncode == 0, restored.stderr
        store = open_store(None, sqlite_path=fresh / "data" / "conversations.sqlite3")
        found = asyncio.run(check_restored(store, "s", before))
        assert len(found) == CONVERSATIONS
        print(f"restored: {sum(found.values())} turns, acknowledged by the end: {writer.total()}")

        fresh.mkdir(exist_ok=True)
        with bot_process(fresh, mock, DATA_DIR=str(fresh / "data")) as again:
            serves_a_new_turn(again, "s-1", found["s-1"], 1)
            # The restored database is live now: a second restore is refused, even with
            # --replace, and changes nothing.
            refused = cli(env, "db", "restore", "--from", str(tmp_path / "b.sqlite3"), "--replace")
            assert refused.returncode == 2
            assert "a service is running on" in refused.stderr
            serves_a_new_turn(again, "s-1", found["s-1"] + 1, 1)


def pg_tool(server: Any, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(server.bindir / name), *args], check=False, capture_output=True, text=True, timeout=120
    )


def test_postgres_backups_while_the_service_writes_restore_every_turn(
    tmp_path: Path, postgres_server: Any
) -> None:
    url = postgres_server.create_database()
    dump = tmp_path / "bot.dump"
    with mock_for_load(tmp_path) as mock:
        with bot_process(tmp_path, mock, DATABASE_URL=url) as bot, writing(bot, "p") as writer:
            before = dict(writer.acknowledged)
            # The README's recipe: pg_dump's custom format, one snapshot of the whole database.
            dumped = pg_tool(postgres_server, "pg_dump", "-Fc", "-d", url, "-f", str(dump))
            copied = cli(
                cli_env(tmp_path, DATABASE_URL=url), "db", "backup", "--to", str(tmp_path / "c")
            )
        print(f"\nturns acknowledged before the backups: {sum(before.values())}, by the end: "
              f"{writer.total()}")  # fmt: skip
        assert dumped.returncode == 0, dumped.stderr
        assert copied.returncode == 0, copied.stderr
        assert "integrity check ok" in copied.stdout
        assert writer.total() > sum(before.values())

        into_copy = postgres_server.create_database()
        restored = cli(cli_env(tmp_path), "db", "restore", "--from", str(tmp_path / "c"),
                       "--to", into_copy)  # fmt: skip
        assert restored.returncode == 0, restored.stderr
        assert "verified" in restored.stdout
        into_dump = postgres_server.create_database()
        loaded = pg_tool(postgres_server, "pg_restore", "--clean", "--if-exists", "--no-owner",
                         "-d", into_dump, str(dump))  # fmt: skip
        assert loaded.returncode == 0, loaded.stderr

        for target in (into_copy, into_dump):
            found = asyncio.run(check_restored(open_store(target, sqlite_path="-"), "p", before))
            assert len(found) == CONVERSATIONS
            print(f"restored: {sum(found.values())} turns")
            with bot_process(tmp_path, mock, DATABASE_URL=target) as again:
                serves_a_new_turn(again, "p-2", found["p-2"], 2)
