"""``python -m benchmarks.store_alone [--turns N] [--rounds R]``: a stored turn's client CPU
without the model, the library's PostgreSQL store against the stored floor's statements.

Scenario 1's PostgreSQL row times whole chats, so its ratio carries the machine's cost of every
round trip (the stored floor alone measures 1.15-1.48x raw httpx from run to run on one quiet
machine). This loop keeps only the store, in one process pinned to the client CPU against a
throwaway server pinned to the server CPU (``benchmarks.postgres``), rounds alternating:

- **the floor**: the stored floor's two statements (``benchmarks.clients.stored_httpx``): the
  lock's try with the last turn's read, then the turn written with the lock's release; plain
  dicts, ``json.dumps``;
- **the library**: :class:`~generic_framework.store.postgres.PostgresStore` as
  ``Persona._run_turn`` uses it: the conversation held with one turn of history read in the same
  round trip, the history loaded (validated into the wire models), the four-message turn stored
  with its record (one statement that also releases the lock). Its time is also split into
  those steps.

Each figure is the median of the rounds' CPU per turn (``time.process_time``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks import job, postgres
from benchmarks.clients.stored_httpx import FloorStatements, connect
from benchmarks.runner import CLIENT_CPU, PINNING
from generic_framework.store.base import TurnRecord
from generic_framework.store.postgres import PostgresStore
from generic_framework.wire.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)

STEPS = ("hold", "load", "store", "release")
"""The library's turn, step by step: the lock taken with the history read, the history
validated, the turn written with the lock's release, the hold's exit."""

_CLOCK = time.process_time


def turn_messages() -> list[Message]:
    """One turn as the benchmark's chats store it: the question, the tool call, its result and
    the answer."""
    answer = job.get_weather("Paris")
    call = ToolCall(
        id="call_0", function=FunctionCall(name="get_weather", arguments='{"city": "Paris"}')
    )
    return [
        UserMessage(content=job.QUESTION),
        AssistantMessage(tool_calls=[call]),
        ToolMessage(content=answer, tool_call_id="call_0"),
        AssistantMessage(content=f"Answer: {answer}"),
    ]


def turn_record() -> TurnRecord:
    """The record a two-round turn is stored with."""
    return TurnRecord(
        input=job.QUESTION,
        model=job.MODEL,
        stop_reason="completed",
        prompt_tokens=120,
        completion_tokens=24,
        rounds=2,
        started_at="2026-01-02T03:04:05.678+00:00",
        duration_ms=2.5,
        round_ms=(1.2, 1.3),
    )


async def _timed(n: int, warmup: int, turn: Callable[[], Awaitable[None]]) -> float:
    for _ in range(warmup):
        await turn()
    start = _CLOCK()
    for _ in range(n):
        await turn()
    return (_CLOCK() - start) / n


async def floor_round(url: str, conversation: str, n: int, warmup: int) -> float:
    """CPU seconds per turn of the floor's statements."""
    conn = await connect(url)
    statements = FloorStatements(conn, conversation)
    new = [m.model_dump(mode="json", exclude_none=True) for m in turn_messages()]

    async def turn() -> None:
        number, history = await statements.read()
        if number and len(history) != len(new):
            raise RuntimeError(f"the floor read {len(history)} messages back")
        await statements.write(number + 1, new)

    try:
        return await _timed(n, warmup, turn)
    finally:
        await conn.close()


async def library_round(
    url: str, conversation: str, n: int, warmup: int
) -> tuple[float, dict[str, float]]:
    """CPU seconds per turn of the library's store, and of each of its :data:`STEPS`."""
    store = PostgresStore(url, create=False)
    new, record = turn_messages(), turn_record()
    steps = dict.fromkeys(STEPS, 0.0)

    async def turn() -> None:
        t0 = _CLOCK()
        async with store.lock(conversation, history=1) as held:
            t1 = _CLOCK()
            history = await held.load(1)
            t2 = _CLOCK()
            if history and len(history) != len(new):
                raise RuntimeError(f"the store read {len(history)} messages back")
            await held.append_turn("bench", new, record)
            t3 = _CLOCK()
        t4 = _CLOCK()
        for step, spent in zip(STEPS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            steps[step] += spent

    try:
        await _timed(warmup, 0, turn)
        steps.update(dict.fromkeys(STEPS, 0.0))  # the warm-up's steps dropped
        per_turn = await _timed(n, 0, turn)
    finally:
        await store.aclose()
    return per_turn, {step: spent / n for step, spent in steps.items()}


def measure(url: str, *, turns: int, rounds: int, warmup: int = 30) -> dict[str, Any]:
    """``rounds`` alternating rounds of ``turns`` turns each (after ``warmup``): the medians, in
    microseconds per turn, and every round's figure."""
    floor: list[float] = []
    library: list[float] = []
    steps: dict[str, list[float]] = {step: [] for step in STEPS}
    for number in range(rounds):
        conversation = f"alone-{os.getpid()}-{number}"
        floor.append(asyncio.run(floor_round(url, conversation, turns, warmup)))
        per_turn, split = asyncio.run(library_round(url, conversation, turns, warmup))
        library.append(per_turn)
        for step, spent in split.items():
            steps[step].append(spent)

    def us(values: list[float]) -> float:
        return round(statistics.median(values) * 1e6, 1)

    return {
        "turns": turns,
        "rounds": rounds,
        "floor_us": us(floor),
        "library_us": us(library),
        "ratio": round(statistics.median(library) / statistics.median(floor), 3),
        "steps_us": {step: us(values) for step, values in steps.items()},
        "floor_rounds_us": [round(v * 1e6, 1) for v in floor],
        "library_rounds_us": [round(v * 1e6, 1) for v in library],
    }


def render(result: dict[str, Any]) -> str:
    """The figures as a markdown table."""
    steps = ", ".join(f"{step} {us:g}" for step, us in result["steps_us"].items())
    lines = [
        f"Store alone: {result['rounds']} alternating rounds of {result['turns']} turns, "
        "client CPU per turn (median of the rounds)",
        "",
        "| loop | µs per turn | rounds |",
        "|---|---|---|",
        "| the stored floor's two statements | "
        f"{result['floor_us']:g} | {', '.join(f'{v:g}' for v in result['floor_rounds_us'])} |",
        f"| the library's store ({steps}) | {result['library_us']:g} | "
        f"{', '.join(f'{v:g}' for v in result['library_rounds_us'])} |",
        "",
        f"The library's store: {result['ratio']:.2f}x the floor's statements.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store_alone")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    why_not = postgres.unavailable()
    if why_not is not None:
        print(f"not measured: {why_not}", file=sys.stderr)
        return 2
    with postgres.throwaway() as url:
        if PINNING and CLIENT_CPU is not None:
            os.sched_setaffinity(0, {CLIENT_CPU})  # the server runs on the server CPU
        print(render(measure(url, turns=args.turns, rounds=args.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
