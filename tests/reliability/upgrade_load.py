"""Load across an upgrade: does any request fail while the replicas are replaced?

    BOT_API_TOKEN=... python tests/reliability/upgrade_load.py --url http://127.0.0.1:8000 \\
        --workers 8 --before 10 --after 10 --during 'docker stack deploy ... gf'

sends turns through the proxy in front of the replicas with ``--workers`` concurrent clients
(HTTP keep-alive, the token from ``BOT_API_TOKEN``, never printed): for ``--before`` seconds,
then while the ``--during`` shell command runs (the upgrade: it should return once the rollout
has finished, as ``docker stack deploy --detach=false`` does), then ``--after`` seconds more.
Without ``--during`` it runs ``--before`` seconds. The workers start spread over ``--ramp``
seconds (long requests then do not all start and end together). Each worker cycles through
four kinds of request, so both APIs and both response shapes cross the upgrade:

- ``turn``: ``POST /v1/conversations/{id}/messages`` (stored; a new conversation every
  ``--turns-per-conversation`` turns);
- ``turn-stream``: the same with ``"stream": true``, complete only when ``data: [DONE]`` came
  and no error frame did;
- ``completion`` and ``completion-stream``: ``POST /v1/chat/completions`` (stateless).

Every request is recorded: when it started, its kind, its HTTP status (0: a transport error,
named), whether its body was whole, its latency. A request fails unless it is 200 and whole.
Afterwards every conversation is read back (``GET /v1/conversations/{id}``): each acknowledged
turn must be stored once with its answer, and nothing else (a failed turn that was stored
anyway is reported too). It prints a summary, or ``--json`` the figures (and ``--records FILE``
writes every request as JSON lines), and exits 1 when a request failed or a check did not hold.
The question is one the bundled mock has a recorded answer for (``--question`` to change it).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

QUESTION = "What is the capital of Canada?"
Action = Callable[[], Awaitable[int]]
"""The upgrade: returns its exit code (0: done) once the rollout has finished."""
KINDS = ("turn", "completion", "turn-stream", "completion-stream")


@dataclass(frozen=True)
class UpgradeConfig:
    """One run."""

    url: str
    workers: int = 8
    before: float = 10.0
    after: float = 10.0
    during: str | None = None
    persona: str = "scout"
    question: str = QUESTION
    turns_per_conversation: int = 10
    ramp: float = 1.0
    timeout: float = 300.0
    run_id: str = field(default_factory=lambda: f"{int(time.time())}")


@dataclass
class Request:
    """One request as the client saw it; times are seconds since the run started."""

    worker: int
    kind: str
    conversation: str | None
    started: float
    seconds: float
    status: int
    whole: bool
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.whole


@dataclass
class UpgradeResult:
    """The figures of a run, and the problems found (none when it passed)."""

    requests: int = 0
    failed: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    longest_without_success: float = 0.0
    """Seconds: the longest time between two successful requests' ends (an outage's length)."""
    upgrade: dict[str, Any] = field(default_factory=dict)
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    conversations: int = 0
    acknowledged_turns: int = 0
    stored_turns: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def latency(requests: list[Request]) -> dict[str, float]:
    """Count, p50, p99 and max in milliseconds."""
    values = sorted(r.seconds * 1000 for r in requests)
    if not values:
        return {"count": 0}
    cuts = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else None
    p50, p99 = (cuts[49], cuts[98]) if cuts else (values[0], values[0])
    return {"count": len(values), "p50": round(p50, 1), "p99": round(p99, 1),
            "max": round(values[-1], 1)}  # fmt: skip


class Load:
    """The workers, the clock and what they recorded."""

    def __init__(self, config: UpgradeConfig, token: str) -> None:
        self.config = config
        self.token = token
        self.records: list[Request] = []
        self.acknowledged: Counter[str] = Counter()
        self.failed_turns: Counter[str] = Counter()
        self.conversations: list[str] = []
        self.t0 = time.monotonic()
        self.stop = asyncio.Event()

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def one(self, client: httpx.AsyncClient, worker: int, kind: str, cid: str) -> None:
        """Send one request of ``kind`` and record it."""
        c = self.config
        stream = kind.endswith("-stream")
        if kind.startswith("turn"):
            url, conversation = f"{c.url}/v1/conversations/{cid}/messages", cid
            body: dict[str, Any] = {"persona": c.persona, "content": c.question}
        else:
            url, conversation = f"{c.url}/v1/chat/completions", None
            body = {"model": c.persona, "messages": [{"role": "user", "content": c.question}]}
        if stream:
            body["stream"] = True
        started = self.now()
        status, whole, error = 0, False, None
        try:
            async with client.stream("POST", url, json=body) as response:
                status = response.status_code
                text = (await response.aread()).decode("utf-8", "replace")
            if status == 200:
                whole = _whole(text, stream)
                error = None if whole else "incomplete body"
            else:
                error = _error_code(text)
        except httpx.HTTPError as exc:
            error = type(exc).__name__
        record = Request(worker, kind, conversation, round(started, 3),
                         self.now() - started, status, whole, error)  # fmt: skip
        self.records.append(record)
        if conversation is not None:
            (self.acknowledged if record.ok else self.failed_turns)[conversation] += 1

    async def worker(self, client: httpx.AsyncClient, worker: int) -> None:
        c = self.config
        n, turns, cid = 0, 0, ""
        # Workers start spread over the ramp, so long requests do not all end at once.
        await asyncio.sleep(c.ramp * worker / c.workers)
        while not self.stop.is_set():
            kind = KINDS[(worker + n) % len(KINDS)]
            if kind.startswith("turn"):
                if turns % c.turns_per_conversation == 0:
                    cid = f"upgrade-{c.run_id}-{worker}-{turns // c.turns_per_conversation}"
                    self.conversations.append(cid)
                turns += 1
            await self.one(client, worker, kind, cid)
            n += 1

    async def run(
        self, action: Action | None = None
    ) -> tuple[float, float | None, float | None, int | None]:
        """Drive the load around ``action`` (the ``during`` command when omitted); the run's
        length, the action's start and end, its exit code."""
        c = self.config
        if action is None and c.during:
            action = functools.partial(shell, c.during)
        limits = httpx.Limits(max_connections=c.workers, max_keepalive_connections=c.workers)
        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx.AsyncClient(headers=headers, limits=limits, timeout=c.timeout) as client:
            workers = [asyncio.create_task(self.worker(client, i)) for i in range(c.workers)]
            began = ended = code = None
            try:
                await asyncio.sleep(c.before)
                if action is not None:
                    began = self.now()
                    code = await action()
                    ended = self.now()
                    await asyncio.sleep(c.after)
            finally:
                self.stop.set()
                await asyncio.gather(*workers)
            return self.now(), began, ended, code


