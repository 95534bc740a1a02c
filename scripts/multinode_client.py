"""The clients of scripts/multinode.sh: bounded turns with Idempotency-Key retries, then a check
of the database against what they were told.

    python scripts/multinode_client.py load --url URL [--url URL2] --token-file FILE \\
        --phase-file FILE --stop-file FILE --out RESULT.json
    python scripts/multinode_client.py verify --url URL --token-file FILE --result RESULT.json

``load``: WORKERS clients, each with its own conversation, send turns one after another
(``POST /v1/conversations/{id}/messages``, a pause between turns) until the stop file appears,
TURNS each, or DEADLINE seconds. Every turn has its own Idempotency-Key; a 409, a 5xx or a
transport error is retried with the same key (Retry-After, at most 2 s apart; the next URL on a
transport error, as a client with several addresses does) until the turn is acknowledged (200)
or MAX_TURN_WAIT passes. Each request is recorded with the phase the phase file named when it
started. ``verify`` reads each conversation back and counts: lost (acknowledged, not stored)
and duplicated (stored more often than sent). The token is read from a file, never printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx

QUESTION = "What is the capital of Canada?"  # the bundled mock has its answer


class Load:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.token = Path(args.token_file).read_text().strip()
        self.run = f"{int(time.time())}"
        self.t0 = time.monotonic()
        self.requests: list[dict[str, Any]] = []
        self.acked: Counter[str] = Counter()
        self.gave_up: Counter[str] = Counter()

    def phase(self) -> str:
        try:
            return Path(self.args.phase_file).read_text().strip() or "start"
        except OSError:
            return "start"

    def stopping(self) -> bool:
        return Path(self.args.stop_file).exists() or (
            time.monotonic() - self.t0 > self.args.deadline
        )

    async def turn(self, client: httpx.AsyncClient, cid: str, key: str) -> bool:
        """One turn, retried with its key until acknowledged; False if it gave up."""
        body = {"persona": self.args.persona, "content": QUESTION}
        headers = {"Idempotency-Key": key}
        started_turn = time.monotonic()
        url_index = 0
        while True:
            url = self.args.url[url_index % len(self.args.url)]
            phase, started = self.phase(), time.monotonic()
            status, error = 0, ""
            try:
                response = await client.post(
                    f"{url}/v1/conversations/{cid}/messages", json=body, headers=headers
                )
                status = response.status_code
                retry_after = float(response.headers.get("Retry-After") or 1)
                if status != 200:
                    error = response.text[:160]
            except httpx.HTTPError as exc:
                error, retry_after = type(exc).__name__, 0.5
                url_index += 1
            self.requests.append(
                {
                    "phase": phase,
                    "at": round(started - self.t0, 2),
                    "wall": round(time.time() - (time.monotonic() - started), 3),
                    "status": status,
                    "seconds": round(time.monotonic() - started, 3),
                    "error": error,
                    "url": url,
                    "conversation": cid,
                }
            )
            if status == 200:
                return True
            if 400 <= status < 500 and status != 409:
                return False  # not retryable: counted as given up
            if time.monotonic() - started_turn > self.args.max_turn_wait:
                return False
            await asyncio.sleep(min(max(retry_after, 0.5), 2.0))

    async def worker(self, number: int) -> None:
        cid = f"mn-{self.run}-{number}"
        headers = {"Authorization": f"Bearer {self.token}"}
        timeout = httpx.Timeout(self.args.request_timeout)
        async with httpx.AsyncClient(headers=headers, timeout=timeout) as client:
            await asyncio.sleep(number * self.args.pause / max(self.args.workers, 1))
            for i in range(self.args.turns):
                if self.stopping():
                    break
                if await self.turn(client, cid, f"{cid}-{i}"):
                    self.acked[cid] += 1
                else:
                    self.gave_up[cid] += 1
                await asyncio.sleep(self.args.pause)
            self.acked[cid] += 0

    async def go(self) -> dict[str, Any]:
        await asyncio.gather(*(self.worker(n) for n in range(self.args.workers)))
        phases: dict[str, dict[str, Any]] = defaultdict(
            lambda: {"requests": 0, "ok": 0, "failed": 0, "max_seconds": 0.0, "statuses": {}}
        )
        for record in self.requests:
            figures = phases[record["phase"]]
            figures["requests"] += 1
            figures["ok" if record["status"] == 200 else "failed"] += 1
            figures["max_seconds"] = max(figures["max_seconds"], record["seconds"])
            key = str(record["status"])
            figures["statuses"][key] = figures["statuses"].get(key, 0) + 1
        return {
            "run": self.run,
            "elapsed": round(time.monotonic() - self.t0, 1),
            "acked": dict(self.acked),
            "gave_up": dict(self.gave_up),
            "phases": dict(phases),
            "requests": self.requests,
        }


async def verify(url: str, result: dict[str, Any], token: str) -> dict[str, Any]:
    lost = duplicated = stored_total = 0
    problems: list[str] = []
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as client:
        for cid, acked in sorted(result["acked"].items()):
            response = await client.get(f"{url}/v1/conversations/{cid}")
            if response.status_code == 404 and acked == 0:
                continue
            if response.status_code != 200:
                problems.append(f"{cid}: read back: HTTP {response.status_code}")
                lost += acked
                continue
            users = [m for m in response.json()["messages"] if m["role"] == "user"]
            stored = len(users)
            stored_total += stored
            sent = acked + result["gave_up"].get(cid, 0)
            lost += max(0, acked - stored)
            duplicated += max(0, stored - sent)
            if stored != acked:
                problems.append(f"{cid}: {acked} acknowledged, {stored} stored")
    return {"lost": lost, "duplicated": duplicated, "stored": stored_total, "problems": problems}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["load", "verify"])
    parser.add_argument("--url", action="append", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--phase-file", default="/nonexistent")
    parser.add_argument("--stop-file", default="/nonexistent")
    parser.add_argument("--out")
    parser.add_argument("--result")
    parser.add_argument("--persona", default="scout")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--pause", type=float, default=0.5)
    parser.add_argument("--deadline", type=float, default=1800.0)
    parser.add_argument("--request-timeout", type=float, default=60.0)
    parser.add_argument("--max-turn-wait", type=float, default=600.0)
    args = parser.parse_args(argv)
    if args.mode == "load":
        out = asyncio.run(Load(args).go())
        Path(args.out).write_text(json.dumps(out))
        return 0
    result = json.loads(Path(args.result).read_text())
    token = Path(args.token_file).read_text().strip()
    checked = asyncio.run(verify(args.url[0], result, token))
    print(json.dumps(checked))
    return 0 if checked["lost"] == 0 and checked["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
