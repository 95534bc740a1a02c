"""Long turns on replicas: no transaction open while the model works, the pool no cap on turns.

    python tests/reliability/hold_load.py --turns 150 --latency-ms 5000 --pool-size 5

starts a throwaway PostgreSQL server, the mock (every answer ``--latency-ms`` late) and three
``generic-framework serve`` processes with ``DATABASE_POOL_SIZE`` connections each, then sends
``--turns`` turns at once, one per conversation, round-robin over the replicas (plain questions:
one upstream call each), and beside them ``--ordered`` conversations of four turns each (the
first alone, then a burst of three at once, one per replica). While it runs it samples
``pg_stat_activity`` every 100 ms. It checks, from the database and the samples:

- every acknowledged turn is stored once, nothing else; turn numbers contiguous, histories
  valid, turns of one conversation never overlapping (``scale_load.check_stored``);
- the wave of one turn per conversation took less than two turns' time (not turns / (pool x
  replicas) turns' time, as when each running turn held a pooled connection);
- no session was ``idle in transaction`` for more than one second in any sample.

It prints a summary (``--json`` for the raw figures) and exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import helper_paths  # noqa: F401  (tests, tests/mock and tests/service on sys.path)
import httpx
import psycopg
from load import question, write_fixtures
from postgres_server import PostgresServer, require_server
from scale_load import (
    ScaleConfig,
    ScaleResult,
    Sent,
    check_stored,
    conversation,
    mock_process,
    mock_report,
    replicas,
    send,
    summarise,
)
from service_processes import TOKEN, Process

SAMPLE = (
    "SELECT count(*) FILTER (WHERE state LIKE 'idle in transaction%%'),"
    " coalesce(max(extract(epoch FROM clock_timestamp() - state_change))"
    "  FILTER (WHERE state LIKE 'idle in transaction%%'), 0),"
    " count(*) FILTER (WHERE state = 'active'), count(*)"
    " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
)
PLAIN = 10**9
"""A tool-question share no conversation reaches: every wave turn is one plain question."""


@dataclass
class Activity:
    """What ``pg_stat_activity`` showed over the run."""

    samples: int = 0
    idle_in_transaction_max: int = 0
    idle_in_transaction_longest_s: float = 0.0
    active_max: int = 0
    sessions_max: int = 0


@dataclass
class HoldResult:
    wave_turns: int
    wave_seconds: float = 0.0
    wave_latency_ms: dict[str, float] = field(default_factory=dict)
    activity: Activity = field(default_factory=Activity)
    scale: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


async def sample(url: str, activity: Activity, stop: asyncio.Event) -> None:
    """``pg_stat_activity`` every 100 ms until ``stop``."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            cursor = await conn.execute(SAMPLE)
            idle, longest, active, sessions = await cursor.fetchone()  # type: ignore[misc]
            activity.samples += 1
            activity.idle_in_transaction_max = max(activity.idle_in_transaction_max, idle)
            activity.idle_in_transaction_longest_s = round(
                max(activity.idle_in_transaction_longest_s, float(longest)), 3
            )
            activity.active_max = max(activity.active_max, active)
            activity.sessions_max = max(activity.sessions_max, sessions)
            await asyncio.sleep(0.1)


async def wave(client: httpx.AsyncClient, bots: list[Process], turns: int) -> list[Sent]:
    """One turn on each of ``turns`` conversations, all at once, round-robin."""
    return await asyncio.gather(
        *(
            send(client, bots, i % len(bots), f"w-{i}", question(i + 1, 0, PLAIN)[0])
            for i in range(turns)
        )
    )


async def drive(
    bots: list[Process], turns: int, ordered: ScaleConfig
) -> tuple[list[Sent], float, float]:
    limits = httpx.Limits(max_connections=turns + 4 * ordered.conversations + 10,
                          max_keepalive_connections=0)  # fmt: skip
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(limits=limits, headers=headers, timeout=300) as client:
        ended: list[float] = []
        started = time.monotonic()
        timed = asyncio.ensure_future(wave(client, bots, turns))
        timed.add_done_callback(lambda _: ended.append(time.monotonic()))
        runs = await asyncio.gather(
            timed,
            *(conversation(client, bots, 1000 + i, ordered) for i in range(ordered.conversations)),
        )
        elapsed = time.monotonic() - started
    return [s for run in runs for s in run], ended[0] - started, elapsed