def outage(records: list[Request]) -> float:
    """The longest time between two successful requests' ends (the first success's time when
    only one request succeeded; the run's length is not known here)."""
    ends = sorted(r.started + r.seconds for r in records if r.ok)
    return max((b - a for a, b in itertools.pairwise(ends)), default=0.0)


async def shell(command: str) -> int:
    """Run ``command`` in a shell; its exit code. Its output goes to stderr: stdout stays the
    summary (or the JSON)."""
    process = await asyncio.create_subprocess_shell(command, stdout=sys.stderr.fileno())
    return await process.wait()


def _whole(text: str, stream: bool) -> bool:
    if not stream:
        try:
            return bool(json.loads(text))
        except ValueError:
            return False
    frames = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    return bool(frames) and frames[-1] == "[DONE]" and not any('"error"' in f[:12] for f in frames)


def _error_code(text: str) -> str:
    try:
        return str(json.loads(text)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return text[:80]


async def check_stored(load: Load, result: UpgradeResult) -> None:
    """Every acknowledged turn stored once, with its answer, and nothing else."""
    c = load.config
    headers = {"Authorization": f"Bearer {load.token}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as client:
        for cid in load.conversations:
            response = await client.get(f"{c.url}/v1/conversations/{cid}")
            wanted = load.acknowledged[cid]
            if response.status_code == 404 and wanted == 0:
                continue
            if response.status_code != 200:
                result.problems.append(f"{cid}: reading it back gave HTTP {response.status_code}")
                continue
            messages = response.json()["messages"]
            users = [m for m in messages if m["role"] == "user"]
            answered = {m["turn"] for m in messages if m["role"] == "assistant" and m["content"]}
            result.stored_turns += len(users)
            if len(users) != wanted:
                failed = load.failed_turns[cid]
                result.problems.append(
                    f"{cid}: {wanted} turns acknowledged ({failed} failed), {len(users)} stored"
                )
            if any(m["turn"] not in answered for m in users):
                result.problems.append(f"{cid}: a stored turn has no answer")


def summarise(
    load: Load, timing: tuple[float, float | None, float | None, int | None]
) -> UpgradeResult:
    seconds, began, ended, code = timing
    records = load.records
    result = UpgradeResult(
        requests=len(records),
        failed=sum(not r.ok for r in records),
        statuses=dict(Counter(str(r.status) for r in records)),
        by_kind=dict(Counter(r.kind for r in records)),
        seconds=round(seconds, 1),
        conversations=len(load.conversations),
        acknowledged_turns=sum(load.acknowledged.values()),
    )
    result.latency_ms["all"] = latency(records)
    result.longest_without_success = round(outage(records), 1)
    if began is not None and ended is not None:
        during = [r for r in records if began <= r.started <= ended]
        result.upgrade = {
            "command_seconds": round(ended - began, 1),
            "exit_code": code,
            "requests": len(during),
            "failed": sum(not r.ok for r in during),
        }
        result.latency_ms["during_upgrade"] = latency(during)
        result.latency_ms["before_upgrade"] = latency([r for r in records if r.started < began])
        if code != 0:
            result.problems.append(f"the --during command exited with {code}")
    for r in records:
        if not r.ok:
            result.problems.append(
                f"{r.kind} at {r.started:.1f} s (worker {r.worker}): HTTP {r.status} {r.error}"
            )
    return result


async def run_upgrade_load(
    config: UpgradeConfig, token: str, action: Action | None = None
) -> tuple[UpgradeResult, Load]:
    """Run the load around ``action`` (or the ``during`` command), then the stored-turn checks."""
    load = Load(config, token)
    timing = await load.run(action)
    result = summarise(load, timing)
    await check_stored(load, result)
    return result, load


def render(result: UpgradeResult) -> str:
    def fmt(figures: dict[str, float]) -> str:
        if not figures.get("count"):
            return "none"
        return (f"{int(figures['count'])} requests, p50 {figures['p50']} / p99 {figures['p99']}"
                f" / max {figures['max']} ms")  # fmt: skip

    up = result.upgrade
    lines = [
        f"load: {result.requests} requests in {result.seconds} s, {result.failed} failed, "
        f"statuses {result.statuses}, kinds {result.by_kind}",
        f"  longest time between two successful requests: {result.longest_without_success} s",
        f"  all:            {fmt(result.latency_ms['all'])}",
    ]
    if up:
        lines += [
            f"  before upgrade: {fmt(result.latency_ms['before_upgrade'])}",
            f"  during upgrade: {fmt(result.latency_ms['during_upgrade'])}, {up['failed']} "
            f"failed; the command took {up['command_seconds']} s (exit {up['exit_code']})",
        ]
    lines += [
        f"  conversations {result.conversations}: {result.acknowledged_turns} turns "
        f"acknowledged, {result.stored_turns} stored",
        "  checks: " + ("all passed" if result.ok else f"{len(result.problems)} FAILED"),
        *(f"    {problem}" for problem in result.problems[:20]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the proxy's base URL")
    parser.add_argument("--workers", type=int, default=8, help="concurrent clients")
    parser.add_argument("--before", type=float, default=10.0, help="seconds before --during")
    parser.add_argument("--after", type=float, default=10.0, help="seconds after it ends")
    parser.add_argument("--during", help="the shell command that upgrades (waits for the end)")
    parser.add_argument("--persona", default="scout")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--turns-per-conversation", type=int, default=10)
    parser.add_argument("--ramp", type=float, default=1.0, help="seconds to start every worker")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--records", type=Path, help="write every request here (JSON lines)")
    args = parser.parse_args(argv)
    token = os.environ.get("BOT_API_TOKEN", "")
    if not token:
        print("error: set BOT_API_TOKEN (the service's bearer token)", file=sys.stderr)
        return 2
    config = UpgradeConfig(
        url=args.url.rstrip("/"), workers=args.workers, before=args.before, after=args.after,
        during=args.during, persona=args.persona, question=args.question,
        turns_per_conversation=args.turns_per_conversation, ramp=args.ramp,
    )  # fmt: skip
    result, load = asyncio.run(run_upgrade_load(config, token))
    if args.records:
        with args.records.open("w") as out:
            for record in load.records:
                out.write(json.dumps(asdict(record)) + "\n")
    print(json.dumps(asdict(result), indent=2) if args.json else render(result))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
