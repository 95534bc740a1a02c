"""Scenarios 1-4. Each returns :class:`Row` values; :mod:`benchmarks.report` renders them.

Scenario 5 is in :mod:`benchmarks.startup`, 6 in :mod:`benchmarks.mockbench`, 7 in
:mod:`benchmarks.profiling`, 8, the bot service, in :mod:`benchmarks.service_bench` and 9,
instructions, in :mod:`benchmarks.instructions`.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks import postgres
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
    instr_n: int = 250
    instr_base: int = 50
    service_clients: int = 200
    service_latency: float = 0.1
    service_seconds: float = 5.0
    service_warmup: float = 1.5
    service_reps: int = 3
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
            instr_n=4,
            instr_base=2,
            service_clients=10,
            service_latency=0.01,
            service_seconds=0.5,
            service_warmup=0.3,
            service_reps=1,
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


Metrics = dict[str, Callable[[dict[str, Any]], float | None]]


@dataclass
class _Series:
    """The repetitions of one row while they are collected."""

    row: Row
    run: ClientRun
    python: str | None
    samples: dict[str, list[float | None]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def repeat(self, rep: int, reps: int, url: str, metrics: Metrics) -> None:
        """Run repetition ``rep`` in a fresh process; keep its metrics, or why it failed."""
        if self.python is None:
            return
        log(f"[{self.row.scenario}] {self.row.key}: repetition {rep + 1} of {reps}")
        result = self.run.once(self.python, url)
        if not result.get("ok"):
            self.errors.append(str(result.get("error")))
            return
        for name, pick in metrics.items():
            self.samples.setdefault(name, []).append(pick(result))

    def finish(self, reps: int) -> Row:
        """The row with its summaries and notes (the missing client's note when it did not run)."""
        if self.python is None:
            self.row.note = missing_note(self.run.client)
            return self.row
        self.row.metrics = {name: summary(values) for name, values in self.samples.items()}
        notes = []
        if self.errors:
            notes.append(f"{len(self.errors)} of {reps} runs failed: {self.errors[0]}")
        if self.python != sys.executable:
            notes.append("run in the peers' environment")
        self.row.note = "; ".join(notes)
        return self.row


def interleaved(
    cfg: Config, rows: list[tuple[Row, ClientRun]], url: str, metrics: Metrics
) -> list[Row]:
    """Run every row ``cfg.reps`` times, one repetition of each row in turn.

    Interleaving spreads slow drifts of the machine's load over all rows alike, so the ratios
    between rows (the targets) suffer less from them than the absolute numbers.
    """
    series = [
        _Series(row, run, python_for(run.client), {name: [] for name in metrics})
        for row, run in rows
    ]
    for rep in range(cfg.reps):
        for item in series:
            item.repeat(rep, cfg.reps, url, metrics)
    return [item.finish(cfg.reps) for item in series]


def ms(key: str) -> Callable[[dict[str, Any]], float | None]:
    """Pick ``key`` (seconds) from a result, in milliseconds."""
    return lambda r: None if r.get(key) is None else float(r[key]) * 1000


def raw(key: str) -> Callable[[dict[str, Any]], float | None]:
    """Pick ``key`` from a result as it is."""
    return lambda r: None if r.get(key) is None else float(r[key])


# --------------------------------------------------------------------------- 1. sequential CPU

SEQUENTIAL: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("raw_httpx", "raw_httpx", "raw httpx, one pooled AsyncClient (the floor)", {}),
    ("typed_httpx", "typed_httpx", "raw httpx + pydantic models (the typed floor)", {}),
    ("persona", "persona", "Persona, sync tool (runs in a worker thread)", {}),
    (
        "persona_conversation",
        "persona",
        "Persona, sync tool, with a conversation_id (one turn of history, stored in SQLite)",
        {"conversation": True},
    ),
    (
        "stored_httpx",
        "stored_httpx",
        "raw httpx + each turn in PostgreSQL by hand, two round trips (the stored floor)",
        {"postgres": True},
    ),
    (
        "persona_conversation_pg",
        "persona",
        "Persona, sync tool, with a conversation_id (one turn of history, stored in PostgreSQL)",
        {"conversation": True, "postgres": True},
    ),
    ("glmclient", "glmclient", "GLMClient with a hand loop", {}),
)


def sequential_cpu(cfg: Config) -> list[Row]:
    """Client CPU per two-round conversation, ``seq_n`` in sequence, zero latency.

    The PostgreSQL row runs against a throwaway server started here (``benchmarks.postgres``);
    without the server binaries it says "not measured" and why.
    """
    with contextlib.ExitStack() as stack:
        database_url, why_not = postgres_url(stack)
        runs, skipped = [], []
        for key, client, label, declared in (
            *SEQUENTIAL,
            *(EXTENDED_SEQUENTIAL if cfg.extended else ()),
            *((p, p, client_spec(p).label, {}) for p in cfg.peers),
        ):
            options = dict(declared)
            if options.pop("postgres", False):
                if database_url is None:
                    skipped.append(Row("1", key, label, {}, f"not measured: {why_not}"))
                    continue
                options["database_url"] = database_url
            row = Row("1", key, label)
            runs.append((row, ClientRun(client, "sequential", cfg.seq_n, cfg.seq_warmup, options)))
        metrics: Metrics = {"cpu_ms": ms("cpu_per_conv"), "wall_ms": ms("wall_per_conv")}
        with Server().running() as url:
            return interleaved(cfg, runs, url, metrics) + skipped


