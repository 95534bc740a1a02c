"""Two services on one SQLite file: the second refuses to start (exit 2), naming DATABASE_URL.

Replicas sharing SQLite interleave the turns of a conversation (the file has no cross-process
turn lock); the compose scale profile without DATABASE_URL did exactly that, silently.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from support import free_port, run_cli, start_cli, wait_healthy

pytestmark = pytest.mark.e2e


def start(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = start_cli(
        ["serve", "--port", str(port)],
        env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    if wait_healthy(proc, url):
        return proc, url
    proc.kill()
    raise AssertionError(f"serve did not start: {proc.communicate()[1]}")


def serve_once(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(["serve", "--port", str(free_port())], env)


def test_a_second_service_on_the_same_sqlite_file_exits_2(env: dict[str, str]) -> None:
    first, _ = start(env)
    try:
        done = serve_once(env)
    finally:
        first.send_signal(signal.SIGKILL)  # a crash: the kernel drops its lock
        first.communicate(timeout=30)
    database = str(Path(env["DATA_DIR"]) / "conversations.sqlite3")
    assert done.returncode == 2
    assert done.stderr == (
        f"error: another service already uses the SQLite database {database!r}: replicas "
        "sharing one SQLite file interleave the turns of a conversation; set DATABASE_URL to a "
        "PostgreSQL database for several replicas (the compose scale profile needs it), or give "
        "each service its own DATA_DIR\n"
    )
    # The killed service left no stale lock: a new one starts.
    again, _ = start(env)
    again.terminate()
    again.communicate(timeout=30)


def test_services_with_their_own_data_dir_and_a_chat_beside_a_service_run(
    env: dict[str, str], tmp_path: Path
) -> None:
    first, _ = start(env)
    try:
        second, _ = start({**env, "DATA_DIR": str(tmp_path / "other")})
        second.terminate()
        second.communicate(timeout=30)
        chat = run_cli(["chat", "What is the capital of Canada?"], env)
        assert chat.returncode == 0, chat.stderr
    finally:
        first.terminate()
        first.communicate(timeout=30)
