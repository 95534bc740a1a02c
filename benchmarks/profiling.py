"""Scenario 7: where a sequential conversation's CPU goes (cProfile, plus pyinstrument if present).

The profile files land in the results directory; the summary attributes each function's own time
to the package it lives in, for the Persona (or the GLMClient loop) and for raw httpx.
"""

from __future__ import annotations

import contextlib
import pstats
import sys
import sysconfig
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.runner import ClientRun, Server, has_module, log
from benchmarks.scenarios import Config, Row, postgres_url, python_for

_GROUPS = (
    ("generic_framework", "/generic_framework/"),
    ("benchmarks (job, tool)", "/benchmarks/"),
    ("pydantic", "/pydantic"),
    ("httpx", "/httpx/"),
    ("httpcore", "/httpcore/"),
    ("h11", "/h11/"),
    ("anyio", "/anyio/"),
    ("asyncio", "/asyncio/"),
    ("json", "/json/"),
    ("psycopg (PostgreSQL client)", "/psycopg"),
)


def _group(filename: str, name: str) -> str:
    for group, marker in _GROUPS:
        if marker in filename:
            return group
    if filename == "~" and "pydantic_core" in name:
        return "pydantic"
    if filename == "~" and "sqlite3" in name:
        return "sqlite3"
    if filename == "~" and any(word in name for word in ("socket", "select", "epoll")):
        return "system calls (socket, epoll)"
    if filename == "~":
        return "other built-ins"
    return "other"


def _short(filename: str) -> str:
    """A file name without the machine's own prefixes (site-packages, the stdlib, the project)."""
    paths = sysconfig.get_paths()
    for root in (paths["purelib"], paths["stdlib"], str(Path.cwd())):
        if filename.startswith(root):
            return filename[len(root) :].lstrip("/")
    return filename.rsplit("site-packages/", maxsplit=1)[-1]


def breakdown(profile: Path) -> tuple[float, dict[str, float], list[tuple[str, float, int]]]:
    """Total seconds, seconds per package, and the top functions by own time."""
    stats = pstats.Stats(str(profile))
    raw = stats.stats  # type: ignore[attr-defined]
    groups: dict[str, float] = defaultdict(float)
    functions = []
    total = 0.0
    for (filename, line, name), (_, calls, own, _cum, _) in raw.items():
        total += own
        groups[_group(filename, name)] += own
        functions.append((f"{_short(filename)}:{line}({name})", own, calls))
    functions.sort(key=lambda f: f[1], reverse=True)
    return total, dict(groups), functions[:15]


def _subjects(cfg: Config, database_url: str | None) -> list[tuple[str, str, dict[str, Any]]]:
    """What scenario 7 profiles: the library's plain job, the stored turns, raw httpx."""
    if not python_for("persona"):
        return [("glmclient", "glmclient", {}), ("raw_httpx", "raw_httpx", {})]
    subjects: list[tuple[str, str, dict[str, Any]]] = [("persona", "persona", {})]
    if not cfg.quick:
        subjects.append(("persona_conversation", "persona", {"conversation": True}))
        if database_url is not None:
            stored = {"conversation": True, "database_url": database_url}
            subjects.append(("persona_conversation_pg", "persona", stored))
    return [*subjects, ("raw_httpx", "raw_httpx", {})]


def _summary(key: str, target: Path, size: int) -> tuple[Row, list[str]]:
    total, groups, top = breakdown(target)
    per_conv = total / size * 1000
    share = {g: s / total * 100 for g, s in sorted(groups.items(), key=lambda i: -i[1])}
    text = [f"### {key}: {per_conv:.2f} ms per conversation under cProfile\n"]
    text.append("| package | share of own time |\n|---|---|")
    text.extend(f"| {g} | {p:.1f}% |" for g, p in share.items() if p >= 0.5)
    text.append("\n| function | own ms/conv | calls/conv |\n|---|---|---|")
    text.extend(
        f"| `{name}` | {own / size * 1000:.3f} | {calls / size:.1f} |" for name, own, calls in top
    )
    text.append("")
    return Row("7", key, key, {"profiled_ms": {"median": per_conv}}), text


def profile(cfg: Config, results: Path) -> tuple[list[Row], str]:
    """Profile the library's sequential job (with stored turns too) and raw httpx's; return
    rows and a text summary."""
    size = min(cfg.seq_n, 150)
    text: list[str] = []
    rows = []
    with contextlib.ExitStack() as stack:
        database_url, _ = postgres_url(stack) if not cfg.quick else (None, "")
        url = stack.enter_context(Server().running())
        for key, client, options in _subjects(cfg, database_url):
            log(f"[7] profile: {key}")
            target = results / f"profile-{key}.prof"
            run = ClientRun(client, "sequential", size, cfg.seq_warmup, options, str(target))
            python = python_for(client) or sys.executable
            result = run.once(python, url)
            if not result.get("ok"):
                rows.append(Row("7", key, key, {}, f"failed: {result.get('error')}"))
                continue
            row, lines = _summary(key, target, size)
            rows.append(row)
            text.extend(lines)
            if has_module(python, "pyinstrument") and not cfg.quick:
                tree = str(results / f"profile-{key}.txt")
                ClientRun(client, "sequential", size, cfg.seq_warmup, options, tree).once(
                    python, url
                )
    return rows, "\n".join(text)
