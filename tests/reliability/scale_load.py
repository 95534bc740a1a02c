"""Replicas: three bot processes on one PostgreSQL and one mock, conversations sent round-robin.

    python tests/reliability/scale_load.py --conversations 200 --turns 5

starts a throwaway PostgreSQL server (``initdb`` in a temp dir), the mock (``--latency-ms 20``)
and three ``generic-framework serve`` processes started together on one fresh database (so they
migrate it together), each with ``LLM_MAX_CONCURRENCY`` (8) as the budget all three share.
Every conversation sends its turns round-robin across the replicas: the first alone, then a
burst of three at once (one per replica), then the last; four in five turns are plain questions
(one upstream call), one in five a ``//`` question with a calculator round (two calls).
Afterwards it checks, from the database:

- every acknowledged turn (HTTP 200) is stored once, nothing else is; turn numbers are
  contiguous (1..n), each turn is whole and every history passes ``history_problems`` (no
  orphan tool message);
- turns of one conversation never overlapped, although bursts hit three replicas at once: each
  turn started (under the conversation's lock) after the one before it ended, by the times in
  the turn records;
- the mock never had more than ``LLM_MAX_CONCURRENCY`` upstream requests in flight (its report's
  high-water mark), across the three replicas;
- latency p50/p99 of the turns as the client saw them.

It prints a summary (``--json`` for the raw figures) and exits 1 when a check fails. The pytest
wrapper (``test_scale.py``) runs 50 conversations in CI, plus the crash and restart cases.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import helper_paths  # noqa: F401  (tests, tests/mock and tests/service on sys.path)
import httpx
from load import percentiles, question, write_fixtures
from postgres_server import PostgresServer, require_server
from service_processes import PERSONAS, TOKEN, Process, base_env

from generic_framework.core.sanitize import history_problems
from generic_framework.store.base import StoredTurn
from generic_framework.store.postgres import PostgresStore
from generic_framework.wire.messages import UserMessage

BURST = 3
"""Turns of one conversation sent at once, one to each replica."""


@dataclass(frozen=True)
class ScaleConfig:
    """One run."""

    conversations: int = 200
    turns: int = 5
    replicas: int = 3
    max_concurrency: int = 8
    latency_ms: int = 20
    pool_size: int = 10
    tool_share: int = 5


@dataclass
class Sent:
    """One turn as the client saw it."""

    conversation: str
    text: str
    replica: int
    status: int
    seconds: float
    code: str | None = None
    retry_after: str | None = None


@dataclass
class ScaleResult:
    """The figures of a run, and the problems found (none when it passed)."""

    config: ScaleConfig
    sent: int = 0
    acknowledged: int = 0
    stored: int = 0
    lost: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    turns_per_second: float = 0.0
    latency_ms: dict[str, float] = field(default_factory=dict)
    mock: dict[str, int] = field(default_factory=dict)
    per_replica: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return not self.problems


# ------------------------------------------------------------------------------ processes


def bot_env(tmp: Path, mock: Process, url: str, **extra: str) -> dict[str, str]:
    """A replica's environment: the database, the mock, the shared budget."""
    return {
        **base_env(tmp),
        "OPENAI_BASE_URL": f"{mock.url}/api/paas/v4",
        "OPENAI_API_KEY": "mock-key",
        "PERSONAS_DIR": str(PERSONAS),
        "DATA_DIR": str(tmp / "data"),
        "BOT_API_TOKEN": TOKEN,
        "DATABASE_URL": url,
        **extra,
    }


def replicas(tmp: Path, mock: Process, url: str, count: int, **extra: str) -> list[Process]:
    """``count`` serve processes, started at the same moment (they migrate together)."""
    env = bot_env(tmp, mock, url, **extra)
    bots = [
        Process(["serve", "--host", "127.0.0.1", "--port", "0"], tmp / f"bot{i}.log", env, tmp)
        for i in range(count)
    ]
    with ThreadPoolExecutor(count) as pool:
        list(pool.map(lambda bot: bot.start(60.0), bots))
    return bots


@contextlib.contextmanager
def mock_process(tmp: Path, latency_ms: int) -> Iterator[Process]:
    fixtures = tmp / "fixtures"
    args = ["mock", "--fixtures", str(fixtures), "--host", "127.0.0.1", "--port", "0",
            "--latency-ms", str(latency_ms)]  # fmt: skip
    with Process(args, tmp / "mock.log", base_env(tmp), tmp) as mock:
        yield mock


