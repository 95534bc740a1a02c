"""Measure the CPU cost of GLMClient.chat() against a bare httpx post + json.loads loop.

Not a test (nothing is asserted): run it by hand and compare the numbers.

    .venv/bin/python tests/foundation/overhead.py [--calls 2000] [--rounds 5]

Both loops talk to the same ``httpx.MockTransport`` returning the same canned completion, so
the difference is what the client adds: request serialisation, the retry policy, the
concurrency slot, the timeout guard and pydantic validation. The best of several rounds of
``time.process_time`` is reported (and the median): rounds are interleaved, so noise from
other processes falls on both loops alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx

from generic_framework.config import Settings
from generic_framework.wire.client import GLMClient
from generic_framework.wire.messages import ChatCompletion, ChatRequest, SystemMessage, UserMessage

URL = "https://zai.test/api/paas/v4/chat/completions"
BODY = json.dumps(
    {
        "id": "20260520090000aa00bb11cc22dd33",
        "request_id": "20260520090000aa00bb11cc22dd33",
        "created": 1780000000,
        "model": "glm-4.7",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": "The late ferry leaves at 23:40 on Fridays. " * 6,
                    "reasoning_content": "The timetable page lists a Friday sailing. " * 10,
                },
            }
        ],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 80,
            "total_tokens": 200,
            "prompt_tokens_details": {"cached_tokens": 40},
            "completion_tokens_details": {"reasoning_tokens": 50},
        },
    }
).encode()
MESSAGES = [
    {"role": "system", "content": "You are Tomas, a travel desk clerk. Be brief."},
    {"role": "user", "content": "When does the late ferry leave on Fridays?"},
]


def handler(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=BODY, headers={"content-type": "application/json"})


async def raw_loop(calls: int) -> None:
    headers = {"Authorization": "Bearer k", "Content-Type": "application/json"}
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        for _ in range(calls):
            body = json.dumps({"model": "glm-4.7", "messages": MESSAGES}).encode()
            response = await http.post(URL, content=body, headers=headers)
            json.loads(response.content)


async def client_loop(calls: int) -> None:
    settings = Settings.defaults(api_key="k", base_url=URL.removesuffix("/chat/completions"))
    request = ChatRequest(
        model="glm-4.7",
        messages=[SystemMessage(**MESSAGES[0]), UserMessage(**MESSAGES[1])],
    )
    async with GLMClient(settings, transport=httpx.MockTransport(handler)) as client:
        for _ in range(calls):
            await client.chat(request)


async def parse_only(calls: int) -> None:
    for _ in range(calls):
        ChatCompletion.model_validate_json(BODY)


async def json_only(calls: int) -> None:
    for _ in range(calls):
        json.loads(BODY)


def cpu_per_call(loop: Callable[[int], Awaitable[None]], calls: int) -> float:
    started = time.process_time()
    asyncio.run(loop(calls))
    return (time.process_time() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    loops = {"raw": raw_loop, "client": client_loop, "validate": parse_only, "loads": json_only}
    samples: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(args.rounds):  # interleaved, so load from other processes hits all alike
        for name, loop in loops.items():
            samples[name].append(cpu_per_call(loop, args.calls))
    raw, ours = min(samples["raw"]), min(samples["client"])
    raw_mid, ours_mid = statistics.median(samples["raw"]), statistics.median(samples["client"])
    print(f"calls per round: {args.calls}, rounds: {args.rounds} (best round; median after /)")
    print(f"raw httpx post + json.loads : {raw * 1e6:7.1f} / {raw_mid * 1e6:.1f} us/call")
    print(f"GLMClient.chat              : {ours * 1e6:7.1f} / {ours_mid * 1e6:.1f} us/call")
    print(f"ratio                       : {ours / raw:7.2f} / {ours_mid / raw_mid:.2f}x")
    print(f"  json.loads alone          : {min(samples['loads']) * 1e6:7.1f} us/call")
    print(f"  ChatCompletion validation : {min(samples['validate']) * 1e6:7.1f} us/call")


if __name__ == "__main__":
    main()
