"""Load: the bot service under many concurrent conversations, against a slow, flaky mock.

    python tests/reliability/load.py --conversations 200 --seconds 60

starts the mock (``--latency-ms 50 --fail-rate 0.05``, seeded) and the bot as processes, then
runs every conversation as a loop of turns (``POST /v1/conversations/{id}/messages``) until the
time is up: four in five are plain questions (one upstream call), one in five a ``//`` question
answered after a calculator round (two calls). Afterwards it checks

- no lost turn: every acknowledged turn (HTTP 200) is in SQLite, in order, and nothing else is;
  every stored history passes ``history_problems``;
- no 5xx beyond upstream failures that outlived their retries (503 with code ``1305``, the
  injected overload, after every attempt drew one);
- memory: the bot's RSS before the load, after a warm-up turn per conversation, and at the end;
- latency: p50/p99 of each turn as the client saw it, and of what the service added over the
  mock's own latency (turn time minus latency x upstream calls; retries and their backoff count
  as added).

It prints a summary (``--json`` for the raw figures) and exits 1 when a check fails. The
pytest wrapper (``test_load.py``) runs a smaller size in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import helper_paths  # noqa: F401  (tests/mock and tests/service on sys.path)
import httpx
from fixture_parts import Conversation, call, completion, fixture, tool_output
from service_processes import PERSONAS, TOKEN, Process, base_env, bot_process

from generic_framework.core.sanitize import history_problems
from generic_framework.store import SQLiteStore
from generic_framework.wire.messages import UserMessage

QUESTIONS = 20
"""Distinct questions of each kind: turns are told apart by their text."""
RETRIES = 3
"""LLM_MAX_RETRIES of the bot under load (the default)."""


@dataclass(frozen=True)
class LoadConfig:
    """One load run."""

    conversations: int = 200
    seconds: float = 60.0
    latency_ms: int = 50
    fail_rate: float = 0.05
    seed: int = 1
    tool_share: int = 5
    """One turn in this many is a ``//`` question with a tool round."""


@dataclass
class Turn:
    """One turn as the client saw it."""

    conversation: str
    text: str
    calls: int
    status: int
    seconds: float
    code: str | None = None


@dataclass
class LoadResult:
    """The figures of a run and the problems found (none when it passed)."""

    config: LoadConfig
    turns: int = 0
    acknowledged: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    error_codes: dict[str, int] = field(default_factory=dict)
    turns_per_second: float = 0.0
    latency_ms: dict[str, float] = field(default_factory=dict)
    rss_mb: dict[str, float] = field(default_factory=dict)
    mock: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return not self.problems


# ------------------------------------------------------------------------------ fixtures


def plain_question(number: int) -> tuple[str, str]:
    return f"Load question {number}: which number comes after {number}?", f"{number + 1}."


def tool_question(number: int) -> str:
    return f"// load sum {number}: what is {number} + {number}?"


def write_fixtures(target: Path) -> None:
    """Plain questions (one exchange) and ``//`` questions with a calculator round (two)."""
    target.mkdir(parents=True, exist_ok=True)
    made = []
    for number in range(QUESTIONS):
        text, answer = plain_question(number)
        talk = Conversation(text)
        talk.exchange(completion(f"plain-{number}", answer))
        made.append(fixture(f"load_plain_{number}", "", text, talk))
        text = tool_question(number)
        talk = Conversation(text)
        arguments = {"expression": f"{number} + {number}"}
        first = completion(
            f"sum-{number}", "", calls=[call(f"sum-{number}", "calculate", arguments, 0)]
        )
        talk.exchange(first)
        talk.run_tools(first, [tool_output("calculate", arguments)])
        talk.exchange(completion(f"sum-{number}-2", f"It is {2 * number}."))
        made.append(fixture(f"load_sum_{number}", "", text, talk))
    for each in made:
        (target / f"{each.name}.json").write_text(each.to_json(), encoding="utf-8")


# ------------------------------------------------------------------------------ processes


