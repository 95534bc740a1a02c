"""Scenario 5: import time, ``generic-framework --help``, and spawn to first answer."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.runner import (
    CLIENT_CPU,
    PEER_VENV,
    ClientRun,
    Server,
    child_env,
    has_module,
    log,
    pinned,
    run_child,
    run_dir,
    summary,
)
from benchmarks.scenarios import Config, Row, python_for

PUBLIC_IMPORT = "from generic_framework import Persona, Settings, tool"
"""What a user's program writes: measured as it is written."""

IMPORTS: tuple[tuple[str, str], ...] = (
    ("httpx", "httpx"),
    ("benchmarks.clients.typed_httpx", "the typed floor (httpx, pydantic, five models)"),
    ("generic_framework", "generic_framework"),
    ("generic_framework.wire.client", "GLMClient (generic_framework.wire.client)"),
    ("generic_framework.core.persona", "Persona (generic_framework.core.persona)"),
    (PUBLIC_IMPORT, "the public API"),
    ("zai", "zai-sdk"),
    ("openai", "openai"),
    ("pydantic_ai", "pydantic-ai"),
    ("litellm", "LiteLLM"),
)
_PEER_MODULES = {
    "zai": "zai",
    "openai": "openai",
    "pydantic_ai": "pydantic_ai",
    "litellm": "litellm",
}
_TIMER = "import time; t = time.perf_counter(); {m}; print(time.perf_counter() - t)"


def _statement(module: str) -> str:
    """``import module``, or the statement itself when it is one (``from ... import ...``)."""
    return module if module.startswith("from ") else f"import {module}"


def _spawn_wall(cmd: list[str]) -> float | None:
    start = time.perf_counter()
    done = subprocess.run(
        pinned(cmd, CLIENT_CPU),
        capture_output=True,
        env=child_env(),
        cwd=run_dir(),
        timeout=120,
        check=False,
    )
    wall = time.perf_counter() - start
    return wall if done.returncode == 0 else None


def _import_time(python: str, module: str) -> float | None:
    done = run_child(pinned([python, "-c", _TIMER.format(m=_statement(module))], CLIENT_CPU), 120)
    try:
        return float(done.stdout.strip().splitlines()[-1]) * 1000
    except (IndexError, ValueError):
        return None


def _python_with(module: str) -> str | None:
    if has_module(sys.executable, module):
        return sys.executable
    peer = str(PEER_VENV / "bin" / "python")
    return peer if Path(peer).exists() and has_module(peer, module) else None


def import_rows(cfg: Config) -> list[Row]:
    """In-process import time of each module, in a fresh interpreter per repetition."""
    rows = []
    wanted = {_PEER_MODULES[p] for p in cfg.peers if p in _PEER_MODULES}
    for module, label in IMPORTS:
        if module in _PEER_MODULES.values() and module not in wanted:
            continue
        log(f"[5] {_statement(module)}")
        python = _python_with(module.split()[1] if module.startswith("from ") else module)
        if python is None:
            rows.append(Row("5", f"import:{module}", f"import {label}", {}, "not installed"))
            continue
        # The peers only give context here: three runs each keep LiteLLM's 3-13 s imports cheap.
        reps = min(cfg.startup_reps, 3) if module in _PEER_MODULES else cfg.startup_reps
        samples = [_import_time(python, module) for _ in range(reps)]
        note = "" if python == sys.executable else "run in the peers' environment"
        text = module if module.startswith("from ") else f"import {label}"
        rows.append(Row("5", f"import:{module}", text, {"ms": _ms(samples)}, note))
    return rows


def _ms(samples: list[float | None]) -> dict[str, float] | None:
    return summary(samples)