async def run(args: argparse.Namespace, tmp: Path, server: PostgresServer) -> HoldResult:
    result = HoldResult(args.turns)
    url = server.create_database("hold")
    ordered = ScaleConfig(args.ordered, 4, args.replicas, latency_ms=args.latency_ms,
                          pool_size=args.pool_size, tool_share=PLAIN)  # fmt: skip
    budget = str(args.turns + 4 * args.ordered)  # the upstream budget is not under test
    extra = {"LLM_MAX_CONCURRENCY": budget, "DATABASE_POOL_SIZE": str(args.pool_size),
             "LLM_QUEUE_TIMEOUT": "120"}  # fmt: skip
    await asyncio.to_thread(write_fixtures, tmp / "fixtures")
    stop = asyncio.Event()
    with mock_process(tmp, args.latency_ms) as mock:
        bots = replicas(tmp, mock, url, args.replicas, **extra)
        sampler = asyncio.ensure_future(sample(url, result.activity, stop))
        try:
            sent, result.wave_seconds, elapsed = await drive(bots, args.turns, ordered)
            report = {k: v for k, v in mock_report(mock).items() if isinstance(v, int)}
        finally:
            stop.set()
            await sampler
            for bot in bots:
                bot.stop()
    waved = sorted(s.seconds * 1000 for s in sent if s.conversation.startswith("w-"))
    result.wave_latency_ms = {"min": round(waved[0]), "p50": round(waved[len(waved) // 2]),
                              "max": round(waved[-1])}  # fmt: skip
    scale = ScaleResult(ordered, mock=report)
    summarise(sent, elapsed, scale)
    await check_stored(url, sent, scale)
    result.scale = {k: v for k, v in asdict(scale).items() if k not in {"config", "problems"}}
    result.problems = list(scale.problems)
    turn_s = args.latency_ms / 1000
    if result.wave_seconds > 2 * turn_s:
        result.problems.append(f"the wave took {result.wave_seconds:.1f} s (> 2 x {turn_s} s)")
    if result.activity.idle_in_transaction_longest_s > 1.0:
        result.problems.append(
            f"a session was idle in transaction for {result.activity.idle_in_transaction_longest_s}"
            " s"
        )
    return result


def render(result: HoldResult, args: argparse.Namespace) -> str:
    a, s = result.activity, result.scale
    return "\n".join(
        [
            f"hold: {args.replicas} replicas, DATABASE_POOL_SIZE={args.pool_size}, mock latency "
            f"{args.latency_ms} ms; {args.turns} turns at once on {args.turns} conversations, "
            f"beside {args.ordered} conversations x 4 turns (one alone, then a burst of 3)",
            f"  wave: {result.wave_seconds:.2f} s for {result.wave_turns} turns (latency ms "
            f"{result.wave_latency_ms})",
            f"  mock: {s['mock']}",
            f"  turns: sent {s['sent']}, acknowledged {s['acknowledged']}, stored {s['stored']},"
            f" lost {s['lost']}, statuses {s['statuses']}, latency ms {s['latency_ms']}",
            f"  pg_stat_activity ({a.samples} samples): idle in transaction at most "
            f"{a.idle_in_transaction_max} at once, longest {a.idle_in_transaction_longest_s} s; "
            f"active at most {a.active_max}; sessions at most {a.sessions_max}",
            "  checks: " + ("all passed" if not result.problems else "FAILED"),
            *(f"    {p}" for p in result.problems[:20]),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--ordered", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--latency-ms", type=int, default=5000)
    parser.add_argument("--pool-size", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    server = PostgresServer(require_server()).init()
    try:
        with tempfile.TemporaryDirectory(prefix="gf-hold-") as tmp:
            result = asyncio.run(run(args, Path(tmp), server))
    finally:
        server.destroy()
    print(json.dumps(asdict(result), indent=2) if args.json else render(result, args))
    return 0 if not result.problems else 1


if __name__ == "__main__":
    sys.exit(main())
