"""Real servers for end-to-end tests: the mock Z.AI server and the bot service.

Both are started through the CLI (``python -m generic_framework mock|serve``) on port 0; the
port is read from uvicorn's start-up line (``support.wait_logged_port``, shared with the CLI's
tests). Output goes to a log file (a pipe nobody reads could fill up and stall the server); the
log is shown when a start fails. An app built in the test runs under uvicorn in a thread instead
(:func:`served_in_thread`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import httpx
import uvicorn
from support import start_cli, wait_logged_port

REPO = Path(__file__).resolve().parents[2]
PERSONAS = REPO / "personas"
TOKEN = "e2e-token-5b1f0c9a7d"


class Process:
    """One ``python -m generic_framework ...`` server, started and stopped by the test."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str], cwd: Path) -> None:
        self.args = args
        self.log = log
        self.env = env
        self.cwd = cwd
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Process:
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = start_cli(
                self.args, self.env, cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT
            )
        port = wait_logged_port(self.proc, self.log, offset=offset, seconds=timeout)
        if port is not None:
            self.port = port
            return self
        self.stop()
        raise AssertionError(f"{self.args[0]} did not start:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, exactly like a crash or an OOM kill."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> Process:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def base_env(tmp: Path) -> dict[str, str]:
    """A minimal environment: nothing from the developer's shell or .env leaks in."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }


def mock_process(tmp: Path, *, latency_ms: int = 0, fixtures: Sequence[Path] = ()) -> Process:
    """The mock; ``fixtures`` (files or directories) replace the bundled set when given."""
    args = ["mock", "--host", "127.0.0.1", "--port", "0", "--latency-ms", str(latency_ms)]
    for path in fixtures:
        args += ["--fixtures", str(path)]
    return Process(args, tmp / "mock.log", base_env(tmp), tmp)


def mock_requests(mock: Process) -> int:
    """How many chat requests the mock has received (a turn's call waits there for its answer
    while the mock's latency runs)."""
    return int(httpx.get(f"{mock.url}/mock/report", timeout=5).json()["requests"])


def bot_process(tmp: Path, mock: Process, **extra: str) -> Process:
    env = {
        **base_env(tmp),
        "OPENAI_BASE_URL": f"{mock.url}/api/paas/v4",
        "OPENAI_API_KEY": "mock-key",
        "PERSONAS_DIR": str(PERSONAS),
        "DATA_DIR": str(tmp / "data"),
        "BOT_API_TOKEN": TOKEN,
        "LLM_MAX_RETRIES": "0",
        **extra,
    }
    return Process(["serve", "--host", "127.0.0.1", "--port", "0"], tmp / "bot.log", env, tmp)


@contextmanager
def served_in_thread(config: uvicorn.Config) -> Iterator[tuple[str, int]]:
    """Serve ``config`` (port 0) under uvicorn in a thread; the host and port it is bound to."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # bounds a hang only: a busy machine takes its time
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield "127.0.0.1", server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
