"""SQLite's backup API against ``VACUUM INTO`` while another connection writes (docs/design/0320).

    python tests/reliability/backup_measure.py --turns 40000 --runs 2 [--dir DIR]

Fills a conversation store through :class:`SQLiteStore` (kept in DIR between runs), then takes
each kind of backup ``--runs`` times while a second connection commits a small write every 2 ms,
and prints how long each backup took and how long the writer's writes took meanwhile (median,
slowest). Both kinds run in one read transaction of the source, so both are consistent; the
figures decide which one ``db backup`` uses.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from generic_framework.store import SQLiteStore
from generic_framework.wire.messages import AssistantMessage, UserMessage

TEXT = "lorem ipsum dolor sit amet " * 40


async def fill(path: Path, turns: int) -> None:
    store = SQLiteStore(path)
    try:
        if await store.conversation_ids():
            return
        for n in range(turns):
            cid = f"c{n % 500}"
            turn = [UserMessage(content=f"q{n} {TEXT}"), AssistantMessage(content=f"a{n} {TEXT}")]
            await store.append_turn(cid, "scout", turn)
    finally:
        await store.aclose()


def writer(path: Path, stop: threading.Event, seconds: list[float]) -> None:
    """Rename one conversation over and over: a small committed write every 2 ms."""
    db = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        while not stop.is_set():
            started = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("UPDATE conversations SET title = ? WHERE id = 'c1'", (str(started),))
            db.execute("COMMIT")
            seconds.append(time.perf_counter() - started)
            time.sleep(0.002)
    finally:
        db.close()


def backup_api(source: Path, target: Path) -> None:
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst, pages=-1)
    finally:
        dst.close()
        src.close()


def vacuum_into(source: Path, target: Path) -> None:
    src = sqlite3.connect(source)
    try:
        src.execute("VACUUM INTO ?", (str(target),))
    finally:
        src.close()


def measure(name: str, copy: Callable[[Path, Path], None], source: Path, target: Path) -> str:
    target.unlink(missing_ok=True)
    stop, seconds = threading.Event(), []
    thread = threading.Thread(target=writer, args=(source, stop, seconds))
    thread.start()
    time.sleep(0.3)
    first = len(seconds)
    started = time.perf_counter()
    copy(source, target)
    elapsed = time.perf_counter() - started
    during = seconds[first:]
    stop.set()
    thread.join()
    median = statistics.median(during) * 1000 if during else float("nan")
    slowest = max(during) * 1000 if during else float("nan")
    return (
        f"{name}: {elapsed * 1000:.0f} ms, {len(during)} writes meanwhile (median "
        f"{median:.2f} ms, slowest {slowest:.1f} ms), {target.stat().st_size / 1e6:.1f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None, help="keep the store here")
    args = parser.parse_args(argv)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="gf-backup-"))
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "source.sqlite3"
    asyncio.run(fill(source, args.turns))
    print(f"store: {source.stat().st_size / 1e6:.1f} MB, {args.turns} turns")
    for _ in range(args.runs):
        print(measure("backup API", backup_api, source, folder / "copy.sqlite3"))
        print(measure("VACUUM INTO", vacuum_into, source, folder / "copy.sqlite3"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