def cli_rows(cfg: Config) -> list[Row]:
    """Bare interpreter start, and ``generic-framework --help`` from spawn to exit."""
    log("[5] interpreter and CLI start-up")
    bare = [_spawn_wall([sys.executable, "-c", "pass"]) for _ in range(cfg.startup_reps)]
    script = Path(sys.executable).parent / "generic-framework"
    cli = [sys.executable, "-m", "generic_framework"] if not script.exists() else [str(script)]
    helps = [_spawn_wall([*cli, "--help"]) for _ in range(cfg.startup_reps)]
    return [
        Row("5", "python", "python -c pass (interpreter floor)", {"ms": _walls(bare)}),
        Row("5", "cli_help", "generic-framework --help", {"ms": _walls(helps)}),
    ]


def _walls(samples: list[float | None]) -> dict[str, float] | None:
    return summary([None if s is None else s * 1000 for s in samples])


def first_answer_rows(cfg: Config) -> list[Row]:
    """Process spawn to first answer: import, build the client, one two-round conversation.

    Also the first conversation alone, as the child times it: building the client and its first
    two-round conversation, after the imports (first connection, lazy imports, first use of
    every validator).
    """
    wanted = (
        "raw_httpx",
        "typed_httpx",
        "glmclient",
        "persona",
        *(p for p in cfg.peers if p == "zai"),
    )
    seen = {c: _FirstAnswers() for c in wanted if python_for(c)}
    with Server().running() as url:
        for rep in range(cfg.startup_reps):  # interleaved, like the other scenarios
            for client, answers in seen.items():
                log(f"[5] spawn to first answer: {client}, repetition {rep + 1}")
                answers.add(
                    ClientRun(client, "first_answer", 1, 0).once(str(python_for(client)), url)
                )
    spawned = [
        Row("5", f"first:{c}", f"spawn to first answer: {c}", {"ms": _walls(a.walls)}, a.note)
        for c, a in seen.items()
    ]
    conversations = [
        Row(
            "5",
            f"firstconv:{c}",
            f"first conversation (client built + one chat): {c}",
            {"ms": _walls(a.firsts)},
        )
        for c, a in seen.items()
    ]
    return [*spawned, *conversations]


@dataclass
class _FirstAnswers:
    """One client's spawn-to-answer and first-conversation times (seconds), and its failures."""

    walls: list[float | None] = field(default_factory=list)
    firsts: list[float | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, result: dict[str, Any]) -> None:
        """Keep one child's times, or its error (a failed run counts as a missing sample)."""
        ok = bool(result.get("ok"))
        self.walls.append(result.get("spawn_wall") if ok else None)
        self.firsts.append(result.get("first") if ok else None)
        if not ok:
            self.errors.append(str(result.get("error")))

    @property
    def note(self) -> str:
        """The first failure, if any."""
        return f"failed: {self.errors[0]}" if self.errors else ""


def startup(cfg: Config) -> list[Row]:
    """All of scenario 5."""
    return [*import_rows(cfg), *cli_rows(cfg), *first_answer_rows(cfg)]


def import_profile() -> str:
    """Where the public import's time goes: ``python -X importtime``, own time per package.

    One run, after the timed ones (the disk cache is warm). Own time attributed to top-level
    packages; the library's own modules are listed one by one.
    """
    done = run_child(
        pinned([sys.executable, "-X", "importtime", "-c", PUBLIC_IMPORT], CLIENT_CPU), 120
    )
    packages: dict[str, float] = {}
    ours: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        module, ms = name.strip(), int(own) / 1000
        top = module.split(".")[0]
        packages[top] = packages.get(top, 0.0) + ms
        if top == "generic_framework":
            ours[module] = ms
    total = sum(packages.values())
    lines = [
        f"### `{PUBLIC_IMPORT}`: {total:.0f} ms under `-X importtime` (own time)\n",
        "| package | ms | share |",
        "|---|---|---|",
    ]
    for name, ms in sorted(packages.items(), key=lambda i: -i[1])[:15]:
        lines.append(f"| {name} | {ms:.1f} | {ms / total * 100:.0f}% |")
    lines += ["", "| generic_framework module | ms |", "|---|---|"]
    lines += [f"| {n} | {ms:.1f} |" for n, ms in sorted(ours.items(), key=lambda i: -i[1])[:10]]
    return "\n".join(lines) + "\n"
