"""Scenario 8: the bot service's ``/v1/chat/completions`` under load, beside a floor and LiteLLM.

Three servers (``benchmarks.proxies``) in turn, each a fresh process pinned to the client CPU,
in front of the scripted upstream (100 ms per answer) on the other CPU, with the load generator
(``benchmarks.loadgen``, 200 keep-alive connections, each sending the next request as soon as
its answer is read). Per server and per kind (JSON, streamed): the server's CPU per request
(from ``/proc``, its worker threads included, over the measured window only), requests per
second, median and p99 latency, the p99 added over the floor, and the server's peak RSS. Every
answer is checked for the upstream's text.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from benchmarks.proxies import MASTER_KEY
from benchmarks.runner import (
    CLIENT_CPU,
    SERVER_CPU,
    Server,
    has_module,
    log,
    run_loadgen,
    server_process,
    summary,
)
from benchmarks.scenarios import Config, Row, python_for

SERVERS = (
    ("floor", "floor: bare Starlette route, one httpx client, pool sized for the load"),
    ("floor-default", "bare Starlette route, one httpx client, httpx's default pool"),
    ("floor-sharded", "bare Starlette route, one httpx client on the library's sharded pool"),
    ("service", "generic_framework service (persona, no tools)"),
    ("litellm", "LiteLLM proxy"),
)
QUESTION = "What's the weather in Paris?"
EXPECTED = "Answer: What's the weather in Paris?"


def _python(kind: str) -> str | None:
    """The interpreter that can run ``kind`` (LiteLLM's proxy needs its extras), or None."""
    if kind != "litellm":
        return sys.executable
    python = python_for("litellm")
    if python is None or not all(has_module(python, m) for m in ("fastapi", "websockets")):
        return None
    return python


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU of a process and all its threads, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mb(pid: int) -> float | None:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def _load(port: int, body: Path, cfg: Config, seconds: float) -> dict[str, object]:
    args = [
        f"--port={port}",
        f"--body={body}",
        "--path=/v1/chat/completions",
        f"--connections={cfg.service_clients}",
        f"--duration={seconds}",
        f"--expect={EXPECTED}",
        f"--token={MASTER_KEY}",
    ]
    return run_loadgen(args, SERVER_CPU, seconds + 120)


def _once(kind: str, python: str, upstream: str, body: Path, cfg: Config) -> dict[str, object]:
    """One fresh server process: warm it up, then measure one window of load."""
    cmd = [python, "-m", "benchmarks.proxies", kind, f"--upstream={upstream}"]
    with server_process(cmd, f"the {kind} server", cpu=CLIENT_CPU) as (proc, port):
        warm = _load(port, body, cfg, cfg.service_warmup)
        if not warm.get("ok"):
            return warm
        cpu0 = _cpu_seconds(proc.pid)
        result = _load(port, body, cfg, cfg.service_seconds)
        cpu = _cpu_seconds(proc.pid) - cpu0
        rss = _peak_rss_mb(proc.pid)
    if result.get("ok"):
        requests = int(result["requests"])  # type: ignore[call-overload]
        result["cpu_ms"] = cpu * 1000 / requests if requests else None
        result["rss_mb"] = rss
    return result


def _bad(result: dict[str, object]) -> str | None:
    if not result.get("ok"):
        return str(result.get("error"))
    statuses = dict(result.get("statuses") or {})  # type: ignore[call-overload]
    if set(statuses) != {"200"}:
        return f"statuses {statuses}"
    if result.get("unexpected"):
        return f"{result['unexpected']} answers without the upstream's text"
    return None


def service(cfg: Config) -> list[Row]:
    """Every server, JSON and streamed, ``cfg.service_reps`` fresh processes each, interleaved."""
    results = Path(cfg.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    pythons = {kind: _python(kind) for kind, _ in SERVERS if kind != "litellm" or cfg.peers}
    samples: dict[str, list[dict[str, object]]] = {}
    errors: dict[str, list[str]] = {}
    with Server(latency=cfg.service_latency).running() as upstream:
        for rep in range(cfg.service_reps):
            for stream in (False, True):
                body = _body(results, stream)
                for kind, python in pythons.items():
                    key = f"{kind}_{'stream' if stream else 'json'}"
                    if python is None:
                        continue
                    log(f"[8] {key}: repetition {rep + 1} of {cfg.service_reps}")
                    result = _once(kind, python, upstream, body, cfg)
                    problem = _bad(result)
                    if problem:
                        errors.setdefault(key, []).append(problem)
                    else:
                        samples.setdefault(key, []).append(result)
    return _rows(cfg, pythons, samples, errors)


def _body(results: Path, stream: bool) -> Path:
    """The request every connection sends, JSON or streamed, written where loadgen reads it."""
    body = results / f"service-body-{'sse' if stream else 'json'}.json"
    message = {"role": "user", "content": QUESTION}
    payload = {"model": "bench", "messages": [message], "stream": stream}
    body.write_text(json.dumps(payload), encoding="utf-8")
    return body


def _rows(
    cfg: Config,
    pythons: dict[str, str | None],
    samples: dict[str, list[dict[str, object]]],
    errors: dict[str, list[str]],
) -> list[Row]:
    rows = []
    for stream in ("json", "stream"):
        floor_p99 = summary([float(r["p99"]) for r in samples.get(f"floor_{stream}", [])])  # type: ignore[arg-type]
        for kind, label in SERVERS:
            key = f"{kind}_{stream}"
            text = f"{label}, {'streamed' if stream == 'stream' else 'JSON'}"
            if kind not in pythons:
                continue
            python = pythons[kind]
            if python is None:
                note = "skipped: LiteLLM's proxy is not installed in .venv-bench"
                rows.append(Row("8", key, text, {}, note))
                continue
            metrics = _metrics(samples.get(key, []), floor_p99)
            rows.append(Row("8", key, text, metrics, _note(cfg, python, errors.get(key, []))))
    return rows


def _metrics(
    got: list[dict[str, object]], floor_p99: dict[str, float] | None
) -> dict[str, dict[str, float] | None]:
    """One server's summaries, and its p99 above the upstream alone (``floor_p99``, seconds)."""
    metrics = {
        "cpu_ms": summary([r.get("cpu_ms") for r in got]),  # type: ignore[misc]
        "rps": summary([float(r["rps"]) for r in got]),  # type: ignore[arg-type]
        "p50_ms": summary([float(r["p50"]) * 1000 for r in got]),  # type: ignore[arg-type]
        "p99_ms": summary([float(r["p99"]) * 1000 for r in got]),  # type: ignore[arg-type]
        "rss_mb": summary([r.get("rss_mb") for r in got]),  # type: ignore[misc]
    }
    p99 = metrics["p99_ms"]
    if floor_p99 and p99:
        metrics["added_p99_ms"] = summary([p99["median"] - floor_p99["median"] * 1000])
    return metrics


def _note(cfg: Config, python: str, failed: list[str]) -> str:
    """The failed runs, if any, and whether the server ran in the peers' environment."""
    note = f"{len(failed)} of {cfg.service_reps} runs failed: {failed[0]}" if failed else ""
    if python != sys.executable:
        note = "; ".join(n for n in (note, "run in the peers' environment") if n)
    return note
