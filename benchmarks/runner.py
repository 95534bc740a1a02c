"""Process plumbing: the scripted server, fresh client processes, CPU pinning, statistics."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.clients import CLIENTS, ClientSpec

ROOT = Path(__file__).resolve().parent.parent
PEER_VENV = ROOT / ".venv-bench"
"""A second environment for peers whose pins clash with the project's (LiteLLM pins openai<3)."""


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return []


CPUS = _cpus()
PINNING = len(CPUS) >= 2 and shutil.which("taskset") is not None
CLIENT_CPU = CPUS[0] if CPUS else None
SERVER_CPU = CPUS[-1] if CPUS else None


def pinned(cmd: Sequence[str], cpu: int | None) -> list[str]:
    """``cmd`` under ``taskset -c cpu`` when pinning is possible."""
    if PINNING and cpu is not None:
        return ["taskset", "-c", str(cpu), *cmd]
    return list(cmd)


def run_dir() -> Path:
    """Where children run: not the project root, so ``PYTHONPATH`` decides what is imported."""
    path = ROOT / "benchmarks" / "results"
    path.mkdir(parents=True, exist_ok=True)
    return path


def child_env() -> dict[str, str]:
    """The environment of every child: the project importable, no stray configuration.

    ``BENCH_PYTHONPATH`` (optional) goes first, to measure a patched copy of the package.
    """
    env = dict(os.environ)
    extra = [p for p in os.environ.get("BENCH_PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([*extra, str(ROOT)])
    for name in ("OPENAI_API_KEY", "ZAI_API_KEY", "OPENAI_BASE_URL", "ZAI_BASE_URL"):
        env.pop(name, None)
    # Children import the package as an installed one is imported: from its bytecode cache,
    # which :func:`compile_sources` fills once per run. (Any value of this variable, "0" too,
    # stops Python from writing the cache; with none written, every fresh process compiled
    # the package's sources again, about 35 ms of each start-up row.)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_sources() -> None:
    """Write the bytecode cache of the package and the harness before anything is timed."""
    import compileall

    extra = [p for p in os.environ.get("BENCH_PYTHONPATH", "").split(os.pathsep) if p]
    for path in (*extra, str(ROOT / "generic_framework"), str(ROOT / "benchmarks")):
        compileall.compile_dir(path, quiet=1)


def has_module(python: str, module: str) -> bool:
    """True when ``module`` can be imported by the interpreter ``python``."""
    if python == sys.executable:
        try:
            return importlib.util.find_spec(module) is not None
        except ImportError:
            return False
    probe = f"import importlib.util,sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        done = subprocess.run([python, "-c", probe], env=child_env(), timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def interpreter_for(spec: ClientSpec) -> str | None:
    """The Python that can run ``spec`` (this one, or the peers' environment), or None."""
    if has_module(sys.executable, spec.needs):
        return sys.executable
    override = os.environ.get(f"BENCH_PYTHON_{spec.name.upper()}")
    candidates = [override] if override else []
    candidates.append(str(PEER_VENV / "bin" / "python"))
    for python in candidates:
        if python and Path(python).exists() and has_module(python, spec.needs):
            return python
    return None


def run_child(cmd: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in the run directory with the children's environment; its output as text."""
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=run_dir(),
        timeout=timeout,
        check=False,
    )


def run_loadgen(args: Sequence[str], cpu: int | None, timeout: float) -> dict[str, object]:
    """Run ``benchmarks.loadgen`` with ``args`` on ``cpu``: its JSON summary, or ``ok: False``."""
    done = run_child(pinned([sys.executable, "-m", "benchmarks.loadgen", *args], cpu), timeout)
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (IndexError, ValueError):
        return {"ok": False, "error": (done.stderr or done.stdout)[-300:]}


@dataclass
class Server:
    """The scripted server in its own process; a context manager yielding its base URL."""

    latency: float = 0.0
    calls: int = 1
    chunks: int = 1
    stats: dict[str, Any] = field(default_factory=dict)

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.server",
            f"--latency={self.latency}",
            f"--calls={self.calls}",
            f"--chunks={self.chunks}",
        ]
        with server_process(cmd, "the benchmark server") as (proc, port):
            try:
                yield f"http://127.0.0.1:{port}/api/paas/v4"
            finally:
                # A server that does not stop in time is killed by server_process.
                with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
                    out, _ = proc.communicate(timeout=10)
                    self.stats = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}


@contextlib.contextmanager
def server_process(
    cmd: list[str], what: str, cpu: int | None = SERVER_CPU
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """Start a server process pinned to ``cpu`` (the server CPU); yield it and its port.

    The server prints ``PORT <n>`` when it listens and stops when its standard input closes.
    """
    proc = subprocess.Popen(
        pinned(cmd, cpu),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=run_dir(),
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"{what} did not start: {line!r}")
        yield proc, int(line.split()[1])
    finally:
        if proc.poll() is None:
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass
class ClientRun:
    """One measurement in a fresh process."""

    client: str
    mode: str
    n: int
    warmup: int
    options: dict[str, Any] = field(default_factory=dict)
    profile: str = ""
    timeout: float = 180.0

    def command(self, python: str, url: str) -> list[str]:
        cmd = [
            python,
            "-m",
            "benchmarks.run_client",
            self.client,
            self.mode,
            f"--url={url}",
            f"--n={self.n}",
            f"--warmup={self.warmup}",
            f"--options={json.dumps(self.options)}",
        ]
        if self.profile:
            cmd.append(f"--profile={self.profile}")
        return pinned(cmd, CLIENT_CPU)

    def once(self, python: str, url: str) -> dict[str, Any]:
        """Run once; the child's JSON result plus ``spawn_wall`` (seconds, spawn to exit)."""
        start = time.perf_counter()
        try:
            done = run_child(self.command(python, url), self.timeout)
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": f"timed out after {self.timeout:.0f} s"}
        wall = time.perf_counter() - start
        lines = done.stdout.strip().splitlines()
        try:
            result: dict[str, Any] = json.loads(lines[-1])
        except (IndexError, ValueError):
            tail = (done.stderr or done.stdout).strip()[-400:]
            return {"ok": False, "error": f"exit {done.returncode}: {tail}"}
        result["spawn_wall"] = wall
        return result


def summary(values: Sequence[float | None]) -> dict[str, float] | None:
    """Median, min and max of the present values (None when there are none)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {
        "median": statistics.median(present),
        "min": min(present),
        "max": max(present),
        "n": len(present),
    }


def client_spec(name: str) -> ClientSpec:
    """The registered client called ``name``."""
    return CLIENTS[name]


def log(message: str) -> None:
    """Progress on standard error, so standard output stays the report."""
    print(message, file=sys.stderr, flush=True)