def mock_report(mock: Process) -> dict[str, Any]:
    return dict(httpx.get(f"{mock.url}/mock/report", timeout=10).json())


# ------------------------------------------------------------------------------ the load


async def send(
    client: httpx.AsyncClient, bots: list[Process], replica: int, cid: str, text: str
) -> Sent:
    """One turn through one replica."""
    started = time.perf_counter()
    url = f"{bots[replica].url}/v1/conversations/{cid}/messages"
    try:
        response = await client.post(url, json={"persona": "scout", "content": text})
    except httpx.TransportError as exc:
        return Sent(cid, text, replica, 0, time.perf_counter() - started, type(exc).__name__)
    seconds = time.perf_counter() - started
    code = None if response.status_code == 200 else response.json()["error"]["code"]
    retry_after = response.headers.get("retry-after")
    return Sent(cid, text, replica, response.status_code, seconds, code, retry_after)


def plan(index: int, config: ScaleConfig) -> list[list[str]]:
    """A conversation's turns in waves: the first alone, a burst, then the rest one by one."""
    texts = [question(index, n, config.tool_share)[0] for n in range(config.turns)]
    return [texts[:1], texts[1 : 1 + BURST]] + [[t] for t in texts[1 + BURST :]]


async def conversation(
    client: httpx.AsyncClient, bots: list[Process], index: int, config: ScaleConfig
) -> list[Sent]:
    sent: list[Sent] = []
    number = 0
    for wave in plan(index, config):
        calls = []
        for text in wave:
            calls.append(send(client, bots, (index + number) % len(bots), f"s-{index}", text))
            number += 1
        sent.extend(await asyncio.gather(*calls))
    return sent


async def drive(bots: list[Process], config: ScaleConfig) -> tuple[list[Sent], float]:
    # No kept-alive connections: on a saturated machine a replica's event loop can run its 5 s
    # keep-alive timer before it reads a request that already arrived on that connection, and
    # the client sees the connection closed (a ReadError) for a turn that never started.
    limits = httpx.Limits(
        max_connections=config.conversations * BURST + 10, max_keepalive_connections=0
    )
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(limits=limits, headers=headers, timeout=300) as client:
        started = time.monotonic()
        runs = await asyncio.gather(
            *(conversation(client, bots, i, config) for i in range(config.conversations))
        )
        elapsed = time.monotonic() - started
    return [s for run in runs for s in run], elapsed


# ------------------------------------------------------------------------------ checks


def _end(turn: StoredTurn) -> datetime | None:
    record = turn.record
    if record is None or not record.started_at:
        return None
    return datetime.fromisoformat(record.started_at) + timedelta(milliseconds=record.duration_ms)


def check_turns(cid: str, turns: list[StoredTurn], problems: list[str]) -> None:
    """Contiguous numbers, whole turns, valid history, and no two turns at once."""
    if [t.turn for t in turns] != list(range(1, len(turns) + 1)):
        problems.append(f"{cid}: turn numbers {[t.turn for t in turns]} are not contiguous")
    messages = [m for t in turns for m in t.messages]
    if found := history_problems(messages):
        problems.append(f"{cid}: stored history is invalid: {found[:2]}")
    for before, after in itertools.pairwise(turns):
        end, record = _end(before), after.record
        if end is None or record is None:
            problems.append(f"{cid}: turn {after.turn} or the one before has no record")
            continue
        # Both times come from one clock; started_at is cut to the millisecond.
        if datetime.fromisoformat(record.started_at) < end - timedelta(milliseconds=2):
            problems.append(f"{cid}: turn {after.turn} started before turn {before.turn} ended")