def postgres_url(stack: contextlib.ExitStack) -> tuple[str | None, str]:
    """A throwaway PostgreSQL server's URL (stopped when ``stack`` closes), or None and why."""
    why_not = postgres.unavailable()
    if why_not is not None:
        return None, why_not
    try:
        return stack.enter_context(postgres.throwaway()), ""
    except RuntimeError as exc:
        log(f"[1] PostgreSQL did not start: {exc}")
        return None, str(exc)


# --------------------------------------------------------------------------- 2. concurrency

CONCURRENCY: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("raw_httpx", "raw_httpx", "raw httpx, default pool (100, 20 kept alive)", {}),
    ("raw_httpx_1000", "raw_httpx", "raw httpx, pool 1000", {"max_connections": 1000}),
    (
        "typed_httpx",
        "typed_httpx",
        "raw httpx + pydantic models, default pool (the typed floor)",
        {},
    ),
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
EXTENDED_SEQUENTIAL: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("persona_inline", "persona", "Persona, tool declared inline=True", {"inline_tool": True}),
)
EXTENDED_CONCURRENCY: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("raw_httpx2", "raw_httpx", "raw httpx2, default pool (100, 20 kept alive)", {"lib": "httpx2"}),
)


def concurrency(cfg: Config) -> list[Row]:
    """``conc_n`` conversations at once, ``conc_latency`` seconds per server answer."""
    extra: tuple[tuple[str, str, str, dict[str, Any]], ...] = ()
    if cfg.extended:
        peers: tuple[tuple[str, str, str, dict[str, Any]], ...] = tuple(
            (p, p, client_spec(p).label, {}) for p in cfg.peers
        )
        extra = (*EXTENDED_CONCURRENCY, *peers)
    rows, runs = [], []
    for key, client, label, options in (*CONCURRENCY, *extra):
        if options.get("lib") == "httpx2" and not has_module(sys.executable, "httpx2"):
            rows.append(Row("2", key, label, {}, "skipped: httpx2 is not installed"))
            continue
        runs.append((Row("2", key, label), ClientRun(client, "concurrent", cfg.conc_n, 1, options)))
    metrics: Metrics = {"wall_s": raw("wall"), "cpu_s": raw("cpu"), "rss_mb": raw("rss_mb")}
    with Server(latency=cfg.conc_latency).running() as url:
        return interleaved(cfg, runs, url, metrics) + rows


# --------------------------------------------------------------------------- 3. parallel tools


def parallel_tools(cfg: Config) -> list[Row]:
    """One round with four calls of a tool that sleeps 200 ms, through the Persona."""
    row = Row("3", "persona", "Persona, 4 calls x 200 ms")
    run = ClientRun("persona", "parallel", cfg.parallel_n, 1, {"slow_tool": True})
    metrics: Metrics = {"conversation_ms": ms("conversation"), "round_ms": ms("round")}
    with Server(calls=4).running() as url:
        return interleaved(cfg, [(row, run)], url, metrics)


# --------------------------------------------------------------------------- 4. streaming

STREAMING = ("raw_httpx", "glmclient", "persona")


def streaming(cfg: Config) -> list[Row]:
    """First text delta after the server's first content chunk; CPU per extra chunk."""
    metrics: Metrics = {"first_ms": ms("first_delta"), "cpu_ms": ms("cpu_per_conv")}
    with Server(chunks=1).running() as url:
        runs = [
            (Row("4", c, client_spec(c).label), ClientRun(c, "stream", cfg.stream_n, 3))
            for c in STREAMING
        ]
        one = interleaved(cfg, runs, url, metrics)
    with Server(chunks=cfg.stream_chunks).running() as url:
        runs = [
            (Row("4", c, client_spec(c).label), ClientRun(c, "stream", cfg.stream_n, 3))
            for c in STREAMING
        ]
        many = interleaved(cfg, runs, url, {"cpu_ms": ms("cpu_per_conv")})
    extra = cfg.stream_chunks - 1
    for first, more in zip(one, many, strict=True):
        base, bigger = first.metrics.get("cpu_ms"), more.metrics.get("cpu_ms")
        if base and bigger:
            first.metrics["chunk_us"] = summary(
                [(bigger["median"] - base["median"]) * 1000 / extra]
            )
        first.note = first.note or more.note
    return one
