"""The SQLite online backup taken while another connection keeps writing whole turns: every
backup is one point in time (each conversation whole, numbered without a gap), and no write
waits for it long."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
import time
from pathlib import Path

from generic_framework.store import SQLiteStore
from generic_framework.store.sqlite_backup import backup_file, check_file
from generic_framework.wire.messages import AssistantMessage, UserMessage

FILLER = "lorem ipsum dolor sit amet " * 20


def _turn(cid: str, n: int) -> list[UserMessage | AssistantMessage]:
    return [
        UserMessage(content=f"{cid} question {n} {FILLER}"),
        AssistantMessage(content=f"{cid} answer {n} {FILLER}"),
    ]


def _writer(path: Path, stop: threading.Event, written: list[float], acked: dict[str, int]) -> None:
    async def run() -> None:
        store = SQLiteStore(path)
        n = 0
        try:
            while not stop.is_set():
                n += 1
                started = time.perf_counter()
                cid = f"w{n % 5}"
                acked[cid] = await store.append_turn(cid, "scout", _turn(cid, n))
                written.append(time.perf_counter() - started)
        finally:
            await store.aclose()

    asyncio.run(run())


def _whole(path: Path) -> dict[str, int]:
    """Turns per conversation of a backup, after checking each conversation is whole."""
    with sqlite3.connect(path) as db:
        turns: dict[str, list[int]] = {}
        for cid, turn in db.execute("SELECT conversation_id, turn FROM turns ORDER BY 1, 2"):
            turns.setdefault(cid, []).append(turn)
        for cid, numbers in turns.items():
            assert numbers == list(range(1, len(numbers) + 1)), cid
            (last,) = db.execute("SELECT turns FROM conversations WHERE id = ?", (cid,)).fetchone()
            assert last == len(numbers), cid
        per_turn = db.execute(
            "SELECT count(*) FROM messages GROUP BY conversation_id, turn HAVING count(*) != 2"
        ).fetchall()
        assert per_turn == []
    return {cid: len(numbers) for cid, numbers in turns.items()}


async def test_backups_during_writes_are_each_one_point_in_time(tmp_path: Path) -> None:
    source = tmp_path / "live.sqlite3"
    store = SQLiteStore(source)
    for n in range(1, 1501):
        await store.append_turn(f"c{n % 50}", "scout", _turn(f"c{n % 50}", n))
    await store.aclose()

    stop = threading.Event()
    written: list[float] = []
    acked: dict[str, int] = {}
    writer = threading.Thread(target=_writer, args=(source, stop, written, acked))
    writer.start()
    try:
        while len(written) < 20:
            await asyncio.sleep(0.01)
        seen: list[dict[str, int]] = []
        during = 0
        for number in range(5):
            before, stored = len(written), dict(acked)
            checked = await asyncio.to_thread(backup_file, source, tmp_path / f"b{number}")
            during += len(written) - before
            assert checked == check_file(tmp_path / f"b{number}")
            seen.append(_whole(tmp_path / f"b{number}"))
            # Every turn stored before the backup began is in it (the log's too, not only
            # what was checkpointed into the file).
            assert all(seen[-1].get(cid, 0) >= turns for cid, turns in stored.items())
    finally:
        stop.set()
        writer.join(30)
    for earlier, later in itertools.pairwise(seen):
        assert all(later.get(cid, 0) >= turns for cid, turns in earlier.items())
    assert sum(seen[-1].values()) > sum(seen[0].values())  # the writer kept going
    assert during > 0, "no turn was written while a backup ran"
    assert max(written) < 5.0
