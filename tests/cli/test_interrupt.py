"""Ctrl-C during an interactive turn cancels that turn only; the session goes on."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from generic_framework.mock import MockServer

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(stream_path: Path, needle: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in stream_path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} never appeared in {stream_path.read_text()!r}")


@contextlib.contextmanager
def _sigint_caught() -> Iterator[None]:
    """Start children with SIGINT's default action, also when this process ignores it.

    A background job of a non-interactive shell starts with SIGINT ignored, which a child
    inherits (and Python then leaves ignored); a handler caught here is reset to the default by
    ``exec``, as a terminal's child would have it.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_cancels_the_turn_and_keeps_the_session(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ZAI_", "LLM_"))}
    stdout_path, stderr_path = tmp_path / "out.txt", tmp_path / "err.txt"
    with MockServer(latency_ms=1500) as server:
        env.update(
            OPENAI_API_KEY="k",
            OPENAI_BASE_URL=server.base_url,
            DATA_DIR=str(tmp_path / "data"),
            PERSONAS_DIR=str(ROOT / "personas"),
        )
        with stdout_path.open("w") as out, stderr_path.open("w") as err, _sigint_caught():
            proc = subprocess.Popen(
                [sys.executable, "-m", "generic_framework", "chat", "--conversation", "c1"],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                text=True,
                env=env,
                cwd=ROOT,
            )
            assert proc.stdin is not None
            try:
                proc.stdin.write("// what's the weather in Nanaimo?\n")
                proc.stdin.flush()
                _wait_for(stderr_path, "searching the web")
                proc.send_signal(signal.SIGINT)
                _wait_for(stderr_path, "cancelled")
                proc.stdin.write("What is the capital of Canada?\n/history\n/quit\n")
                proc.stdin.flush()
                assert proc.wait(timeout=30) == 0
            finally:
                proc.kill()
                proc.stdin.close()
                proc.wait()
    output = stdout_path.read_text()
    assert "Ottawa" in output
    assert "Nanaimo" not in output.replace("what's the weather in Nanaimo", "")
    # The cancelled turn left nothing in the history; the next turn is stored whole.
    assert "user: what's the weather" not in output
    assert "user: What is the capital of Canada?" in output
