"""What the MCP tests share: where the test server and the example persona are, and two
small process checks."""

from __future__ import annotations

import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
NOTES_SERVER = TESTS / "mcp_servers" / "notes_server.py"
EXAMPLES = REPO / "personas" / "examples"


def wait_for_pid(path: Path, timeout: float = 20.0, *, not_: int | None = None) -> int:
    """The pid a notes server wrote to ``path`` (another than ``not_``), once it is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pid = 0
        if pid and pid != not_:
            return pid
        time.sleep(0.02)
    raise AssertionError(f"no pid in {path}")


def wait_for_file(path: Path, timeout: float = 30.0) -> None:
    """Until ``path`` exists (a notes server's ``NOTES_WAITING_FILE``: its call is waiting)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.02)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
