"""A lean HTTP/1.1 load generator for scenario 6 (``python -m benchmarks.loadgen``).

Keep-alive connections, one pre-encoded request replayed in a loop, responses read just far
enough to find their end (``Content-Length`` or the chunked terminator), so the server under test,
not this process, is the bottleneck. Prints one JSON line: requests, seconds, requests per second,
this process's CPU share, the status codes seen, the latency percentiles (request written to
response read), and how many answers lacked ``--expect`` (scenario 8 checks every answer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from pathlib import Path


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    lower = head.lower()
    at = lower.find(b"content-length:")
    if at >= 0:
        end = lower.find(b"\r\n", at)
        return status, await reader.readexactly(int(lower[at + 15 : end]))
    chunks = []
    while True:  # chunked
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        chunks.append((await reader.readexactly(size + 2))[:-2])
        if size == 0:
            return status, b"".join(chunks)


class _Tally:
    """What the workers saw."""

    def __init__(self, expect: bytes) -> None:
        self.expect = expect
        self.statuses: Counter[int] = Counter()
        self.latencies: list[float] = []
        self.unexpected = 0


async def _worker(port: int, request: bytes, until: float, tally: _Tally) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < until:
            sent = time.perf_counter()
            writer.write(request)
            status, body = await _response(reader)
            tally.latencies.append(time.perf_counter() - sent)
            tally.statuses[status] += 1
            if tally.expect and tally.expect not in body:
                tally.unexpected += 1
    finally:
        writer.close()


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def http_request(args: argparse.Namespace) -> bytes:
    """The request every connection sends: ``args.path`` with the body read from ``args.body``."""
    body = Path(args.body).read_bytes()
    return (
        f"POST {args.path} HTTP/1.1\r\nhost: 127.0.0.1:{args.port}\r\n"
        f"authorization: Bearer {args.token}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


async def run(args: argparse.Namespace, request: bytes) -> dict[str, object]:
    """Replay ``request`` on ``connections`` connections for ``duration`` seconds."""
    tally = _Tally(args.expect.encode())
    reader, writer = await asyncio.open_connection("127.0.0.1", args.port)
    writer.write(request)  # one request first: the server's lazy set-up is not measured
    await asyncio.wait_for(_response(reader), 60)
    writer.close()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    until = wall0 + args.duration
    await asyncio.gather(
        *(_worker(args.port, request, until, tally) for _ in range(args.connections))
    )
    wall = time.perf_counter() - wall0
    done = sum(tally.statuses.values())
    return {
        "ok": True,
        "requests": done,
        "rps": done / wall,
        "client_cpu_pct": (time.process_time() - cpu0) / wall * 100,
        "statuses": {str(k): v for k, v in tally.statuses.items()},
        "p50": _percentile(tally.latencies, 0.50),
        "p99": _percentile(tally.latencies, 0.99),
        "unexpected": tally.unexpected,
    }


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/api/paas/v4/chat/completions")
    parser.add_argument("--body", required=True, help="file with the JSON request body")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--expect", default="", help="text every response body must contain")
    parser.add_argument("--token", default="bench-key", help="the bearer token sent")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args, http_request(args)))), flush=True)


if __name__ == "__main__":
    main()
