"""One client, one measurement, one fresh process: ``python -m benchmarks.run_client``.

Prints exactly one JSON line on standard output. CPU is ``time.process_time()`` of this process
around the measured part only (imports, client construction and a warm-up are excluded, except
in the ``first_answer`` mode, whose cost the parent measures from spawn to exit). Every answer is
checked against the scripted one, so a fast wrong client cannot win.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import resource
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import job
from benchmarks.clients import CLIENTS, Driver


async def _converse(driver: Driver, pool: ThreadPoolExecutor | None = None) -> str:
    if driver.sync:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, driver.converse_sync)
    return await driver.converse()


class _Hooks:
    """Start and stop a profiler around the measured part only (not imports or warm-up)."""

    start: Callable[[], object] = staticmethod(lambda: None)
    stop: Callable[[], object] = staticmethod(lambda: None)


async def sequential(driver: Driver, n: int, warmup: int) -> dict[str, Any]:
    """``n`` conversations one after another; CPU seconds per conversation."""
    for _ in range(warmup):
        job.check(await _converse(driver))
    _Hooks.start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if driver.sync:
        for _ in range(n):
            job.check(driver.converse_sync())
    else:
        for _ in range(n):
            job.check(await driver.converse())
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    _Hooks.stop()
    return {"cpu_per_conv": cpu / n, "wall_per_conv": wall / n}


async def concurrent(driver: Driver, n: int, warmup: int) -> dict[str, Any]:
    """``n`` conversations at once; wall and CPU seconds for all, peak RSS of the process."""
    pool = ThreadPoolExecutor(getattr(driver, "threads", 50)) if driver.sync else None
    for _ in range(warmup):
        job.check(await _converse(driver, pool))
    _Hooks.start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    answers = await asyncio.gather(*(_converse(driver, pool) for _ in range(n)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    _Hooks.stop()
    for answer in answers:
        job.check(answer)
    if pool is not None:
        pool.shutdown()
    return {"wall": wall, "cpu": cpu, "rss_mb": _peak_rss_mb()}


async def stream(driver: Driver, n: int, warmup: int) -> dict[str, Any]:
    """``n`` streamed conversations in sequence: first-delta delays and CPU per conversation."""
    delays: list[float] = []
    for _ in range(warmup):
        job.check((await driver.converse_stream(delays))[0])
    delays.clear()
    _Hooks.start()
    cpu0 = time.process_time()
    deltas = 0
    for _ in range(n):
        answer, deltas = await driver.converse_stream(delays)
        job.check(answer)
    cpu = time.process_time() - cpu0
    _Hooks.stop()
    return {
        "cpu_per_conv": cpu / n,
        "first_delta": statistics.median(delays) if delays else None,
        "first_delta_max": max(delays) if delays else None,
        "deltas": deltas,
    }


async def parallel(driver: Driver, n: int, warmup: int) -> dict[str, Any]:
    """``n`` conversations whose first round asks for several slow tools at once."""
    for _ in range(warmup):
        job.check(await driver.converse())
    walls, rounds = [], []
    for _ in range(n):
        wall0 = time.perf_counter()
        job.check(await driver.converse())
        walls.append(time.perf_counter() - wall0)
        rounds.append(getattr(driver, "last_rounds", [None])[0])
    return {"conversation": statistics.median(walls), "round": _median_or_none(rounds)}


async def first_answer(driver: Driver, n: int, warmup: int) -> dict[str, Any]:
    """One conversation right after start-up; the parent times the whole process.

    ``first`` is the first conversation itself (the driver built it, and :func:`run` adds the
    building): client construction, the first connection, and whatever each library does on
    first use (lazy imports, pydantic validators, the CA bundle).
    """
    started = time.perf_counter()
    job.check(await _converse(driver))
    return {"first": time.perf_counter() - started}


def _median_or_none(values: list[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


MODES = {
    "sequential": sequential,
    "concurrent": concurrent,
    "stream": stream,
    "parallel": parallel,
    "first_answer": first_answer,
}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the driver, run the mode (optionally under a profiler), close the driver."""
    spec = CLIENTS[args.client]
    options = {**spec.options, **json.loads(args.options)}
    begun = time.perf_counter()
    module = importlib.import_module(spec.module)
    imported = time.perf_counter()
    driver: Driver = await module.open_driver(args.url, options)
    opened = time.perf_counter() - imported
    try:
        if args.profile:
            return await _profiled(args, driver)
        result = await MODES[args.mode](driver, args.n, args.warmup)
    finally:
        await driver.aclose()
    if args.mode == "first_answer":
        result = {**result, "import": imported - begun, "first": result["first"] + opened}
    return result


async def _profiled(args: argparse.Namespace, driver: Driver) -> dict[str, Any]:
    if args.profile.endswith(".txt"):
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005, async_mode="enabled")
        _Hooks.start, _Hooks.stop = profiler.start, profiler.stop
        result = await MODES[args.mode](driver, args.n, args.warmup)
        _write(args.profile, profiler.output_text(unicode=False, show_all=False))
        return result
    import cProfile

    profile = cProfile.Profile(time.process_time)  # CPU, so waiting in epoll is not counted
    _Hooks.start, _Hooks.stop = profile.enable, profile.disable
    result = await MODES[args.mode](driver, args.n, args.warmup)
    profile.dump_stats(args.profile)
    return result


def _write(path: str, text: str) -> None:
    """Write the text profile (after the measured loop: the blocking write is not measured)."""
    Path(path).write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("client", choices=sorted(CLIENTS))
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--url", required=True, help="base URL (…/v4) of the benchmark server")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--options", default="{}", help="JSON options for the driver")
    parser.add_argument("--profile", default="", help="write a profile (.prof, .txt) here")
    args = parser.parse_args(argv)
    try:
        result = asyncio.run(run(args))
    except Exception as exc:  # reported to the parent as a failed run, never a silent number
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}))
        sys.exit(1)
    print(json.dumps({"ok": True, **result}))


if __name__ == "__main__":
    main()