async def check_stored(url: str, sent: list[Sent], result: ScaleResult) -> None:
    """Every acknowledged turn stored exactly once, nothing else; see :func:`check_turns`."""
    acknowledged: dict[str, Counter[str]] = {}
    for s in sent:
        if s.status == 200:
            expected = s.text.removeprefix("//").strip()
            acknowledged.setdefault(s.conversation, Counter())[expected] += 1
    store = PostgresStore(url, pool_size=2)
    try:
        for cid in sorted({s.conversation for s in sent}):
            turns = await store.turns(cid) or []
            result.stored += len(turns)
            users = Counter(
                m.content for t in turns for m in t.messages if isinstance(m, UserMessage)
            )
            wanted = acknowledged.get(cid, Counter())
            result.lost += sum((wanted - users).values())
            if users != wanted:
                result.problems.append(f"{cid}: acknowledged {dict(wanted)}, stored {dict(users)}")
            check_turns(cid, turns, result.problems)
    finally:
        await store.aclose()


def summarise(sent: list[Sent], elapsed: float, result: ScaleResult) -> None:
    result.sent = len(sent)
    result.acknowledged = sum(s.status == 200 for s in sent)
    result.statuses = dict(Counter(str(s.status) for s in sent))
    result.per_replica = dict(Counter(f"replica {s.replica}" for s in sent))
    result.turns_per_second = round(len(sent) / elapsed, 1)
    p50, p99 = percentiles([s.seconds * 1000 for s in sent if s.status == 200])
    result.latency_ms = {"turn_p50": round(p50, 1), "turn_p99": round(p99, 1)}
    for s in sent:
        if s.status != 200:
            result.problems.append(f"{s.conversation}: HTTP {s.status} {s.code}")


async def run_scale(config: ScaleConfig, tmp: Path, server: PostgresServer) -> ScaleResult:
    """Run once on ``server`` (a fresh database) in ``tmp``; the result lists failed checks."""
    result = ScaleResult(config)
    url = server.create_database("scale")
    extra = {
        "LLM_MAX_CONCURRENCY": str(config.max_concurrency),
        "DATABASE_POOL_SIZE": str(config.pool_size),
    }
    await asyncio.to_thread(write_fixtures, tmp / "fixtures")  # runs the tools in their own loop
    with mock_process(tmp, config.latency_ms) as mock:
        bots = replicas(tmp, mock, url, config.replicas, **extra)
        try:
            sent, elapsed = await drive(bots, config)
            result.mock = {k: v for k, v in mock_report(mock).items() if isinstance(v, int)}
        finally:
            for bot in bots:
                bot.stop()
    summarise(sent, elapsed, result)
    await check_stored(url, sent, result)
    if result.mock["max_in_flight"] > config.max_concurrency:
        result.problems.append(
            f"{result.mock['max_in_flight']} upstream requests were in flight at once, over "
            f"LLM_MAX_CONCURRENCY={config.max_concurrency}"
        )
    if result.mock["unmatched"]:
        result.problems.append(f"{result.mock['unmatched']} requests matched no fixture")
    return result


def render(result: ScaleResult) -> str:
    c, ms = result.config, result.latency_ms
    lines = [
        f"scale: {c.replicas} replicas on one PostgreSQL, {c.conversations} conversations x "
        f"{c.turns} turns (bursts of {BURST}), LLM_MAX_CONCURRENCY={c.max_concurrency}, "
        f"mock latency {c.latency_ms} ms, DATABASE_POOL_SIZE={c.pool_size}",
        f"  turns: sent {result.sent} ({result.turns_per_second}/s), acknowledged "
        f"{result.acknowledged}, stored {result.stored}, lost {result.lost}, statuses "
        f"{result.statuses}, {result.per_replica}",
        f"  upstream: max in flight {result.mock.get('max_in_flight')} (budget "
        f"{c.max_concurrency}), requests {result.mock.get('requests')}, "
        f"unmatched {result.mock.get('unmatched')}",
        f"  latency ms: turn p50 {ms.get('turn_p50')} / p99 {ms.get('turn_p99')}",
        "  checks: " + ("all passed" if result.ok else f"{len(result.problems)} FAILED"),
        *(f"    {problem}" for problem in result.problems[:20]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--max-concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    config = ScaleConfig(
        args.conversations, args.turns, args.replicas, args.max_concurrency, args.latency_ms,
        args.pool_size,
    )  # fmt: skip
    server = PostgresServer(require_server()).init()
    try:
        with tempfile.TemporaryDirectory(prefix="gf-scale-") as tmp:
            result = asyncio.run(run_scale(config, Path(tmp), server))
    finally:
        server.destroy()
    print(json.dumps(asdict(result), indent=2) if args.json else render(result))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
