"""The seven scenarios. Each returns :class:`Row` values; :mod:`benchmarks.report` renders them."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.runner import (
    ClientRun,
    Server,
    client_spec,
    has_module,
    interpreter_for,
    log,
    summary,
)


@dataclass(frozen=True)
class Config:
    """Sizes and selection for one harness run."""

    quick: bool = False
    reps: int = 5
    seq_n: int = 300
    seq_warmup: int = 5
    conc_n: int = 500
    conc_latency: float = 0.1
    stream_n: int = 30
    stream_chunks: int = 201
    parallel_n: int = 5
    startup_reps: int = 5
    peers: tuple[str, ...] = ("openai", "zai", "pydantic_ai", "litellm")
    extended: bool = False
    """Also run the peers (and raw httpx2) in the concurrency scenario: about 4 more minutes."""
    results_dir: str = "benchmarks/results"

    @classmethod
    def quick_config(cls, results_dir: str) -> Config:
        """Tiny sizes: correctness only, a few seconds, no peers."""
        return cls(
            quick=True,
            reps=1,
            seq_n=5,
            seq_warmup=1,
            conc_n=10,
            conc_latency=0.01,
            stream_n=2,
            stream_chunks=5,
            parallel_n=1,
            startup_reps=1,
            peers=(),
            results_dir=results_dir,
        )


@dataclass
class Row:
    """One line of a result table: a label and named metrics (each a median/min/max summary)."""

    scenario: str
    key: str
    label: str
    metrics: dict[str, dict[str, float] | None] = field(default_factory=dict)
    note: str = ""

    @property
    def skipped(self) -> bool:
        """True when nothing was measured (a missing peer, a failed run)."""
        return not any(self.metrics.values())


@functools.cache
def python_for(client: str) -> str | None:
    """The interpreter for ``client``, or None when its library is not installed."""
    return interpreter_for(client_spec(client))


def missing_note(client: str) -> str:
    """Why a row is empty."""
    spec = client_spec(client)
    return f"skipped: `{spec.needs}` is not installed"


def repeat(
    cfg: Config,
    run: ClientRun,
    url: str,
    metrics: dict[str, Callable[[dict[str, Any]], float | None]],
) -> tuple[dict[str, dict[str, float] | None], str]:
    """Run ``run`` ``cfg.reps`` times in fresh processes; summarise each metric."""
    python = python_for(run.client)
    if python is None:
        return {}, missing_note(run.client)
    samples: dict[str, list[float | None]] = {name: [] for name in metrics}
    errors = []
    for _ in range(cfg.reps):
        result = run.once(python, url)
        if not result.get("ok"):
            errors.append(str(result.get("error")))
            continue
        for name, pick in metrics.items():
            samples[name].append(pick(result))
    note = f"{len(errors)} of {cfg.reps} runs failed: {errors[0]}" if errors else ""
    if python != sys.executable:
        note = (note + "; " if note else "") + "run in the peers' environment"
    return {name: summary(values) for name, values in samples.items()}, note


def ms(key: str) -> Callable[[dict[str, Any]], float | None]:
    """Pick ``key`` (seconds) from a result, in milliseconds."""
    return lambda r: None if r.get(key) is None else float(r[key]) * 1000


def raw(key: str) -> Callable[[dict[str, Any]], float | None]:
    """Pick ``key`` from a result as it is."""
    return lambda r: None if r.get(key) is None else float(r[key])


# --------------------------------------------------------------------------- 1. sequential CPU

SEQUENTIAL = ("raw_httpx", "persona", "glmclient")


def sequential_cpu(cfg: Config) -> list[Row]:
    """Client CPU per two-round conversation, ``seq_n`` in sequence, zero latency."""
    rows = []
    with Server().running() as url:
        for client in (*SEQUENTIAL, *cfg.peers):
            log(f"[1] sequential CPU: {client}")
            run = ClientRun(client, "sequential", cfg.seq_n, cfg.seq_warmup)
            metrics, note = repeat(
                cfg, run, url, {"cpu_ms": ms("cpu_per_conv"), "wall_ms": ms("wall_per_conv")}
            )
            rows.append(Row("1", client, client_spec(client).label, metrics, note))
    return rows


# --------------------------------------------------------------------------- 2. concurrency

CONCURRENCY: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("raw_httpx", "raw_httpx", "raw httpx, default pool (100, 20 kept alive)", {}),
    ("raw_httpx_1000", "raw_httpx", "raw httpx, pool 1000", {"max_connections": 1000}),
    ("glmclient", "glmclient", "GLMClient, settings as shipped", {}),
    ("persona", "persona", "Persona, settings as shipped", {}),
    (
        "glmclient_sharded",
        "glmclient",
        "GLMClient, 8 pools x 16 connections, 128 in flight",
        {"shards": 8, "max_connections": 128, "llm_max_concurrency": 128},
    ),
    (
        "glmclient_httpx2",
        "glmclient",
        "GLMClient on httpx2, 100 connections, 100 in flight",
        {"lib": "httpx2", "max_connections": 100, "llm_max_concurrency": 100},
    ),
)
EXTENDED_CONCURRENCY: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("raw_httpx2", "raw_httpx", "raw httpx2, default pool (100, 20 kept alive)", {"lib": "httpx2"}),
)


def concurrency(cfg: Config) -> list[Row]:
    """``conc_n`` conversations at once, ``conc_latency`` seconds per server answer."""
    rows = []
    extra: tuple[tuple[str, str, str, dict[str, Any]], ...] = ()
    if cfg.extended:
        peers = tuple((p, p, client_spec(p).label, {}) for p in cfg.peers)
        extra = (*EXTENDED_CONCURRENCY, *peers)
    with Server(latency=cfg.conc_latency).running() as url:
        for key, client, label, options in (*CONCURRENCY, *extra):
            log(f"[2] concurrency: {key}")
            if options.get("lib") == "httpx2" and not has_module(sys.executable, "httpx2"):
                rows.append(Row("2", key, label, {}, "skipped: httpx2 is not installed"))
                continue
            run = ClientRun(client, "concurrent", cfg.conc_n, 1, options)
            metrics, note = repeat(
                cfg, run, url, {"wall_s": raw("wall"), "cpu_s": raw("cpu"), "rss_mb": raw("rss_mb")}
            )
            rows.append(Row("2", key, label, metrics, note))
    return rows


# --------------------------------------------------------------------------- 3. parallel tools


def parallel_tools(cfg: Config) -> list[Row]:
    """One round with four calls of a tool that sleeps 200 ms, through the Persona."""
    log("[3] parallel tools: persona")
    with Server(calls=4).running() as url:
        run = ClientRun("persona", "parallel", cfg.parallel_n, 1, {"slow_tool": True})
        metrics, note = repeat(
            cfg, run, url, {"conversation_ms": ms("conversation"), "round_ms": ms("round")}
        )
    label = "Persona, 4 calls x 200 ms"
    return [Row("3", "persona", label, metrics, note)]


# --------------------------------------------------------------------------- 4. streaming

STREAMING = ("raw_httpx", "glmclient", "persona")


def streaming(cfg: Config) -> list[Row]:
    """First text delta after the server's first content chunk; CPU per extra chunk."""
    one: dict[str, tuple[dict[str, Any], str]] = {}
    with Server(chunks=1).running() as url:
        for client in STREAMING:
            log(f"[4] streaming, 1 chunk: {client}")
            run = ClientRun(client, "stream", cfg.stream_n, 3)
            one[client] = repeat(
                cfg, run, url, {"first_ms": ms("first_delta"), "cpu_ms": ms("cpu_per_conv")}
            )
    rows = []
    extra = cfg.stream_chunks - 1
    with Server(chunks=cfg.stream_chunks).running() as url:
        for client in STREAMING:
            log(f"[4] streaming, {cfg.stream_chunks} chunks: {client}")
            run = ClientRun(client, "stream", cfg.stream_n, 3)
            many, note = repeat(cfg, run, url, {"cpu_ms": ms("cpu_per_conv")})
            first, note1 = one[client]
            metrics = {"first_ms": first.get("first_ms")}
            base, more = first.get("cpu_ms"), many.get("cpu_ms")
            per_chunk = None
            if base and more:
                per_chunk = summary([(more["median"] - base["median"]) * 1000 / extra])
            metrics["chunk_us"] = per_chunk
            metrics["cpu_ms"] = base
            rows.append(Row("4", client, client_spec(client).label, metrics, note1 or note))
    return rows