def rss_mb(process: Process) -> float:
    """The resident set size of a process, from /proc (Linux)."""
    assert process.proc is not None
    for line in Path(f"/proc/{process.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line")


@contextlib.contextmanager
def stack(tmp: Path, config: LoadConfig) -> Iterator[tuple[Process, Process]]:
    fixtures = tmp / "fixtures"
    mock_args = [
        "mock", "--fixtures", str(fixtures), "--host", "127.0.0.1", "--port", "0",
        "--latency-ms", str(config.latency_ms), "--fail-rate", str(config.fail_rate),
        "--fail-seed", str(config.seed),
    ]  # fmt: skip
    # LOG_LEVEL stays at its default (INFO, access log on): the shipped configuration.
    env = {"PERSONAS_DIR": str(PERSONAS), "LLM_MAX_RETRIES": str(RETRIES)}
    with (
        Process(mock_args, tmp / "mock.log", base_env(tmp), tmp) as mock,
        bot_process(tmp, mock, **env) as bot,
    ):
        yield mock, bot


# ------------------------------------------------------------------------------ the load


def question(conversation: int, turn: int, share: int) -> tuple[str, int]:
    """The text of a turn and how many upstream calls it needs."""
    number = (conversation * 7 + turn) % QUESTIONS
    if (conversation + turn) % share == 0:
        return tool_question(number), 2
    return plain_question(number)[0], 1


async def one_turn(client: httpx.AsyncClient, url: str, cid: str, text: str, calls: int) -> Turn:
    started = time.perf_counter()
    response = await client.post(
        f"{url}/v1/conversations/{cid}/messages", json={"persona": "scout", "content": text}
    )
    seconds = time.perf_counter() - started
    code = None if response.status_code == 200 else response.json()["error"]["code"]
    if code:
        print(response.json(), file=sys.stderr)
    return Turn(cid, text, calls, response.status_code, seconds, code)


async def conversation_loop(
    client: httpx.AsyncClient, url: str, index: int, config: LoadConfig, until: float
) -> list[Turn]:
    turns: list[Turn] = []
    number = 1  # turn 0 was the warm-up
    while time.monotonic() < until:
        text, calls = question(index, number, config.tool_share)
        turns.append(await one_turn(client, url, f"load-{index}", text, calls))
        number += 1
    return turns


async def drive(
    bot: Process, config: LoadConfig, result: LoadResult
) -> tuple[list[Turn], list[Turn], float]:
    """A warm-up turn per conversation, then the timed load; RSS is read in between."""
    # Idle connections expire on our side before the service's 5 s keep-alive timeout, so a
    # request never races the server closing the connection it was sent on (a ReadError).
    limits = httpx.Limits(max_connections=config.conversations + 10, keepalive_expiry=2.0)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(limits=limits, headers=headers, timeout=120) as client:
        warm = await asyncio.gather(
            *(
                one_turn(client, bot.url, f"load-{i}", *question(i, 0, config.tool_share))
                for i in range(config.conversations)
            )
        )
        result.rss_mb["after_warm_up"] = round(rss_mb(bot), 1)
        started = time.monotonic()
        until = started + config.seconds
        loops = await asyncio.gather(
            *(
                conversation_loop(client, bot.url, i, config, until)
                for i in range(config.conversations)
            )
        )
        elapsed = time.monotonic() - started
    return list(warm), [turn for loop in loops for turn in loop], elapsed


# ------------------------------------------------------------------------------ checks


async def check_stored(database: Path, turns: list[Turn], result: LoadResult) -> None:
    """Every acknowledged turn is stored, in order, and nothing else; histories are valid."""
    acknowledged: dict[str, list[str]] = {}
    for turn in turns:
        if turn.status == 200:
            acknowledged.setdefault(turn.conversation, []).append(turn.text)
    store = SQLiteStore(database)
    try:
        for cid, texts in sorted(acknowledged.items()):
            stored = await store.get(cid) or []
            messages = [item.message for item in stored]
            users = [m.content for m in messages if isinstance(m, UserMessage)]
            expected = [text.removeprefix("//").strip() for text in texts]
            if users != expected:
                result.problems.append(
                    f"{cid}: {len(expected)} turns acknowledged, {len(users)} stored"
                    + ("" if len(users) != len(expected) else " (in another order)")
                )
            if problems := history_problems(messages):
                result.problems.append(f"{cid}: stored history is invalid: {problems[:2]}")
    finally:
        await store.aclose()


def percentiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (0.0, 0.0)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[98]


def summarise(turns: list[Turn], elapsed: float, config: LoadConfig, result: LoadResult) -> None:
    result.turns = len(turns)
    result.acknowledged = sum(turn.status == 200 for turn in turns)
    result.statuses = dict(Counter(str(turn.status) for turn in turns))
    result.error_codes = dict(Counter(turn.code for turn in turns if turn.code))
    result.turns_per_second = round(len(turns) / elapsed, 1)
    ok = [turn for turn in turns if turn.status == 200]
    observed = [turn.seconds * 1000 for turn in ok]
    added = [turn.seconds * 1000 - turn.calls * config.latency_ms for turn in ok]
    for name, values in (("turn", observed), ("added", added)):
        p50, p99 = percentiles(values)
        result.latency_ms[f"{name}_p50"] = round(p50, 1)
        result.latency_ms[f"{name}_p99"] = round(p99, 1)
    # The only 5xx allowed: a 503 after every attempt drew an injected 503 (RETRIES + 1 each).
    for turn in turns:
        if turn.status != 200 and (turn.status, turn.code) != (503, "1305"):
            result.problems.append(f"{turn.conversation}: HTTP {turn.status} {turn.code}")


async def run_load(config: LoadConfig, tmp: Path) -> LoadResult:
    """Run the load once in ``tmp``; the result lists every failed check."""
    result = LoadResult(config)
    await asyncio.to_thread(write_fixtures, tmp / "fixtures")  # runs the tools in their own loop
    with stack(tmp, config) as (mock, bot):
        result.rss_mb["start"] = round(rss_mb(bot), 1)
        warm, turns, elapsed = await drive(bot, config, result)
        result.rss_mb["end"] = round(rss_mb(bot), 1)
        report = httpx.get(f"{mock.url}/mock/report", timeout=30).json()
        result.mock = {k: report[k] for k in ("requests", "served", "injected", "unmatched")}
        summarise(turns, elapsed, config, result)
        await check_stored(tmp / "data" / "conversations.sqlite3", [*warm, *turns], result)
    if result.mock["unmatched"]:
        result.problems.append(f"{result.mock['unmatched']} requests matched no fixture")
    gave_up = result.statuses.get("503", 0)
    if gave_up * (RETRIES + 1) > result.mock["injected"]:
        result.problems.append(f"{gave_up} turns gave up; the mock injected too few 503s for that")
    return result


def render(result: LoadResult) -> str:
    c, ms = result.config, result.latency_ms
    lines = [
        f"load: {c.conversations} conversations x {c.seconds:g} s; mock latency "
        f"{c.latency_ms} ms, {c.fail_rate:.0%} injected 503s (seed {c.seed})",
        f"  turns: {result.turns} ({result.turns_per_second}/s), acknowledged "
        f"{result.acknowledged}, statuses {result.statuses}, errors {result.error_codes or 'none'}",
        f"  upstream: {result.mock}",
        f"  latency ms: turn p50 {ms['turn_p50']} / p99 {ms['turn_p99']}; added over the mock "
        f"p50 {ms['added_p50']} / p99 {ms['added_p99']}",
        f"  bot RSS MB: {result.rss_mb}",
        "  checks: " + ("all passed" if result.ok else f"{len(result.problems)} FAILED"),
        *(f"    {problem}" for problem in result.problems[:20]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--fail-rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    config = LoadConfig(
        args.conversations, args.seconds, args.latency_ms, args.fail_rate, args.seed
    )
    with tempfile.TemporaryDirectory(prefix="gf-load-") as tmp:
        result = asyncio.run(run_load(config, Path(tmp)))
    print(json.dumps(asdict(result), indent=2) if args.json else render(result))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
