"""``python -m benchmarks [--quick] [--only 1,5|service] [--peers LIST] [--reps N] [--out DIR]``.

Prints the report (markdown) on standard output, progress on standard error, and writes
``results.json`` and ``report.md`` (plus profiles) into the results directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from benchmarks import profiling, startup
from benchmarks.instructions import instructions
from benchmarks.mockbench import mock_rps
from benchmarks.report import render
from benchmarks.runner import PEER_VENV, PINNING, ROOT, compile_sources, log, run_dir
from benchmarks.scenarios import (
    Config,
    Row,
    concurrency,
    parallel_tools,
    sequential_cpu,
    streaming,
)
from benchmarks.service_bench import service

_PACKAGES = (
    "httpx",
    "httpcore",
    "httpx2",
    "httpcore2",
    "h11",
    "anyio",
    "pydantic",
    "pydantic-core",
    "openai",
    "zai-sdk",
    "pydantic-ai-slim",
    "litellm",
)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _peer_versions() -> dict[str, str]:
    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        return {}
    code = (
        "import json; from importlib import metadata as m; out = {}\n"
        "for n in ('litellm', 'openai', 'httpx', 'aiohttp'):\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    try:
        return dict(json.loads(done.stdout))
    except ValueError:
        return {}


def machine() -> dict[str, object]:
    """What the numbers were measured on."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=run_dir(),
        check=False,
    ).stdout.strip()
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pinning": PINNING,
        "load_before": os.getloadavg(),
        "commit": commit,
        "patched": os.environ.get("BENCH_PYTHONPATH", ""),
        "packages": {n: v for n in _PACKAGES if (v := _version(n))},
        "peer_environment": _peer_versions(),
    }


def header(facts: dict[str, object], cfg: Config, seconds: float) -> str:
    """The report's first lines: machine, versions, sizes."""
    packages = ", ".join(f"{k} {v}" for k, v in dict(facts["packages"]).items())  # type: ignore[call-overload]
    peers = ", ".join(f"{k} {v}" for k, v in dict(facts["peer_environment"]).items())  # type: ignore[call-overload]
    return "\n".join(
        [
            "# Benchmark run" + (" (quick: sizes too small to mean anything)" if cfg.quick else ""),
            "",
            f"- machine: {facts['nproc']} CPUs, {facts['cpu']}; {facts['platform']}",
            f"- Python {facts['python']}; commit {facts['commit']}; pinned: {facts['pinning']}"
            + (f"; package from {facts['patched']}" if facts.get("patched") else ""),
            f"- load average before: {facts['load_before']}; after: {facts.get('load_after')}",
            f"- packages: {packages}",
            f"- peers' environment: {peers or 'none'}",
            f"- sizes: {cfg.reps} fresh processes per row; {cfg.seq_n} sequential conversations; "
            f"{cfg.conc_n} concurrent at {cfg.conc_latency * 1000:.0f} ms latency; "
            f"{cfg.stream_n} streamed conversations; service: {cfg.service_clients} clients at "
            f"{cfg.service_latency * 1000:.0f} ms, {cfg.service_seconds:g} s per run; "
            f"run took {seconds:.0f} s",
            "",
        ]
    )


SCENARIOS = {
    "sequential": "1",
    "concurrency": "2",
    "tools": "3",
    "streaming": "4",
    "startup": "5",
    "mock": "6",
    "profile": "7",
    "service": "8",
    "instructions": "9",
}
"""Names ``--only`` accepts beside the numbers (``--only service`` re-runs the bot service)."""


def scenarios(only: str) -> set[str]:
    """``--only``'s value as scenario numbers; an unknown name is an error."""
    chosen = set()
    for item in (s.strip() for s in only.split(",") if s.strip()):
        number = SCENARIOS.get(item, item)
        if number not in SCENARIOS.values():
            known = ", ".join([*SCENARIOS.values(), *SCENARIOS])
            raise SystemExit(f"--only: unknown scenario {item!r} (known: {known})")
        chosen.add(number)
    return chosen


def parse(argv: list[str] | None) -> tuple[Config, set[str]]:
    """Command-line options into a Config and the scenarios to run."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument(
        "--only",
        default="1,2,3,4,5,6,7,8,9",
        help="scenarios to run, by number or name, e.g. 1,5 or service",
    )
    parser.add_argument("--peers", default=None, help="peers to include, or 'none'")
    parser.add_argument("--reps", type=int, default=None, help="fresh processes per row")
    parser.add_argument(
        "--extended", action="store_true", help="peers in the concurrency scenario too (slower)"
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    cfg = Config.quick_config(args.out) if args.quick else Config(results_dir=args.out)
    if args.peers is not None:
        chosen = () if args.peers == "none" else tuple(p for p in args.peers.split(",") if p)
        cfg = dataclasses.replace(cfg, peers=chosen)
    if args.extended:
        cfg = dataclasses.replace(cfg, extended=True)
    if args.reps is not None:
        cfg = dataclasses.replace(cfg, reps=args.reps, startup_reps=max(args.reps, 1))
    return cfg, scenarios(args.only)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen scenarios, write the results, print the report. Exit 1 on a failed run."""
    cfg, only = parse(argv)
    results = Path(cfg.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    compile_sources()
    facts = machine()
    started = time.perf_counter()
    rows: list[Row] = []
    profile_text = ""
    steps = {
        "1": sequential_cpu,
        "2": concurrency,
        "3": parallel_tools,
        "4": streaming,
        "5": startup.startup,
        "6": mock_rps,
        "8": service,
        "9": instructions,
    }
    for key, step in steps.items():
        if key in only:
            begun = time.perf_counter()
            rows += step(cfg)
            log(f"[{key}] took {time.perf_counter() - begun:.0f} s")
    if "5" in only:
        profile_text += startup.import_profile()
    if "7" in only:
        begun = time.perf_counter()
        more, cpu_profiles = profiling.profile(cfg, results)
        profile_text += cpu_profiles
        rows += more
        log(f"[7] took {time.perf_counter() - begun:.0f} s")
    facts["load_after"] = os.getloadavg()
    text = render(rows, header(facts, cfg, time.perf_counter() - started), profile_text)
    (results / "report.md").write_text(text, encoding="utf-8")
    payload = {
        "machine": facts,
        "config": dataclasses.asdict(cfg),
        "rows": [dataclasses.asdict(r) for r in rows],
    }
    (results / "results.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    sys.stdout.write(text)
    failed = [r for r in rows if "failed" in r.note]
    for row in failed:
        log(f"FAILED: [{row.scenario}] {row.label}: {row.note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
