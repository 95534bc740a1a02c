"""``serve --stay-on-config-error``: a configuration error is not a crash to restart.

compose's ``restart: unless-stopped`` restarts any exit, so a setting that cannot work looped
(8 restarts in 20 s). With the flag, serve prints the error, waits to be stopped, then exits 2.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import Lines

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_a_configuration_error_waits_to_be_stopped_then_exits_2(
    env: dict[str, str], tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "generic_framework", "serve", "--stay-on-config-error"],
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "PERSONAS_DIR": str(empty)},
        cwd=ROOT,
    )
    err = Lines(proc.stderr)
    try:
        err.wait("configuration error: not exiting until stopped")
        assert proc.poll() is None  # still there: nothing for a restart policy to retry
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 2
    lines = err.text().splitlines()
    assert lines[0].startswith("error: no persona files (*.toml) in ")
    assert lines[1].startswith("configuration error: not exiting until stopped")


def test_without_the_flag_a_configuration_error_exits_at_once(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "generic_framework", "serve"],
        capture_output=True,
        text=True,
        env={**env, "PERSONAS_DIR": str(tmp_path)},
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
