"""Scenario 9: instructions (callgrind), the rows whose CPU time is the machine's more than ours.

CPU time per chat depends on the machine's load: thread wake-ups and cold caches between turns
weigh more when the floor is fast, and a busy machine moves single medians by 20-40 %. The
instructions a whole process executes do not depend on load. Per chat: two processes of one
client, ``instr_n`` and ``instr_base`` sequential chats, and the difference divided by the
difference of chats (start-up, imports and warm-up cancel out). Spawn to first answer: the whole
process. Without valgrind the rows say so and are not measured.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.runner import CLIENT_CPU, Server, log, pinned, run_child
from benchmarks.scenarios import Config, Row, python_for

PER_CHAT: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("raw_httpx", "raw_httpx", "raw httpx (the floor)", {}),
    ("typed_httpx", "typed_httpx", "raw httpx + pydantic models (the typed floor)", {}),
    ("persona", "persona", "Persona, sync tool", {}),
    (
        "persona_conversation",
        "persona",
        "Persona with a conversation_id (one turn of history, stored in SQLite)",
        {"conversation": True},
    ),
)
FIRST_ANSWER = ("raw_httpx", "typed_httpx", "glmclient", "persona")
_TOTAL = re.compile(r"^(?:summary|totals): (\d+)", re.MULTILINE)


def instructions(cfg: Config) -> list[Row]:
    """Millions of instructions per chat and to the first answer, one process each."""
    valgrind = shutil.which("valgrind")
    rows = [Row("9", f"chat:{key}", label) for key, _, label, _ in PER_CHAT] + [
        Row("9", f"first:{c}", f"spawn to first answer: {c}") for c in FIRST_ANSWER
    ]
    if valgrind is None:
        for row in rows:
            row.note = "not measured: valgrind is not installed"
        return rows
    found = {row.key: row for row in rows}
    with Server().running() as url, tempfile.TemporaryDirectory(prefix="bench-cg-") as tmp:
        for key, client, _, options in PER_CHAT:
            counts = [
                _count(valgrind, Path(tmp), client, "sequential", n, options, url)
                for n in (cfg.instr_n, cfg.instr_base)
            ]
            _keep(found[f"chat:{key}"], counts, cfg.instr_n - cfg.instr_base)
        for client in FIRST_ANSWER:
            total = _count(valgrind, Path(tmp), client, "first_answer", 1, {}, url)
            _keep(found[f"first:{client}"], [total], 1)
    return rows


def _keep(row: Row, counts: list[int | str], chats: int) -> None:
    """Millions of instructions per chat (the first count less the second, if two), or why not."""
    failed = [c for c in counts if isinstance(c, str)]
    if failed:
        row.note = f"failed: {failed[0]}"
        return
    numbers = [int(c) for c in counts]
    total = numbers[0] - (numbers[1] if len(numbers) > 1 else 0)
    row.metrics = {"minstr": {"median": total / chats / 1e6, "n": 1}}


def _count(
    valgrind: str, tmp: Path, client: str, mode: str, n: int, options: dict[str, Any], url: str
) -> int | str:
    """The instructions of one fresh process of ``client`` (all its threads), or why not."""
    python = python_for(client)
    if python is None:
        return f"{client} is not installed"
    log(f"[9] {client} {mode} n={n} {options or ''} under callgrind")
    out = tmp / f"{client}-{mode}-{n}-{len(options)}.out"
    warmup = 0 if mode == "first_answer" else 5
    cmd = [
        valgrind,
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        python,
        "-m",
        "benchmarks.run_client",
        client,
        mode,
        f"--url={url}",
        f"--n={n}",
        f"--warmup={warmup}",
        f"--options={json.dumps(options)}",
    ]
    try:
        done = run_child(pinned(cmd, CLIENT_CPU), 1800)
    except subprocess.TimeoutExpired:
        return "timed out after 1800 s"
    if done.returncode != 0 or not out.exists():
        return f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
    total = _TOTAL.search(out.read_text(encoding="utf-8", errors="replace"))
    return int(total.group(1)) if total else "no total in the callgrind output"
